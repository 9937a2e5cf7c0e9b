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

extension KeyIndex {
    @inline(__always)
    static func checkUTF8(_ reader: ByteReader, _ start: Int, _ length: Int, at offset: Int) throws(ReadFailure) {
        if !ByteReader.isASCII(reader.bytes(start, length)) {
            _ = try reader.makeString(start, length, at: offset)
        }
    }

    /// A key as text: an integer key's digits, a string key's characters.
    static func text(of entry: Entry, in reader: ByteReader) -> String {
        entry.length < 0 ? String(entry.key) : String(decoding: reader.bytes(entry.key, entry.length), as: UTF8.self)
    }

    static func sameKey(_ reader: ByteReader, _ a: Entry, _ b: Entry) -> Bool {
        guard a.length == b.length else { return false }
        if a.length < 0 { return a.key == b.key }
        return ByteReader.equal(reader.base + a.key, reader.base + b.key, a.length)
    }

    /// Rejects a key present twice: which of the two values a type reads would otherwise be an accident.
    ///
    /// The one check for keyed containers and `MessagePackReader.checkUniqueKeys`, so both fail alike.
    static func checkDuplicates(
        _ reader: ByteReader, _ entries: UnsafeBufferPointer<Entry>, mapOffset: Int
    ) throws(ReadFailure) {
        let count = entries.count
        func duplicate(_ entry: Entry) -> ReadFailure {
            // A key is quoted up to 64 Unicode scalars: the message goes into acks and logs, and a key may be MBs.
            let name: String
            if entry.length < 0 {
                name = String(entry.key)
            } else {
                let key = text(of: entry, in: reader).unicodeScalars
                name = "\"\(String(String.UnicodeScalarView(key.prefix(64))))\(key.count > 64 ? "…" : "")\""
            }
            return .duplicateKey(name, mapOffset: mapOffset)
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
        let sorted = entries.sorted { a, b in
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
        return index.compactMapEntries { _, entry in
            let raw = text(of: entry, in: reader)
            switch impl.options.keyDecodingStrategy {
            case .useDefaultKeys:
                return raw
            case .convertFromSnakeCase:
                return KeyConversion.fromSnakeCase(raw)
            case .custom(let convert):
                let key: any CodingKey =
                    entry.length < 0 ? AnyCodingKey(intValue: entry.key) : AnyCodingKey(stringValue: raw)
                return convert(path + [key]).stringValue
            }
        }
    }

    /// `transform` of each entry read so far, with its position, in map order; nil results left out.
    func compactMapEntries<T>(_ transform: (Int, Entry) -> T?) -> [T] {
        withUnsafeMutablePointers { header, entries in
            var results: [T] = []
            results.reserveCapacity(header.pointee.count)
            for i in 0..<header.pointee.count {
                if let result = transform(i, entries[i]) {
                    results.append(result)
                }
            }
            return results
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
