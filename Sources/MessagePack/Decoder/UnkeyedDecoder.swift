#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An array being read element by element.
struct UnkeyedDecoder: UnkeyedDecodingContainer {
    let impl: DecoderImpl
    let depth: Int
    /// The key this container was opened under by `nestedContainer`, boxed to keep the container small.
    let parent: ParentKey?
    var parentKey: (any CodingKey)? { parent?.key }
    let start: Int
    let elementCount: Int
    private(set) var currentIndex = 0
    /// Where the next element starts.
    var cursor: Int

    init(impl: DecoderImpl, start: Int, depth: Int, parentKey: (any CodingKey)?) throws {
        self.impl = impl
        self.depth = depth
        self.parent = parentKey.map(ParentKey.init)
        self.start = start
        do {
            (elementCount, cursor) = try impl.reader.arrayHeader(at: start, as: [Any].self)
        } catch {
            throw error.decodingError(impl.path(depth: depth, parentKey: parentKey))
        }
        try impl.checkNesting(depth: depth, at: start)
        if elementCount == 0 {
            impl.recordEnd(depth: depth, start: start, end: cursor)
        }
    }

    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: parentKey) }
    var count: Int? { elementCount }
    var isAtEnd: Bool { currentIndex >= elementCount }

    private func failure(_ error: ReadFailure) -> DecodingError {
        error.decodingError(codingPath + [IndexKey(index: currentIndex)])
    }

    @inline(__always)
    private func checkNotAtEnd(_ type: Any.Type) throws {
        guard currentIndex < elementCount else {
            throw DecodingError.valueNotFound(
                type,
                DecodingError.Context(
                    codingPath: codingPath + [IndexKey(index: currentIndex)],
                    debugDescription: "Unkeyed container is at end (\(elementCount) elements)"))
        }
    }

    @inline(__always)
    private mutating func advance(to end: Int) {
        cursor = end
        currentIndex += 1
        if currentIndex == elementCount {
            impl.recordEnd(depth: depth, start: start, end: cursor)
        }
    }

    /// Reads the next element with `body`, which returns the value and where it ends.
    @inline(__always)
    private mutating func read<Value>(
        _ type: Value.Type, _ body: (ByteReader, Int) throws(ReadFailure) -> (Value, Int)
    ) throws -> Value {
        try checkNotAtEnd(type)
        do {
            let (value, end) = try body(impl.reader, cursor)
            advance(to: end)
            return value
        } catch {
            throw failure(error)
        }
    }

    mutating func decodeNil() throws -> Bool {
        try checkNotAtEnd(Any?.self)
        let byte: UInt8
        do {
            byte = try impl.reader.byte(at: cursor)
        } catch {
            throw failure(error)
        }
        guard byte == 0xc0 else { return false }
        advance(to: cursor + 1)
        return true
    }

    mutating func decode(_ type: Int.Type) throws -> Int {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(Int.self, at: offset) }
    }

    mutating func decode(_ type: Int8.Type) throws -> Int8 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(Int8.self, at: offset) }
    }

    mutating func decode(_ type: Int16.Type) throws -> Int16 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(Int16.self, at: offset) }
    }

    mutating func decode(_ type: Int32.Type) throws -> Int32 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(Int32.self, at: offset) }
    }

    mutating func decode(_ type: Int64.Type) throws -> Int64 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(Int64.self, at: offset) }
    }

    mutating func decode(_ type: UInt.Type) throws -> UInt {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(UInt.self, at: offset) }
    }

    mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(UInt8.self, at: offset) }
    }

    mutating func decode(_ type: UInt16.Type) throws -> UInt16 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(UInt16.self, at: offset) }
    }

    mutating func decode(_ type: UInt32.Type) throws -> UInt32 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(UInt32.self, at: offset) }
    }

    mutating func decode(_ type: UInt64.Type) throws -> UInt64 {
        try read(type) { reader, offset throws(ReadFailure) in try reader.integer(UInt64.self, at: offset) }
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool {
        try read(type) { reader, offset throws(ReadFailure) in try reader.bool(at: offset) }
    }

    mutating func decode(_ type: String.Type) throws -> String {
        try read(type) { reader, offset throws(ReadFailure) in try reader.string(at: offset) }
    }

    mutating func decode(_ type: Double.Type) throws -> Double {
        try read(type) { reader, offset throws(ReadFailure) in try reader.double(at: offset) }
    }

    mutating func decode(_ type: Float.Type) throws -> Float {
        try read(type) { reader, offset throws(ReadFailure) in try reader.float(at: offset) }
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try checkNotAtEnd(type)
        if let parent {
            impl.restore(parentKey: parent.key, depth: depth)
        }
        let offset = cursor
        let value = try impl.decodeNested(type, at: offset, depth: depth + 1, key: IndexKey(index: currentIndex))
        do {
            advance(to: try impl.end(of: offset, depth: depth + 1))
        } catch {
            throw failure(error)
        }
        return value
    }

    private mutating func skipCurrent() throws -> Int {
        let offset = cursor
        do {
            advance(to: try impl.reader.skip(at: offset, levels: impl.options.nestingLimit - depth - 1))
        } catch {
            throw failure(error)
        }
        return offset
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<
        NestedKey
    > {
        try checkNotAtEnd(type)
        if let parent {
            impl.restore(parentKey: parent.key, depth: depth)
        }
        let container = try KeyedDecoder<NestedKey>(
            impl: impl, start: cursor, depth: depth + 1, parentKey: IndexKey(index: currentIndex))
        _ = try skipCurrent()
        return KeyedDecodingContainer(container)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try checkNotAtEnd([Any].self)
        if let parent {
            impl.restore(parentKey: parent.key, depth: depth)
        }
        let container = try UnkeyedDecoder(
            impl: impl, start: cursor, depth: depth + 1, parentKey: IndexKey(index: currentIndex))
        _ = try skipCurrent()
        return container
    }

    mutating func superDecoder() throws -> any Decoder {
        try checkNotAtEnd(Any.self)
        let path = codingPath + [IndexKey(index: currentIndex)]
        return SubDecoder(impl: impl, path: path, start: try skipCurrent())
    }
}
