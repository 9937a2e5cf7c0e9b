package import JetbridgeModel
internal import MessagePack

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Decodes a ``Record`` from MessagePack by hand: the aggregator's hot path, about ten times cheaper than Codable, and
/// the decoder behind ``RecordCoding`` (`package`: callers outside this package decode with ``RecordCoding``).
///
/// It accepts exactly what `MessagePackDecoder().decode(Record.self, from:)` (nesting limit ``nestingLimit``)
/// accepts and decodes it to an equal value: keys in any order; keys a record does not read (other strings, integer
/// keys) skipped with their structure checked; a key present twice, a missing key, a wrong type, an integer out of
/// range, invalid UTF-8, too deep nesting or bytes after the record rejected. Typed fields are checked as their
/// decoders check them (``FlightID``, ``Seat``, ``Owner``, UUID, scan point, record type). Errors are
/// `DecodingError`s with the coding path and the byte offset; rule violations carry a ``ValidationError``, so
/// `ValidationError(error)` names the field. It is the authority for errors too: a refused batch's reason is its
/// error. The differential tests and the fuzz target decode generated and mutated records both ways and compare.
///
/// It does not run ``Record/validate()``.
package struct RecordDecoder: Sendable {
    /// The deepest nesting of arrays and maps accepted, counting the record's own map as the first level.
    package var nestingLimit = WireProtocol.recordNestingLimit
    /// The most entries a map may hold (`MessagePackDecoder.maxMapEntries`, as the ground sets it).
    package var maxMapEntries = WireProtocol.maxMapEntries
    /// Also check strings and timestamps under keys a record does not read, as `MessagePackStructure.arrayElements`
    /// checks every element of frame 2. Off by default, to match `MessagePackDecoder`, which checks only their
    /// structure.
    package var validatesUnreadValues = false

    package init() {}

    /// Decodes one record.
    /// - Parameter bytes: Exactly one MessagePack map.
    /// - Returns: The record, not yet validated.
    /// - Throws: `DecodingError`; offsets count from the start of `bytes`.
    package func decode(from bytes: some ContiguousBytes) throws -> Record {
        var cache = Cache()
        return try decode(from: bytes, cache: &cache)
    }

    /// Decodes one record with what the records before it left in `cache` (``RecordCoding/Stream``): a flight id
    /// equal to the cached one is taken without its checks again. The result and errors are those of
    /// ``decode(from:)``.
    func decode(from bytes: some ContiguousBytes, cache: inout Cache) throws -> Record {
        try MessagePackReader.withReader(bytes) { reader in
            let record = try read(&reader, cache: &cache)
            try reader.expectEnd()
            return record
        }
    }

    /// What records of one batch usually share, so that decoding the second and later ones skips its checks and
    /// allocations: the last flight and the expected device id.
    struct Cache {
        var flight: FlightID?
        var device: String?

        init(device: String? = nil) {
            self.device = device
        }
    }

    // MARK: Record

    /// Reads one record at the reader's offset and leaves the reader after it.
    func read(_ reader: inout MessagePackReader, cache: inout Cache) throws -> Record {
        let mapOffset = reader.offset
        let count = try reader.readMapHeader()
        try checkDepth(0, at: mapOffset, [])
        try checkEntries(count, at: mapOffset, [])
        let kind = try recordKind(reader, count: count, mapOffset: mapOffset)
        switch kind {
        case .order: return .order(try readOrder(&reader, count: count, mapOffset: mapOffset, cache: &cache))
        case .scan: return .scan(try readScan(&reader, count: count, mapOffset: mapOffset, cache: &cache))
        }
    }

    enum Kind { case order, scan }

    /// Reads only what identifies a record (``RecordIdentity``): `type`, `id`, `flight` and an order's `revision`,
    /// each checked as ``decode(from:)`` checks it; every other value is stepped over with its structure checked,
    /// not decoded. For bytes that decoded whole once already (the agent's archive of acknowledged records), where a
    /// full decode would only repeat itself: it is several times cheaper.
    /// - Throws: `DecodingError` for a malformed map, a missing or ill-typed identifying field, or bytes after it.
    func identity(from bytes: some ContiguousBytes, cache: inout Cache) throws -> RecordIdentity {
        try MessagePackReader.withReader(bytes) { reader in
            let mapOffset = reader.offset
            let count = try reader.readMapHeader()
            try checkDepth(0, at: mapOffset, [])
            try checkEntries(count, at: mapOffset, [])
            let kind = try recordKind(reader, count: count, mapOffset: mapOffset)
            let wanted = Field.id.bit | Field.flight.bit | (kind == .order ? Field.revision.bit : 0)
            var seen: UInt32 = 0
            var id: UUID?
            var revision = 1
            var flight: FlightID?
            for _ in 0..<count {
                guard let field = try knownKey(&reader, in: wanted, seen: &seen, mapOffset: mapOffset, []) else {
                    try reader.skipValue(levels: nestingLimit - 1, validate: false, codingPath: [])
                    continue
                }
                switch field {
                case .id: id = try readUUID(&reader, [field.key])
                case .revision: revision = try reader.read(Int.self, codingPath: [field.key])
                case .flight: flight = try readFlight(&reader, cache: &cache, [field.key])
                default: preconditionFailure("not an identifying field: \(field)")
                }
            }
            try reader.expectEnd()
            guard let id else { throw missing(.id, []) }
            guard let flight else { throw missing(.flight, []) }
            guard seen & Field.revision.bit != 0 || kind == .scan else { throw missing(.revision, []) }
            return RecordIdentity(isOrder: kind == .order, id: id, revision: revision, flight: flight)
        }
    }

    /// The record's `type`, read ahead without moving the reader: at once when it is the first key, as writers put
    /// it; otherwise by stepping over the keys before it.
    func recordKind(_ reader: MessagePackReader, count: Int, mapOffset: Int) throws -> Kind {
        var probe = reader
        var type: MessagePackReader.StringBytes?
        for _ in 0..<count {
            if case .string(let key) = try probe.readKey(), probe.bytes(of: key, equal: "type") {
                type = try probe.readStringBytes(codingPath: [Field.type.key])
                break
            }
            try probe.skipValue(levels: nestingLimit - 1, validate: false)
        }
        guard let type else {
            // Before it calls a key missing, Codable has indexed the map's keys, so a key present twice comes first
            // (a fuzzed map without `type` and with an integer key twice found the difference).
            try reader.checkUniqueKeys(inMapAt: mapOffset)
            throw missing(.type, [])
        }
        // Order.recordType and Scan.recordType, as literals: compared without touching a String.
        if probe.bytes(of: type, equal: "order") { return .order }
        if probe.bytes(of: type, equal: "scan") { return .scan }
        let text = probe.string(type)
        throw invalid(
            ValidationError(
                .invalidRecordType, "unknown record type '\(JetbridgeModel.Validation.visible(text.prefix(80)))'; expected 'order' or 'scan'"),
            [Field.type.key])
    }

    func readOrder(_ reader: inout MessagePackReader, count: Int, mapOffset: Int, cache: inout Cache) throws -> Order {
        var id: UUID?
        var revision = 0
        var flight: FlightID?
        var seat: Seat?
        var lineItems: [LineItem] = []
        var currency = ""
        var createdAt = Date.distantPast
        var device = ""
        try readEntries(&reader, count: count, fields: Field.orderFields, mapOffset: mapOffset, depth: 0, []) {
            reader, field in
            switch field {
            case .type: try readType(&reader, "order", [field.key])
            case .id: id = try readUUID(&reader, [field.key])
            case .revision: revision = try reader.read(Int.self, codingPath: [field.key])
            case .flight: flight = try readFlight(&reader, cache: &cache, [field.key])
            case .seat: seat = try readSeat(&reader, [field.key])
            case .lineItems: lineItems = try readLineItems(&reader, depth: 1, [field.key])
            case .currency: currency = try reader.read(String.self, codingPath: [field.key])
            case .createdAt: createdAt = try reader.read(Date.self, codingPath: [field.key])
            case .device: device = try readDevice(&reader, cache: &cache, [field.key])
            default: preconditionFailure("not an order field: \(field)")
            }
        }
        return Order(
            id: id!, revision: revision, flight: flight!, seat: seat!, lineItems: lineItems, currency: currency,
            createdAt: createdAt, device: device)
    }

    func readScan(_ reader: inout MessagePackReader, count: Int, mapOffset: Int, cache: inout Cache) throws -> Scan {
        var id: UUID?
        var tag: LuggageTag?
        var point = ScanPoint.origin
        var scannedAt = Date.distantPast
        var flight: FlightID?
        var device = ""
        try readEntries(&reader, count: count, fields: Field.scanFields, mapOffset: mapOffset, depth: 0, []) {
            reader, field in
            switch field {
            case .type: try readType(&reader, "scan", [field.key])
            case .id: id = try readUUID(&reader, [field.key])
            case .tag: tag = try readTag(&reader, depth: 1, [field.key])
            case .point: point = try readPoint(&reader, [field.key])
            case .scannedAt: scannedAt = try reader.read(Date.self, codingPath: [field.key])
            case .flight: flight = try readFlight(&reader, cache: &cache, [field.key])
            case .device: device = try readDevice(&reader, cache: &cache, [field.key])
            default: preconditionFailure("not a scan field: \(field)")
            }
        }
        return Scan(id: id!, tag: tag!, point: point, scannedAt: scannedAt, flight: flight!, device: device)
    }

    // MARK: Nested values

    func readLineItems(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey]) throws
        -> [LineItem]
    {
        let count = try readArrayHeader(&reader, depth: depth, path())
        var lines: [LineItem] = []
        // An order has at most `Order.maxLines` lines (a longer one fails validation), so a hostile count reserves
        // no more than that: bounded by the bytes left only, it reserved up to 256 MiB for one 8 MiB batch.
        lines.reserveCapacity(Swift.min(count, Order.maxLines, reader.count - reader.offset))
        for index in 0..<count {
            lines.append(try readLineItem(&reader, depth: depth + 1, path() + [Field.index(index)]))
        }
        return lines
    }

    func readLineItem(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey]) throws
        -> LineItem
    {
        var item: Item?
        var number = 0
        try readMap(&reader, fields: Field.lineItemFields, depth: depth, path()) { reader, field in
            switch field {
            case .item: item = try readItem(&reader, depth: depth + 1, path() + [field.key])
            default: number = try reader.read(Int.self, codingPath: path() + [field.key])
            }
        }
        return LineItem(item: item!, count: number)
    }

    func readItem(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey]) throws
        -> Item
    {
        var name = ""
        var unitPrice = 0
        try readMap(&reader, fields: Field.itemFields, depth: depth, path()) { reader, field in
            switch field {
            case .name: name = try reader.read(String.self, codingPath: path() + [field.key])
            default: unitPrice = try reader.read(Int.self, codingPath: path() + [field.key])
            }
        }
        return Item(name: name, unitPrice: unitPrice)
    }

    func readTag(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey]) throws
        -> LuggageTag
    {
        var id: UUID?
        var owner: Owner?
        var weight = 0.0
        try readMap(&reader, fields: Field.tagFields, depth: depth, path()) { reader, field in
            switch field {
            case .id: id = try readUUID(&reader, path() + [field.key])
            case .owner: owner = try readOwner(&reader, depth: depth + 1, path() + [field.key])
            default: weight = LuggageTag.recordPrecision(try reader.read(Double.self, codingPath: path() + [field.key]))
            }
        }
        return LuggageTag(id: id!, owner: owner!, weight: weight)
    }

    func readOwner(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey]) throws
        -> Owner
    {
        let count = try readArrayHeader(&reader, depth: depth, path())
        guard count == 2 else {
            throw invalid(
                ValidationError(
                    .invalidOwner,
                    "owner must be a two-element array [initial, family] such as [\"D\", \"ZMU\"]; got \(count) elements"
                ), path())
        }
        let initial = try reader.read(String.self, codingPath: path() + [Field.index(0)])
        let family = try reader.read(String.self, codingPath: path() + [Field.index(1)])
        do {
            return try Owner(initial: initial, family: family)
        } catch var error as ValidationError {
            error.path = ""
            throw invalid(error, path())
        }
    }

    // MARK: Strings with rules

    func readType(
        _ reader: inout MessagePackReader, _ expected: StaticString, _ path: @autoclosure () -> [any CodingKey]
    )
        throws
    {
        let type = try reader.readStringBytes(codingPath: path())
        guard reader.bytes(of: type, equal: expected) else {
            // Only reachable when `recordKind` read another key; kept for a clear error all the same.
            throw invalid(
                ValidationError(
                    .invalidRecordType,
                    "record type is '\(JetbridgeModel.Validation.visible(reader.string(type).prefix(80)))' where '\(expected)' was expected"), path())
        }
    }

    func readUUID(_ reader: inout MessagePackReader, _ path: @autoclosure () -> [any CodingKey]) throws -> UUID {
        let text = try reader.readStringBytes(codingPath: path())
        guard let uuid = MessagePackReader.uuid(reader.bytes(of: text)) else {
            throw invalid(
                ValidationError(
                    .invalidUUID,
                    "'\(JetbridgeModel.Validation.visible(reader.string(text).prefix(80)))' is not a UUID; expected the canonical form like "
                        + "F432BDB8-D84F-4461-8362-AFF89F6C493E"), path())
        }
        return uuid
    }

    func readFlight(_ reader: inout MessagePackReader, cache: inout Cache, _ path: @autoclosure () -> [any CodingKey])
        throws -> FlightID
    {
        let text = try reader.readStringBytes(codingPath: path())
        if let flight = cache.flight, reader.bytes(of: text, equal: flight.rawValue) {
            return flight
        }
        do {
            let flight = try FlightID(reader.string(text))
            cache.flight = flight
            return flight
        } catch let error as ValidationError {
            throw invalid(error, path())
        }
    }

    func readSeat(_ reader: inout MessagePackReader, _ path: @autoclosure () -> [any CodingKey]) throws -> Seat {
        let text = try reader.readStringBytes(codingPath: path())
        do {
            return try Seat(reader.string(text))
        } catch let error as ValidationError {
            throw invalid(error, path())
        }
    }

    func readDevice(_ reader: inout MessagePackReader, cache: inout Cache, _ path: @autoclosure () -> [any CodingKey])
        throws -> String
    {
        let text = try reader.readStringBytes(codingPath: path())
        if let device = cache.device, reader.bytes(of: text, equal: device) {
            return device
        }
        return reader.string(text)
    }

    func readPoint(_ reader: inout MessagePackReader, _ path: @autoclosure () -> [any CodingKey]) throws -> ScanPoint {
        let text = try reader.readStringBytes(codingPath: path())
        if reader.bytes(of: text, equal: "origin") { return .origin }
        if reader.bytes(of: text, equal: "destination") { return .destination }
        throw invalid(
            ValidationError(
                .invalidScanPoint,
                "scan point '\(JetbridgeModel.Validation.visible(reader.string(text).prefix(80)))' is unknown; use origin or destination"), path())
    }

    // MARK: Keys

    /// Reads a key; returns its field when it is one of `fields`, nil for any other key (to be skipped).
    @inline(__always)
    func knownKey(
        _ reader: inout MessagePackReader, in fields: UInt32, seen: inout UInt32, mapOffset: Int,
        _ path: @autoclosure () -> [any CodingKey]
    ) throws -> Field? {
        guard case .string(let name) = try reader.readKey(codingPath: path()),
            let field = Field(reader.bytes(of: name)), fields & field.bit != 0
        else { return nil }
        guard seen & field.bit == 0 else {
            throw MessagePackReader.duplicateKeyError(field.key.stringValue, inMapAt: mapOffset, codingPath: path())
        }
        seen |= field.bit
        return field
    }

    /// Reads a map nested at level `depth` (its header, the depth check, then its entries as ``readEntries``).
    @inline(__always)
    func readMap(
        _ reader: inout MessagePackReader, fields: UInt32, depth: Int, _ path: @autoclosure () -> [any CodingKey],
        _ readField: (inout MessagePackReader, Field) throws -> Void
    ) throws {
        let mapOffset = reader.offset
        let count = try reader.readMapHeader(codingPath: path())
        try checkDepth(depth, at: mapOffset, path())
        try checkEntries(count, at: mapOffset, path())
        try readEntries(&reader, count: count, fields: fields, mapOffset: mapOffset, depth: depth, path(), readField)
    }

    /// Reads the header of an array nested at level `depth` and checks the depth; returns its count.
    @inline(__always)
    func readArrayHeader(_ reader: inout MessagePackReader, depth: Int, _ path: @autoclosure () -> [any CodingKey])
        throws -> Int
    {
        let arrayOffset = reader.offset
        let count = try reader.readArrayHeader(codingPath: path())
        try checkDepth(depth, at: arrayOffset, path())
        return count
    }

    /// Reads the `count` entries of the map whose header is at `mapOffset` (at nesting level `depth`): each key of
    /// `fields` once, handed to `readField`; any other key's value skipped with its structure checked, as the Codable
    /// decoder does; then ``finish(_:seen:required:unread:mapOffset:_:)``.
    @inline(__always)
    func readEntries(
        _ reader: inout MessagePackReader, count: Int, fields: UInt32, mapOffset: Int, depth: Int,
        _ path: @autoclosure () -> [any CodingKey], _ readField: (inout MessagePackReader, Field) throws -> Void
    ) throws {
        var seen: UInt32 = 0
        var unread = false
        for _ in 0..<count {
            guard let field = try knownKey(&reader, in: fields, seen: &seen, mapOffset: mapOffset, path()) else {
                unread = true
                try reader.skipValue(
                    levels: nestingLimit - depth - 1, validate: validatesUnreadValues, codingPath: path())
                continue
            }
            try readField(&reader, field)
        }
        try finish(reader, seen: seen, required: fields, unread: unread, mapOffset: mapOffset, path())
    }

    /// After a map's last entry: every required key was there, and no key was there twice.
    func finish(
        _ reader: MessagePackReader, seen: UInt32, required: UInt32, unread: Bool, mapOffset: Int,
        _ path: @autoclosure () -> [any CodingKey]
    ) throws {
        // Known keys were counted; others may repeat each other, which the Codable decoder rejects too, and before
        // it looks for a missing key (it indexes a map's keys first).
        if unread {
            try reader.checkUniqueKeys(inMapAt: mapOffset, codingPath: path())
        }
        if seen != required {
            let absent = required & ~seen
            throw missing(Field(bit: absent & (~absent &+ 1)), path())
        }
    }

    func checkEntries(_ count: Int, at offset: Int, _ path: @autoclosure () -> [any CodingKey]) throws {
        guard count <= maxMapEntries else {
            throw MessagePackReader.tooManyEntriesError(count, at: offset, limit: maxMapEntries, codingPath: path())
        }
    }

    func checkDepth(_ depth: Int, at offset: Int, _ path: @autoclosure () -> [any CodingKey]) throws {
        guard depth < nestingLimit else {
            throw MessagePackReader.nestingError(at: offset, limit: nestingLimit, codingPath: path())
        }
    }

    func missing(_ field: Field, _ path: [any CodingKey]) -> DecodingError {
        DecodingError.keyNotFound(
            field.key,
            DecodingError.Context(
                codingPath: path, debugDescription: "No value associated with key \"\(field.key.stringValue)\""))
    }

    /// A rule broken inside a typed field, wrapped as the model's decoders wrap it.
    func invalid(_ error: ValidationError, _ path: [any CodingKey]) -> DecodingError {
        var error = error
        error.path = ValidationError.path(path)
        return .dataCorrupted(.init(codingPath: path, debugDescription: error.message, underlyingError: error))
    }
}

/// The keys of records and of the maps inside them.
enum Field: Int, CaseIterable {
    case type, id, revision, flight, seat, lineItems, currency, createdAt, device
    case tag, point, scannedAt
    case item, count, name, unitPrice, owner, weight

    var bit: UInt32 { 1 << UInt32(rawValue) }

    init(bit: UInt32) {
        self = Field(rawValue: bit.trailingZeroBitCount)!
    }

    static let orderFields: UInt32 = 0b1_1111_1111  // type … device
    static let scanFields: UInt32 = 0b1111_0000_1011  // type, id, flight, device, tag, point, scannedAt
    static let lineItemFields: UInt32 = 0b11 << 12  // item, count
    static let itemFields: UInt32 = 0b11 << 14  // name, unitPrice
    static let tagFields: UInt32 = 0b11 << 16 | 0b10  // id, owner, weight

    var name: StaticString {
        switch self {
        case .type: "type"
        case .id: "id"
        case .revision: "revision"
        case .flight: "flight"
        case .seat: "seat"
        case .lineItems: "lineItems"
        case .currency: "currency"
        case .createdAt: "createdAt"
        case .device: "device"
        case .tag: "tag"
        case .point: "point"
        case .scannedAt: "scannedAt"
        case .item: "item"
        case .count: "count"
        case .name: "name"
        case .unitPrice: "unitPrice"
        case .owner: "owner"
        case .weight: "weight"
        }
    }

    /// The key in coding paths; the Codable decoder's key types, so paths read alike (indexes as `[2]` in
    /// ``ValidationError/path(_:)``).
    var key: AnyCodingKey { AnyCodingKey(stringValue: name.description) }

    static func index(_ index: Int) -> IndexKey { IndexKey(index: index) }

    /// The field whose name is `bytes`, if any: by length, then by bytes.
    init?(_ bytes: UnsafeBufferPointer<UInt8>) {
        @inline(__always) func matches(_ field: Field) -> Bool {
            memcmp(bytes.baseAddress!, field.name.utf8Start, bytes.count) == 0
        }
        let found: Field?
        switch bytes.count {
        case 2: found = matches(.id) ? .id : nil
        case 3: found = matches(.tag) ? .tag : nil
        case 4:
            found =
                matches(.type) ? .type : matches(.seat) ? .seat : matches(.item) ? .item : matches(.name) ? .name : nil
        case 5: found = matches(.count) ? .count : matches(.point) ? .point : matches(.owner) ? .owner : nil
        case 6: found = matches(.flight) ? .flight : matches(.device) ? .device : matches(.weight) ? .weight : nil
        case 8: found = matches(.revision) ? .revision : matches(.currency) ? .currency : nil
        case 9:
            found =
                matches(.lineItems)
                ? .lineItems
                : matches(.createdAt)
                    ? .createdAt : matches(.scannedAt) ? .scannedAt : matches(.unitPrice) ? .unitPrice : nil
        default: found = nil
        }
        guard let found else { return nil }
        self = found
    }
}
