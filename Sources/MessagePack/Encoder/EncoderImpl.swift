#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The `Encoder` handed to every `encode(to:)`: one object per encoding, one byte buffer, a stack of open containers.
///
/// An open array or map starts with a one-byte fix header whose count is patched after each element; when the count
/// outgrows it (16, then 65,536) the payload moves right once to make room for the wider header. Only the innermost
/// open container may grow, so nothing after it has to move.
///
/// `MessagePackEncoder` makes one per call as a handle that owns the output buffer; the encoding itself runs on a
/// worker that each thread keeps between calls (`encodeTopLevel`), so that encoding record by record reuses its
/// stacks and keyed containers instead of making them again for every record.
final class EncoderImpl: Encoder, CodingPathStack {
    struct Frame {
        var header: Int
        var count: Int
        var isMap: Bool
        var id: Int
    }

    @exclusivity(unchecked) var writer = ByteWriter(capacity: 512)
    /// The innermost open container, kept out of `frames` because nearly every write touches it.
    @exclusivity(unchecked) var top = Frame(header: 0, count: 0, isMap: false, id: 0)
    /// The open containers around `top`, outermost first.
    @exclusivity(unchecked) var frames: [Frame] = []
    @exclusivity(unchecked) var nextFrameID = 0
    /// Keys of the current coding path; only the first `depth` are meaningful.
    @exclusivity(unchecked) var keys: [any CodingKey] = []
    @exclusivity(unchecked) var depth = 0
    /// Where the value being encoded by the current `encode(to:)` starts.
    @exclusivity(unchecked) var valueStart = 0
    /// Where a `Dictionary` opened its keyed container, so its entries can be rewritten in sorted order.
    @exclusivity(unchecked) var dictionaryStart = -1
    @exclusivity(unchecked) var deferredError: (any Error)?
    @exclusivity(unchecked) var options: MessagePackEncoder
    @exclusivity(unchecked) var usesDefaultKeys: Bool
    @exclusivity(unchecked) var snakeCaseCache: [String: String] = [:]
    /// Set only while finding out which key type `Dictionary` encodes with.
    var probedKeyType: ObjectIdentifier?
    /// The keyed containers `container(keyedBy:)` made, by depth, to hand out again (see `KeyedEncoderSlot`).
    @exclusivity(unchecked) var keyedContainers: [KeyedEncoderSlot] = []
    /// Whether this is a thread's (or a nested call's) worker, rather than a call's handle.
    private var isWorker = false
    /// Whether this worker reuses keyed containers (`KeyedEncoderSlot.isPossible`, read once, not per map).
    private var reusesContainers = false
    /// `Self.dictionaryKeyType`, read once: a static's lazy-initialization check costs ~40 instructions a map.
    private var dictionaryKeyType: ObjectIdentifier?
    /// Whether an encoding on this thread is running on this worker (a custom strategy may encode inside one).
    private var inUse = false

    /// Makes the handle for one `encode` call. The encoding itself runs on this thread's worker (`encodeTopLevel`).
    init(options: MessagePackEncoder) {
        self.options = options
        usesDefaultKeys = Self.usesDefaultKeys(options)
    }

    private static func usesDefaultKeys(_ options: MessagePackEncoder) -> Bool {
        if case .useDefaultKeys = options.keyEncodingStrategy {
            return true
        }
        return false
    }

    deinit {
        if ownsBuffer {
            writer.deallocate()
        }
    }

    private var ownsBuffer = true

    /// The finished bytes as `Data` that owns the buffer; call once, at the end.
    func takeData() -> Data {
        ownsBuffer = false
        return writer.takeData()
    }

    /// The standard library's private key type for `Dictionary`, found once by watching a dictionary encode itself.
    static let dictionaryKeyType: ObjectIdentifier? = {
        let probe = EncoderImpl(options: MessagePackEncoder())
        probe.probedKeyType = ObjectIdentifier(EncoderImpl.self)
        try? ["": 0].encode(to: probe)
        return probe.probedKeyType
    }()

    var userInfo: [CodingUserInfoKey: Any] { options.userInfo.mapValues { $0 as Any } }

    // MARK: Top level

    /// One worker per thread, kept between calls so that encoding record by record keeps its stacks and containers.
    private static let workerKey: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            let worker = Unmanaged<EncoderImpl>.fromOpaque(pointer)
            // The kept containers hold the worker; let go of them first, so that it is freed.
            worker.takeUnretainedValue().keyedContainers = []
            worker.release()
        }
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// This thread's worker, ready to encode with `options`; give it back with `relinquish()`.
    private static func worker(options: MessagePackEncoder) -> EncoderImpl {
        if let pointer = pthread_getspecific(workerKey) {
            let worker = Unmanaged<EncoderImpl>.fromOpaque(pointer).takeUnretainedValue()
            if !worker.inUse {
                worker.begin(options: options)
                return worker
            }
            // An encoding inside an encoding gets a worker of its own.
            let nested = EncoderImpl(options: options)
            nested.begin(options: options)
            return nested
        }
        let worker = EncoderImpl(options: options)
        pthread_setspecific(workerKey, Unmanaged.passRetained(worker).toOpaque())
        worker.begin(options: options)
        return worker
    }

    private func begin(options: MessagePackEncoder) {
        if !isWorker {
            isWorker = true
            reusesContainers = KeyedEncoderSlot.isPossible
            dictionaryKeyType = Self.dictionaryKeyType
            // One allocation each instead of regrowing from empty.
            keys.reserveCapacity(8)
            frames.reserveCapacity(8)
        }
        self.options = options
        usesDefaultKeys = Self.usesDefaultKeys(options)
        inUse = true
    }

    /// Ends an encoding: forgets its state and the caller's options, keeps the allocations and containers.
    private func relinquish() {
        options = MessagePackEncoder()
        frames.removeAll(keepingCapacity: true)
        top = Frame(header: 0, count: 0, isMap: false, id: 0)
        depth = 0
        valueStart = 0
        dictionaryStart = -1
        deferredError = nil
        if snakeCaseCache.count > 256 {
            snakeCaseCache = [:]
        }
        if keyedContainers.count > 64
            || pthread_getspecific(Self.workerKey) != Unmanaged.passUnretained(self).toOpaque()
        {
            // A nested call's worker is dropped after the call; its containers would keep it alive.
            keyedContainers = []
        }
        inUse = false
    }

    /// Encodes `value` on this thread's worker, into this handle's buffer.
    func encodeTopLevel<T: Encodable>(_ value: T) throws {
        let worker = Self.worker(options: options)
        swap(&writer, &worker.writer)
        defer {
            swap(&writer, &worker.writer)
            worker.relinquish()
        }
        try worker.encodeWhole(value)
    }

    private func encodeWhole<T: Encodable>(_ value: T) throws {
        try encodeValue(value)
        if let deferredError {
            throw deferredError
        }
        if writer.count == 0 {
            throw EncodingError.invalidValue(
                value,
                EncodingError.Context(
                    codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
    }

    // MARK: Containers

    /// The frame id of a dead container, which no frame has.
    static let deadFrameID = -1

    /// Opens an array or map with a placeholder fix header and makes it the innermost open container.
    func openFrame(isMap: Bool) -> Int {
        nextFrameID += 1
        return openFrame(isMap: isMap, id: nextFrameID)
    }

    /// Opens an array or map whose id is given; it must differ from every open one's.
    func openFrame(isMap: Bool, id: Int) -> Int {
        if top.id != 0 {
            frames.append(top)
        }
        top = Frame(header: writer.count, count: 0, isMap: isMap, id: id)
        writer.writeByte(isMap ? 0x80 : 0x90)
        return id
    }

    /// Makes the container `id` the innermost open one again, closing those opened inside it.
    @inline(__always)
    func activate(_ id: Int, codingPath: @autoclosure () -> [any CodingKey]) throws {
        if top.id != id {
            try reopen(id, codingPath: codingPath)
        }
    }

    func reopen(_ id: Int, codingPath: () -> [any CodingKey]) throws {
        if id != Self.deadFrameID, let index = frames.lastIndex(where: { $0.id == id }) {
            top = frames[index]
            frames.removeSubrange(index...)
            return
        }
        if let deferredError {
            throw deferredError
        }
        throw EncodingError.invalidValue(
            id,
            EncodingError.Context(
                codingPath: codingPath(),
                debugDescription:
                    "A container was written to after a container opened beside or around it; MessagePackEncoder "
                    + "writes bytes once, so fill each container before opening the next"))
    }

    /// Counts one more element in the innermost open container and patches its header.
    @inline(__always)
    func bump() throws {
        let count = top.count + 1
        top.count = count
        if count < 16 {
            writer.patch(top.header, (top.isMap ? 0x80 : 0x90) | UInt8(truncatingIfNeeded: count))
        } else {
            try grow(count)
        }
    }

    func grow(_ count: Int) throws {
        let header = top.header
        let isMap = top.isMap
        if count <= 0xffff {
            if count == 16 {
                writer.insertGap(2, at: header + 1)
            }
            writer.patch(header, isMap ? 0xde : 0xdc)
            writer.patch(header + 1, UInt8(truncatingIfNeeded: count >> 8))
            writer.patch(header + 2, UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            if count == 0x1_0000 {
                writer.insertGap(2, at: header + 3)
            }
            writer.patch(header, isMap ? 0xdf : 0xdd)
            writer.patch(header + 1, UInt8(truncatingIfNeeded: count >> 24))
            writer.patch(header + 2, UInt8(truncatingIfNeeded: count >> 16))
            writer.patch(header + 3, UInt8(truncatingIfNeeded: count >> 8))
            writer.patch(header + 4, UInt8(truncatingIfNeeded: count))
        } else {
            throw ByteWriter.tooLong(isMap ? "map" : "array", count)
        }
    }

    func writeKey(_ key: some CodingKey, depth: Int) throws {
        if usesDefaultKeys {
            try writer.writeString(key.stringValue)
            return
        }
        switch options.keyEncodingStrategy {
        case .useDefaultKeys:
            try writer.writeString(key.stringValue)
        case .convertToSnakeCase:
            let name = key.stringValue
            if let converted = snakeCaseCache[name] {
                try writer.writeString(converted)
            } else {
                let converted = KeyConversion.toSnakeCase(name)
                snakeCaseCache[name] = converted
                try writer.writeString(converted)
            }
        case .custom(let convert):
            try writer.writeString(convert(path(depth: depth, parentKey: nil) + [key]).stringValue)
        }
    }

    /// Keeps the first error of a container call that cannot throw, for `encode` to throw when the value is done.
    func deferError(_ error: any Error) {
        if deferredError == nil {
            deferredError = error
        }
    }

    func deadContainer<Key: CodingKey>(_ error: any Error, keyedBy: Key.Type) -> KeyedEncodingContainer<Key> {
        deferError(error)
        return KeyedEncodingContainer(
            KeyedEncoder<Key>(impl: self, frame: Self.deadFrameID, depth: depth, parentKey: nil))
    }

    func misuse(_ what: String) -> EncodingError {
        EncodingError.invalidValue(
            what,
            EncodingError.Context(
                codingPath: codingPath,
                debugDescription: "\(what) was requested after this value had already written something"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if let probe = probedKeyType {
            if probe == ObjectIdentifier(EncoderImpl.self) {
                probedKeyType = ObjectIdentifier(Key.self)
            }
        } else if ObjectIdentifier(Key.self) == (isWorker ? dictionaryKeyType : Self.dictionaryKeyType) {
            dictionaryStart = valueStart
        }
        if writer.count != valueStart {
            // A second keyed container for the same value (a subclass and its superclass) shares the map.
            if let frame = openFrame(at: valueStart), frame.isMap {
                return KeyedEncodingContainer(
                    KeyedEncoder<Key>(impl: self, frame: frame.id, depth: depth, parentKey: nil))
            }
            return deadContainer(misuse("A keyed container"), keyedBy: Key.self)
        }
        // Making a container costs three generic metadata lookups (`KeyedEncoder<Key>`, its conformance, the
        // stdlib's box), a box allocation and its release: in callgrind ~1,000 instructions a map, about a third of
        // encoding an order. So a worker keeps the container it made at each depth, and the next map at that depth
        // with the same key type gets it back, now ~250 instructions (the `KeyedEncodingContainer<Key>` metadata
        // remains). Its frame id is the depth's own (`slotFrameID`), so the container stays as it was made.
        let slotID = Self.slotFrameID(depth: depth)
        let reusable = reusesContainers && slotIsFree(depth: depth, id: slotID)
        let id = reusable ? openFrame(isMap: true, id: slotID) : openFrame(isMap: true)
        if reusable, keyedContainers[depth].keyType == ObjectIdentifier(Key.self), let box = keyedContainers[depth].box
        {
            return unsafeBitCast(box, to: KeyedEncodingContainer<Key>.self)
        }
        let container = KeyedEncodingContainer(KeyedEncoder<Key>(impl: self, frame: id, depth: depth, parentKey: nil))
        if reusable {
            keyedContainers[depth] = KeyedEncoderSlot(
                keyType: ObjectIdentifier(Key.self), box: unsafeBitCast(container, to: AnyObject.self))
        }
        return container
    }

    /// The frame id of maps written by the container kept for `depth`; made ids count up from 1.
    @inline(__always)
    static func slotFrameID(depth: Int) -> Int {
        -2 - depth
    }

    /// Whether the container kept for `depth` may be handed out again or replaced: nobody holds it (a container
    /// kept past its value's `encode(to:)` must still write to its own map, or refuse), and its map is closed, so
    /// that frame ids stay unique among open maps.
    private func slotIsFree(depth: Int, id: Int) -> Bool {
        while keyedContainers.count <= depth {
            keyedContainers.append(KeyedEncoderSlot())
        }
        // In place: through `keyedContainers[depth]!`, the check saw a copy and was never true.
        if keyedContainers[depth].box != nil && !isKnownUniquelyReferenced(&keyedContainers[depth].box) {
            return false
        }
        return top.id != id && !frames.contains(where: { $0.id == id })
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if writer.count != valueStart {
            if let frame = openFrame(at: valueStart), !frame.isMap {
                return UnkeyedEncoder(impl: self, frame: frame.id, depth: depth, parentKey: nil, count: frame.count)
            }
            deferError(misuse("An unkeyed container"))
            return UnkeyedEncoder(impl: self, frame: Self.deadFrameID, depth: depth, parentKey: nil, count: 0)
        }
        let id = openFrame(isMap: false)
        return UnkeyedEncoder(impl: self, frame: id, depth: depth, parentKey: nil, count: 0)
    }

    /// The open container whose header is at `offset`, if any.
    func openFrame(at offset: Int) -> Frame? {
        if top.id != 0 && top.header == offset {
            return top
        }
        return frames.last(where: { $0.header == offset })
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoder(impl: self, depth: depth, start: valueStart)
    }

    /// Lets `MessagePackValue` and `MessagePackTimestamp` write themselves as one value.
    func encodeSingle(_ body: (inout ByteWriter) throws -> Void) throws {
        guard writer.count == valueStart else {
            throw misuse("A single value")
        }
        try body(&writer)
    }

    // MARK: Values

    /// Encodes a value one level below the container at `depth - 1`, under `key`.
    func encodeNested<T: Encodable>(_ value: T, depth nestedDepth: Int, key: any CodingKey) throws {
        setKey(key, depth: nestedDepth)
        let savedDepth = depth
        depth = nestedDepth
        defer { depth = savedDepth }
        let start = writer.count
        try encodeValue(value)
        if writer.count == start {
            // A value that encodes nothing still needs a value after its key: `{}`, as JSONEncoder writes.
            writer.writeByte(0x80)
        }
    }

    /// Encodes a value at the current depth, with the types MessagePack represents natively written directly.
    func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == String.self {
            try writer.writeString(reinterpret(value, as: String.self))
        } else if T.self == Int.self {
            writer.writeInt(Int64(reinterpret(value, as: Int.self)))
        } else if T.self == Double.self {
            writer.writeDouble(reinterpret(value, as: Double.self))
        } else if T.self == Bool.self {
            writer.writeBool(reinterpret(value, as: Bool.self))
        } else if T.self == Date.self {
            try encodeDate(reinterpret(value, as: Date.self))
        } else if T.self == UUID.self {
            writer.writeUUID(reinterpret(value, as: UUID.self))
        } else if T.self == Data.self {
            try writer.writeBinary(reinterpret(value, as: Data.self))
        } else if T.self == URL.self {
            try writer.writeString(reinterpret(value, as: URL.self).absoluteString)
        } else if T.self == MessagePackValue.self {
            try writer.writeValue(reinterpret(value, as: MessagePackValue.self))
        } else if T.self == MessagePackTimestamp.self {
            writer.writeTimestamp(reinterpret(value, as: MessagePackTimestamp.self))
        } else {
            let start = writer.count
            try encodeThroughSelf(value.encode(to:))
            if dictionaryStart == start {
                dictionaryStart = -1
                try rewriteSorted(value, from: start)
            }
        }
    }

    /// Encodes a `Dictionary` again with its keys sorted, over the entries it wrote in its own (per-process) order.
    ///
    /// Only `Dictionary` with `String` or `Int` keys is rewritten; other key types keep their iteration order.
    func rewriteSorted<T: Encodable>(_ value: T, from start: Int) throws {
        guard let dictionary = value as? any SortedDictionaryEncodable else { return }
        writer.truncate(to: start)
        while top.id != 0 && top.header >= start {
            top = frames.popLast() ?? Frame(header: 0, count: 0, isMap: false, id: 0)
        }
        try dictionary.encodeSorted(into: self)
    }

    func encodeThroughSelf(_ body: (any Encoder) throws -> Void) throws {
        let savedStart = valueStart
        valueStart = writer.count
        defer { valueStart = savedStart }
        try body(self)
    }

    func encodeDate(_ date: Date) throws {
        switch options.dateEncodingStrategy {
        case .timestamp:
            guard let timestamp = MessagePackTimestamp(exactly: date) else {
                throw EncodingError.invalidValue(
                    date,
                    EncodingError.Context(
                        codingPath: codingPath,
                        debugDescription: "\(date.timeIntervalSince1970) seconds since 1970 is not a timestamp"))
            }
            writer.writeTimestamp(timestamp)
        case .deferredToDate:
            try encodeThroughSelf(date.encode(to:))
        case .secondsSince1970:
            writer.writeDouble(date.timeIntervalSince1970)
        case .millisecondsSince1970:
            writer.writeDouble(date.timeIntervalSince1970 * 1000)
        case .iso8601:
            try writer.writeString(date.formatted(.iso8601))
        case .custom(let encode):
            try encodeThroughSelf { try encode(date, $0) }
        }
    }
}

/// A keyed container a worker's `container(keyedBy:)` made, kept for the next map at its depth.
struct KeyedEncoderSlot {
    var keyType: ObjectIdentifier?
    /// The container's one stored property, the stdlib's box around its `KeyedEncoder`, so that its uniqueness
    /// shows whether anyone else still holds the container.
    var box: AnyObject?

    /// Whether a `KeyedEncodingContainer` is one reference to its box, as it has been in every Swift release
    /// (`_box`). Checked once by reflection, so that a change in the stdlib turns reuse off rather than crashing.
    static let isPossible: Bool = {
        let container = KeyedEncodingContainer(
            KeyedEncoder<AnyCodingKey>(
                impl: EncoderImpl(options: MessagePackEncoder()), frame: EncoderImpl.deadFrameID, depth: 0,
                parentKey: nil))
        let children = Mirror(reflecting: container).children
        guard MemoryLayout<KeyedEncodingContainer<AnyCodingKey>>.size == MemoryLayout<AnyObject>.size,
            children.count == 1, let box = children.first?.value, type(of: box) is AnyClass
        else {
            return false
        }
        let stored = withUnsafeBytes(of: container) { $0.load(as: UnsafeRawPointer.self) }
        return stored == UnsafeRawPointer(Unmanaged.passUnretained(box as AnyObject).toOpaque())
    }()
}

/// Reads a value of generic type `T` as the concrete type `U` that the caller has just checked `T` to be.
@inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    withUnsafePointer(to: value) { UnsafeRawPointer($0).load(as: U.self) }
}

extension ByteWriter {
    /// Writes the canonical uppercase text of a UUID (`uuidString`) without building a `String`.
    mutating func writeUUID(_ uuid: UUID) {
        writeByte(0xd9)
        writeByte(36)
        let digits: StaticString = "0123456789ABCDEF"
        reserve(36)
        var out = base + count
        withUnsafeBytes(of: uuid.uuid) { raw in
            digits.withUTF8Buffer { hex in
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        out.pointee = UInt8(ascii: "-")
                        out += 1
                    }
                    let byte = raw[i]
                    out[0] = hex[Int(byte >> 4)]
                    out[1] = hex[Int(byte & 0x0f)]
                    out += 2
                }
            }
        }
        count += 36
    }
}

/// Dictionaries whose keys are sorted before encoding, so equal dictionaries give equal bytes in every process.
protocol SortedDictionaryEncodable {
    func encodeSorted(into impl: EncoderImpl) throws
}

/// Dictionary key types that become map keys: `String` as str, `Int` as an integer.
protocol MapKeyEncodable: Comparable {
    func write(into writer: inout ByteWriter) throws
    var codingKey: AnyCodingKey { get }
}

extension String: MapKeyEncodable {
    func write(into writer: inout ByteWriter) throws {
        try writer.writeString(self)
    }

    var codingKey: AnyCodingKey { AnyCodingKey(stringValue: self) }
}

extension Int: MapKeyEncodable {
    func write(into writer: inout ByteWriter) throws {
        writer.writeInt(Int64(self))
    }

    var codingKey: AnyCodingKey { AnyCodingKey(intValue: self) }
}

extension Dictionary: SortedDictionaryEncodable where Key: MapKeyEncodable, Value: Encodable {
    func encodeSorted(into impl: EncoderImpl) throws {
        try impl.writer.writeMapHeader(count)
        let depth = impl.depth
        for (key, value) in self.sorted(by: { $0.key < $1.key }) {
            try key.write(into: &impl.writer)
            try impl.encodeNested(value, depth: depth + 1, key: key.codingKey)
        }
    }
}
