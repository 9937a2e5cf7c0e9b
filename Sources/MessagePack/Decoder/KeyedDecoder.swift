import Foundation

/// Where each key and value of one map sits, built in one pass when a keyed container opens.
///
/// One allocation holds the entries and the lookup cursor. Lookups try the entry after the last hit first, because
/// types read their keys in the order they wrote them, so a whole struct decodes with one comparison per key.
final class KeyIndex: ManagedBuffer<KeyIndex.Header, KeyIndex.Entry> {
    struct Header {
        var count: Int
        var capacity: Int
        var last: Int
        /// The key this map was found under, for coding paths. Boxed: setting an optional existential to nil for
        /// every map (the common case) cost ~110 instructions in outlined copy/destroy, a class reference ~2.
        var parentKey: ParentKey?
        /// The names of the coding keys of the type reading this map (see `KeyNames`), kept across maps; the table
        /// and key type are copied out so that a lookup reads them without retaining the owner.
        var keyNames: KeyNames?
        var keyNamesTable: UnsafeMutablePointer<KeyNames.Name>?
        var keyNamesType: ObjectIdentifier?
        /// Where the value of entry `endEntry` ends, when a `decode(_:forKey:)` just read it as a scalar; saves
        /// `scanKey` skipping over that value again (see `KeyedDecoder.read`).
        var endEntry: Int
        var endOffset: Int
        /// Map keys after the key decoding strategy, when it is not the default.
        var names: [String]?
        /// The map's offset, its depth and the number of entries its header claims.
        var start: Int
        var depth: Int
        var total: Int
        /// Where the first key starts.
        var first: Int
        /// Whether every key has been read, duplicates checked and the map's end recorded.
        var complete: Bool
    }

    struct Entry {
        /// The offset of a string key's bytes, or the value of an integer key.
        var key: Int
        /// The length of a string key, or −1 for an integer key.
        var length: Int
        var value: Int
    }

    static func make(capacity: Int) -> KeyIndex {
        let buffer = KeyIndex.create(minimumCapacity: capacity) { _ in
            Header(
                count: 0, capacity: capacity, last: -1, parentKey: nil, keyNames: nil,
                keyNamesTable: nil, keyNamesType: nil, endEntry: -1, endOffset: 0, names: nil, start: 0, depth: 0,
                total: 0, first: 0, complete: false)
        }
        return unsafeDowncast(buffer, to: KeyIndex.self)
    }

    var parentKey: (any CodingKey)? { withUnsafeMutablePointerToHeader { $0.pointee.parentKey?.key } }

    /// Puts this container's key back into the decoder's path, for a container opened by `nestedContainer`.
    @inline(__always)
    func restorePath(_ impl: DecoderImpl, depth: Int) {
        withUnsafeMutablePointerToHeader { header in
            if let parent = header.pointee.parentKey {
                impl.restore(parentKey: parent.key, depth: depth)
            }
        }
    }
    var names: [String]? { withUnsafeMutablePointerToHeader { $0.pointee.names } }
    var isComplete: Bool { withUnsafeMutablePointerToHeader { $0.pointee.complete } }
}

/// A map being read by a `Decodable` type.
///
/// Small on purpose (everything else lives in `index`), because `KeyedDecodingContainer` copies it generically, on
/// every `decode(_:forKey:)`: with one counted reference, a copy costs one retain instead of two.
struct KeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    /// Not counted: a container is only usable while `MessagePackDecoder.decode` runs, which holds the decoder (and
    /// the input bytes, which `ByteReader` already reads through an unsafe pointer) for exactly that long.
    unowned(unsafe) let impl: DecoderImpl
    let depth: Int
    let index: KeyIndex

    var parentKey: (any CodingKey)? { index.parentKey }
    var names: [String]? { index.names }

    /// - Parameter lazily: read keys only as lookups need them; the caller must then call
    ///   `DecoderImpl.finishKeyIndex` once the value's `init(from:)` returns.
    init(impl: DecoderImpl, start: Int, depth: Int, parentKey: (any CodingKey)?, lazily: Bool = false) throws {
        self.impl = impl
        self.depth = depth
        self.index = try impl.makeKeyIndex(start: start, depth: depth, parentKey: parentKey, lazily: lazily)
    }

    typealias Entry = KeyIndex.Entry
}

extension KeyIndex {
    @inline(__always)
    static func checkUTF8(_ reader: ByteReader, _ start: Int, _ length: Int, at offset: Int) throws(ReadFailure) {
        if !ByteReader.isASCII(reader.bytes(start, length)) {
            _ = try reader.makeString(start, length, at: offset)
        }
    }

    static func sameKey(_ reader: ByteReader, _ a: Entry, _ b: Entry) -> Bool {
        guard a.length == b.length else { return false }
        if a.length < 0 { return a.key == b.key }
        return ByteReader.equal(reader.base + a.key, reader.base + b.key, a.length)
    }

    /// Rejects a key present twice: which of the two values a type reads would otherwise be an accident.
    static func checkDuplicates(
        _ reader: ByteReader, _ entries: UnsafeMutablePointer<Entry>, _ count: Int, mapOffset: Int
    ) throws(ReadFailure) {
        func duplicate(_ entry: Entry) -> ReadFailure {
            let name =
                entry.length < 0
                ? String(entry.key) : "\"\(String(decoding: reader.bytes(entry.key, entry.length), as: UTF8.self))\""
            return .corrupted("Duplicate key \(name) in the map at offset \(mapOffset)")
        }
        if count <= 16 {
            for i in 0..<count {
                for j in (i + 1)..<count where sameKey(reader, entries[i], entries[j]) {
                    throw duplicate(entries[i])
                }
            }
            return
        }
        // Large maps (dictionaries): sort and compare neighbours, so hostile input cannot make this quadratic.
        let sorted = UnsafeBufferPointer(start: entries, count: count).sorted { a, b in
            if a.length != b.length { return a.length < b.length }
            if a.length < 0 { return a.key < b.key }
            return memcmp(reader.base + a.key, reader.base + b.key, a.length) < 0
        }
        for i in 1..<count where sameKey(reader, sorted[i - 1], sorted[i]) {
            throw duplicate(sorted[i])
        }
    }

    static func convertedNames(_ impl: DecoderImpl, _ index: KeyIndex, _ path: [any CodingKey]) -> [String] {
        let reader = impl.reader
        return index.withUnsafeMutablePointers { header, entries in
            var names: [String] = []
            names.reserveCapacity(header.pointee.count)
            for i in 0..<header.pointee.count {
                let entry = entries[i]
                let raw =
                    entry.length < 0
                    ? String(entry.key) : String(decoding: reader.bytes(entry.key, entry.length), as: UTF8.self)
                switch impl.options.keyDecodingStrategy {
                case .useDefaultKeys:
                    names.append(raw)
                case .convertFromSnakeCase:
                    names.append(KeyConversion.fromSnakeCase(raw))
                case .custom(let convert):
                    let key: any CodingKey =
                        entry.length < 0 ? AnyCodingKey(intValue: entry.key) : AnyCodingKey(stringValue: raw)
                    names.append(convert(path + [key]).stringValue)
                }
            }
            return names
        }
    }

}

extension KeyedDecoder {
    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: parentKey) }

    var allKeys: [Key] {
        // A malformed map fails again, with its error, when the value's decoding finishes.
        try? impl.completeKeyIndex(index)
        let reader = impl.reader
        return index.withUnsafeMutablePointers { header, entries in
            var keys: [Key] = []
            keys.reserveCapacity(header.pointee.count)
            for i in 0..<header.pointee.count {
                let entry = entries[i]
                if let names {
                    if let key = Key(stringValue: names[i]) {
                        keys.append(key)
                    }
                } else if entry.length < 0 {
                    if let key = Key(intValue: entry.key) ?? Key(stringValue: String(entry.key)) {
                        keys.append(key)
                    }
                } else if let key = Key(
                    stringValue: String(decoding: reader.bytes(entry.key, entry.length), as: UTF8.self))
                {
                    keys.append(key)
                }
            }
            return keys
        }
    }

    /// The offset of the value under `key`, or nil.
    @inline(__always)
    func find(_ key: Key) throws(ReadFailure) -> Int? {
        if KeyNames.applies(to: Key.self) {
            let (name, intValue) = index.name(of: key)
            return try index.find(impl, name: name, intValue: intValue)
        }
        var name = key.stringValue
        let intValue = key.intValue
        let impl = self.impl
        let index = self.index
        // withUTF8 rethrows untyped, so the failure travels out as a value.
        let result = name.withUTF8 { name -> Result<Int?, ReadFailure> in
            do throws(ReadFailure) {
                return .success(try index.find(impl, name: name, intValue: intValue))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    func offset(_ key: Key) throws -> Int {
        let found: Int?
        do {
            found = try find(key)
        } catch {
            throw error.decodingError(codingPath)
        }
        guard let offset = found else {
            throw DecodingError.keyNotFound(
                key,
                DecodingError.Context(
                    codingPath: codingPath,
                    debugDescription: "No value associated with key \(key) (\"\(key.stringValue)\")"))
        }
        return offset
    }

    /// Reads a scalar under `key` with `body`, which returns the value and where it ends.
    ///
    /// The end is kept for the next lookup, which would otherwise skip over this value again to find the next key
    /// (about 80 instructions per key; measured 4% of decoding the benchmark's records).
    @inline(__always)
    func read<V>(_ key: Key, _ body: (Int) throws(ReadFailure) -> (V, Int)) throws -> V {
        let offset = try offset(key)
        do {
            let (value, end) = try body(offset)
            index.withUnsafeMutablePointerToHeader { header in
                header.pointee.endEntry = header.pointee.last
                header.pointee.endOffset = end
            }
            return value
        } catch {
            throw error.decodingError(codingPath + [key])
        }
    }

    func contains(_ key: Key) -> Bool {
        // A malformed map fails again, with its error, when the value's decoding finishes.
        ((try? find(key)) ?? nil) != nil
    }

    func decodeNil(forKey key: Key) throws -> Bool {
        impl.reader.base[try offset(key)] == 0xc0
    }

    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
        try read(key) { offset throws(ReadFailure) in try impl.reader.bool(at: offset) }
    }

    func decode(_ type: String.Type, forKey key: Key) throws -> String {
        try read(key) { offset throws(ReadFailure) in try impl.reader.string(at: offset) }
    }

    func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
        try read(key) { offset throws(ReadFailure) in try impl.reader.double(at: offset) }
    }

    func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
        try read(key) { offset throws(ReadFailure) in try impl.reader.float(at: offset) }
    }

    func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(Int.self, at: offset) }
    }

    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(Int8.self, at: offset) }
    }

    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(Int16.self, at: offset) }
    }

    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(Int32.self, at: offset) }
    }

    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(Int64.self, at: offset) }
    }

    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(UInt.self, at: offset) }
    }

    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(UInt8.self, at: offset) }
    }

    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(UInt16.self, at: offset) }
    }

    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(UInt32.self, at: offset) }
    }

    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
        try read(key) { offset throws(ReadFailure) in try impl.reader.integer(UInt64.self, at: offset) }
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        // UUID and timestamp dates, common in records, read directly: no coding path to extend and restore.
        if T.self == UUID.self {
            return reinterpret(
                try read(key) { offset throws(ReadFailure) in try impl.reader.uuidAndEnd(at: offset) }, as: T.self)
        }
        if T.self == Date.self, impl.datesAreTimestamps {
            return reinterpret(
                try read(key) { offset throws(ReadFailure) in
                    let (timestamp, end) = try impl.reader.timestamp(at: offset)
                    return (timestamp.date, end)
                }, as: T.self)
        }
        let offset = try offset(key)
        index.restorePath(impl, depth: depth)
        return try impl.decodeNested(type, at: offset, depth: depth + 1, key: key)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        let offset = try offset(key)
        index.restorePath(impl, depth: depth)
        return KeyedDecodingContainer(
            try KeyedDecoder<NestedKey>(impl: impl, start: offset, depth: depth + 1, parentKey: key))
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        let offset = try offset(key)
        index.restorePath(impl, depth: depth)
        return try UnkeyedDecoder(impl: impl, start: offset, depth: depth + 1, parentKey: key)
    }

    func superDecoder() throws -> any Decoder {
        guard let offset = find(key: AnyCodingKey.super) else {
            throw DecodingError.keyNotFound(
                AnyCodingKey.super,
                DecodingError.Context(
                    codingPath: codingPath, debugDescription: "No value associated with key \"super\""))
        }
        return SubDecoder(impl: impl, path: codingPath + [AnyCodingKey.super], start: offset)
    }

    func superDecoder(forKey key: Key) throws -> any Decoder {
        SubDecoder(impl: impl, path: codingPath + [key], start: try offset(key))
    }

    private func find(key: AnyCodingKey) -> Int? {
        try? impl.completeKeyIndex(index)
        let reader = impl.reader
        return index.withUnsafeMutablePointers { header, entries -> Int? in
            for i in 0..<header.pointee.count {
                let entry = entries[i]
                let name: String =
                    if let names { names[i] } else if entry.length < 0 { String(entry.key) } else {
                        String(decoding: reader.bytes(entry.key, entry.length), as: UTF8.self)
                    }
                if name == key.stringValue {
                    return entry.value
                }
            }
            return nil
        }
    }
}

extension KeyIndex {
    /// The offset of the value whose key is `name` (or, for integer map keys, `intValue`), or nil.
    ///
    /// Reads further keys of a lazily indexed map only when the ones read so far do not match.
    func find(_ impl: DecoderImpl, name: UnsafeBufferPointer<UInt8>, intValue: Int?) throws(ReadFailure) -> Int? {
        let reader = impl.reader
        return try withUnsafeMutablePointers { header, entries throws(ReadFailure) -> Int? in
            let names = header.pointee.names
            func matches(_ i: Int) -> Bool {
                let entry = entries[i]
                if let names {
                    return names[i].utf8.elementsEqual(name)
                }
                if entry.length < 0 {
                    return entry.key == intValue
                }
                return entry.length == name.count
                    && (name.count == 0 || ByteReader.equal(reader.base + entry.key, name.baseAddress!, name.count))
            }
            // Types read keys in the order they wrote them: try the entry after the last hit first.
            let next = header.pointee.last + 1
            if next < header.pointee.count {
                if matches(next) {
                    header.pointee.last = next
                    return entries[next].value
                }
            } else if !header.pointee.complete {
                if try impl.scanKey(header, entries), matches(next) {
                    header.pointee.last = next
                    return entries[next].value
                }
            }
            for i in 0..<header.pointee.count where matches(i) {
                header.pointee.last = i
                return entries[i].value
            }
            while !header.pointee.complete {
                if try impl.scanKey(header, entries) {
                    let i = header.pointee.count - 1
                    if matches(i) {
                        header.pointee.last = i
                        return entries[i].value
                    }
                }
            }
            return nil
        }
    }
}

extension DecoderImpl {
    /// Opens a map for a keyed container: reads its header, and unless `lazily`, all its keys.
    func makeKeyIndex(start: Int, depth: Int, parentKey: (any CodingKey)?, lazily: Bool) throws -> KeyIndex {
        let parent = parentKey.map(ParentKey.init)
        let (count, first, capacity) = try openMap(start: start, depth: depth, parent: parent)
        let index = reusableIndex(depth: depth, capacity: capacity)
        try prepare(index, start: start, depth: depth, count: count, first: first, parent: parent, lazily: lazily)
        return index
    }

    /// Reads a map's header and checks its nesting.
    ///
    /// The parent key travels boxed (`ParentKey?`): passing an optional existential through these calls cost ~200
    /// instructions of outlined copies and destroys per map, for a key that only an error message reads.
    ///
    /// - Returns: the entries it claims, where the first key starts, and how many entries the bytes left can hold.
    @inline(__always)
    func openMap(start: Int, depth: Int, parent: ParentKey?) throws -> (Int, Int, Int) {
        // No closure for the path: a stored closure costs an allocation per map.
        let (count, first): (Int, Int)
        do {
            (count, first) = try reader.mapHeader(at: start, as: [String: Any].self)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: parent?.key))
        }
        try checkNesting(depth: depth, at: start)
        return (count, first, Swift.min(count, (reader.count - first) / 2))
    }

    /// Points `index` at a new map; unless `lazily`, reads all its keys.
    func prepare(
        _ index: KeyIndex, start: Int, depth: Int, count: Int, first: Int, parent: ParentKey?, lazily: Bool
    ) throws {
        index.withUnsafeMutablePointerToHeader { header in
            header.pointee.count = 0
            header.pointee.last = -1
            header.pointee.endEntry = -1
            header.pointee.parentKey = parent
            header.pointee.names = nil
            header.pointee.start = start
            header.pointee.depth = depth
            header.pointee.total = count
            header.pointee.first = first
            header.pointee.complete = false
        }
        if lazily && usesDefaultKeys {
            return
        }
        // Key strategies convert every key up front, so they take the whole map at once.
        do {
            try completeKeyIndex(index)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: parent?.key))
        }
        if !usesDefaultKeys {
            let names = KeyIndex.convertedNames(self, index, path(depth: depth, parentKey: parent?.key))
            index.withUnsafeMutablePointerToHeader { $0.pointee.names = names }
        }
    }

    /// Reopens the cached container's index for the map at `start`, if it is large enough.
    func reopen(_ slot: KeyedContainerSlot, start: Int, depth: Int) throws -> Bool {
        let (count, first, capacity) = try openMap(start: start, depth: depth, parent: nil)
        let index = slot.index
        guard index.withUnsafeMutablePointerToHeader({ $0.pointee.capacity >= capacity }) else { return false }
        indexCache[depth] = index
        try prepare(index, start: start, depth: depth, count: count, first: first, parent: nil, lazily: true)
        return true
    }

    /// Reads the rest of a map's keys, checking the structure of every value not yet decoded.
    func completeKeyIndex(_ index: KeyIndex) throws(ReadFailure) {
        try index.withUnsafeMutablePointers { header, entries throws(ReadFailure) in
            while !header.pointee.complete {
                _ = try scanKey(header, entries)
            }
        }
    }

    /// Completes the index of the map at `start`, if a keyed container at `depth` left it partly read.
    ///
    /// Called when a value's `init(from:)` returns: it enforces what a lazy index skipped — every value's
    /// structure, no duplicate keys — and records the map's end for the container above.
    @inline(__always)
    func finishKeyIndex(depth: Int, start: Int) throws {
        guard depth < indexCache.count, let index = indexCache[depth] else { return }
        let pending = index.withUnsafeMutablePointerToHeader { header in
            header.pointee.start == start && !header.pointee.complete
        }
        guard pending else { return }
        do {
            try completeKeyIndex(index)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: index.parentKey))
        }
    }

    /// Reads the next key of a map, after stepping over the previous value (by its known end, when the container
    /// above decoded it). After the last key, checks for duplicates and records the map's end.
    ///
    /// - Returns: whether it added an entry.
    func scanKey(
        _ header: UnsafeMutablePointer<KeyIndex.Header>, _ entries: UnsafeMutablePointer<KeyIndex.Entry>
    ) throws(ReadFailure) -> Bool {
        let reader = self.reader
        let i = header.pointee.count
        let depth = header.pointee.depth
        var position =
            i == 0
            ? header.pointee.first
            : header.pointee.endEntry == i - 1
                ? header.pointee.endOffset : try end(of: entries[i - 1].value, depth: depth + 1)
        if i == header.pointee.total {
            try KeyIndex.checkDuplicates(reader, entries, i, mapOffset: header.pointee.start)
            header.pointee.complete = true
            recordEnd(depth: depth, start: header.pointee.start, end: position)
            return false
        }
        guard i < header.pointee.capacity else {
            throw .corrupted(
                "Unexpected end of data at offset \(position): the map at offset \(header.pointee.start) claims "
                    + "\(header.pointee.total) entries (\(reader.count - position) bytes left)")
        }
        let keyOffset = position
        let byte = try reader.byte(at: position)
        let entryKey: Int
        let entryLength: Int
        if byte & 0xe0 == 0xa0 {
            // fixstr, by far the most common key
            let length = Int(byte & 0x1f)
            try reader.need(position + 1, length, "fixstr")
            try KeyIndex.checkUTF8(reader, position + 1, length, at: position)
            entryKey = position + 1
            entryLength = length
            position += 1 + length
        } else {
            switch byte {
            case 0xd9, 0xda, 0xdb:
                let (keyStart, length) = try reader.stringRange(at: position)
                try KeyIndex.checkUTF8(reader, keyStart, length, at: position)
                entryKey = keyStart
                entryLength = length
                position = keyStart + length
            case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3:
                let (value, end) = try reader.integer(Int.self, at: position)
                entryKey = value
                entryLength = -1
                position = end
            default:
                throw ReadFailure(
                    kind: .typeMismatch(String.self),
                    message: "Expected a string or integer map key at offset \(keyOffset) but found "
                        + ByteReader.describe(byte))
            }
        }
        entries[i] = KeyIndex.Entry(key: entryKey, length: entryLength, value: position)
        header.pointee.count = i + 1
        return true
    }

    /// The index left at this depth by a container that is gone, or a new one: most maps are siblings of the same
    /// shape (the elements of an array), so this saves an allocation per map.
    func reusableIndex(depth: Int, capacity: Int) -> KeyIndex {
        if depth < indexCache.count, isKnownUniquelyReferenced(&indexCache[depth]) {
            let cached = indexCache[depth]!
            let fits = cached.withUnsafeMutablePointerToHeader { header in
                guard header.pointee.capacity >= capacity else { return false }
                header.pointee.count = 0
                header.pointee.last = -1
                return true
            }
            if fits {
                return cached
            }
        }
        let index = KeyIndex.make(capacity: Swift.max(capacity, 8))
        while indexCache.count <= depth {
            indexCache.append(nil)
        }
        indexCache[depth] = index
        return index
    }
}

/// The UTF-8 bytes and integer value of each case of one `CodingKey` enum, filled in as lookups meet them.
///
/// A lookup by key would otherwise call `stringValue` and `intValue` (witness calls; `stringValue` builds a `String`)
/// and `withUTF8` through a closure that copies the container: about 200 instructions and two retain/release pairs
/// per key, some 10% of decoding a record. With the table, a lookup reads the case's tag byte and indexes an array.
///
/// Only for keys that are a plain value of at most one byte (`_isPOD`, size ≤ 1), which every synthesized or
/// `enum CodingKeys: String` key is. Two such keys with the same bits are the same value, and a key's `stringValue`
/// and `intValue` depend only on its value, so the bits identify the name. Other key types take the general path.
final class KeyNames {
    struct Name {
        /// Nil until a lookup first meets the case.
        var bytes: UnsafeMutablePointer<UInt8>?
        var length: Int
        var intValue: Int?
    }

    let keyType: ObjectIdentifier
    /// By tag: 256 entries, since the tag is one byte.
    let names: UnsafeMutablePointer<Name>

    init(keyType: ObjectIdentifier) {
        self.keyType = keyType
        names = .allocate(capacity: 256)
        names.initialize(repeating: Name(bytes: nil, length: 0, intValue: nil), count: 256)
    }

    deinit {
        for i in 0..<256 {
            names[i].bytes?.deallocate()
        }
        names.deallocate()
    }

    @inline(__always)
    static func applies<Key: CodingKey>(to type: Key.Type) -> Bool {
        _isPOD(Key.self) && MemoryLayout<Key>.size <= 1
    }

    /// Fills in `key`'s entry, making the table for `Key` first if the index has none.
    @inline(never)
    static func learn<Key: CodingKey>(_ key: Key, tag: Int, _ header: UnsafeMutablePointer<KeyIndex.Header>)
        -> (UnsafeBufferPointer<UInt8>, Int?)
    {
        if header.pointee.keyNamesType != ObjectIdentifier(Key.self) {
            let table = KeyNames(keyType: ObjectIdentifier(Key.self))
            header.pointee.keyNames = table
            header.pointee.keyNamesTable = table.names
            header.pointee.keyNamesType = table.keyType
        }
        let name = header.pointee.keyNames!.learn(key, tag: tag)
        return (UnsafeBufferPointer(start: name.bytes, count: name.length), name.intValue)
    }

    /// The tag of a key of a type this table `applies(to:)`: the value's one byte (a size-0 key has one value).
    @inline(__always)
    static func tag<Key: CodingKey>(of key: Key) -> Int {
        MemoryLayout<Key>.size == 0 ? 0 : Int(unsafeBitCast(key, to: UInt8.self))
    }

    /// Fills in the entry of `key`, whose tag is `tag`, from its `stringValue` and `intValue`.
    @inline(never)
    func learn<Key: CodingKey>(_ key: Key, tag: Int) -> Name {
        var string = key.stringValue
        let length = string.utf8.count
        // At least one byte, so that an empty name still has an address and counts as learnt.
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: Swift.max(length, 1))
        string.withUTF8 { utf8 in
            if let base = utf8.baseAddress {
                bytes.initialize(from: base, count: length)
            }
        }
        names[tag] = Name(bytes: bytes, length: length, intValue: key.intValue)
        return names[tag]
    }
}

extension KeyIndex {
    /// The bytes of `key`'s `stringValue` and its `intValue`, from the name table of `Key` kept with this index
    /// (its container is reused for maps read by the same type, so the table lives across maps and records).
    @inline(__always)
    func name<Key: CodingKey>(of key: Key) -> (UnsafeBufferPointer<UInt8>, Int?) {
        let tag = KeyNames.tag(of: key)
        return withUnsafeMutablePointerToHeader { header in
            if header.pointee.keyNamesType == ObjectIdentifier(Key.self), let table = header.pointee.keyNamesTable,
                let bytes = table[tag].bytes
            {
                return (UnsafeBufferPointer(start: bytes, count: table[tag].length), table[tag].intValue)
            }
            return KeyNames.learn(key, tag: tag, header)
        }
    }
}

/// The keyed container last handed out by `DecoderImpl.container(keyedBy:)` at one depth, and its key type.
///
/// The runtime looks up three generic metadata records to make a `KeyedDecodingContainer` (about a fifth of decoding
/// time for records like the benchmark's). Only one value at a time is decoded at a given depth, and its container is
/// done with when its `init(from:)` returns, so the next map at that depth read with the same key type reuses the
/// container and its index. (A container kept past its value's `init(from:)` would then read the newer map; Codable
/// never does that.)
class KeyedContainerSlot {
    let keyType: ObjectIdentifier
    let index: KeyIndex

    init(keyType: ObjectIdentifier, index: KeyIndex) {
        self.keyType = keyType
        self.index = index
    }
}

final class KeyedContainerSlotFor<Key: CodingKey>: KeyedContainerSlot {
    let container: KeyedDecodingContainer<Key>

    init(container: KeyedDecodingContainer<Key>, index: KeyIndex) {
        self.container = container
        super.init(keyType: ObjectIdentifier(Key.self), index: index)
    }
}

/// The decoder a `superDecoder()` hands out, reading the value it was given.
final class SubDecoder: Decoder {
    let impl: DecoderImpl
    let path: [any CodingKey]
    let start: Int

    init(impl: DecoderImpl, path: [any CodingKey], start: Int) {
        self.impl = impl
        self.path = path
        self.start = start
    }

    var codingPath: [any CodingKey] { path }
    var userInfo: [CodingUserInfoKey: Any] { impl.userInfo }

    private func prepare() {
        impl.keys = path
        impl.depth = path.count
        impl.position = start
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        prepare()
        // No init(from:) return finishes this map, so its index is read whole now.
        return KeyedDecodingContainer(
            try KeyedDecoder<Key>(impl: impl, start: start, depth: impl.depth, parentKey: nil))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        prepare()
        return try impl.unkeyedContainer()
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        prepare()
        return try impl.singleValueContainer()
    }
}
