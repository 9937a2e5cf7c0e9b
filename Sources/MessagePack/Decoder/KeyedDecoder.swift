#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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

extension KeyedDecoder {
    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: parentKey) }

    var allKeys: [Key] {
        // A malformed map fails again, with its error, when the value's decoding finishes.
        try? impl.completeKeyIndex(index)
        let reader = impl.reader
        return index.compactMapEntries { i, entry -> Key? in
            if let names {
                return Key(stringValue: names[i])
            }
            if entry.length < 0 {
                return Key(intValue: entry.key) ?? Key(stringValue: String(entry.key))
            }
            return Key(stringValue: KeyIndex.text(of: entry, in: reader))
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
        // The offset can be the input's end: a map cut after its last key.
        let offset = try offset(key)
        do {
            return try impl.reader.byte(at: offset) == 0xc0
        } catch {
            throw error.decodingError(codingPath + [key])
        }
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
                let name = names?[i] ?? KeyIndex.text(of: entry, in: reader)
                if name == key.stringValue {
                    return entry.value
                }
            }
            return nil
        }
    }
}
