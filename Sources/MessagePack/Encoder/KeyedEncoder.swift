#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A map being written; keys go out in the order `encode(to:)` writes them.
struct KeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let impl: EncoderImpl
    let frame: Int
    /// The number of keys in this container's coding path.
    let depth: Int
    /// The key this container was opened under, when it was opened by a parent container.
    /// The key this container was opened under by `nestedContainer`, boxed to keep the container small.
    let parent: ParentKey?
    var parentKey: (any CodingKey)? { parent?.key }

    init(impl: EncoderImpl, frame: Int, depth: Int, parentKey: (any CodingKey)?) {
        self.impl = impl
        self.frame = frame
        self.depth = depth
        self.parent = parentKey.map(ParentKey.init)
    }

    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: parentKey) }

    @inline(__always)
    mutating func begin(_ key: some CodingKey) throws {
        try impl.activate(frame, codingPath: codingPath)
        try impl.bump()
        try impl.writeKey(key, depth: depth)
        if let parent {
            impl.restore(parentKey: parent.key, depth: depth)
        }
    }

    mutating func encodeNil(forKey key: Key) throws {
        try begin(key)
        impl.writer.writeNil()
    }

    mutating func encode(_ value: Int, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int8, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int16, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int32, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int64, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: UInt, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt8, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt16, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt32, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt64, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeBool(value)
    }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeFloat(value)
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        try begin(key)
        impl.writer.writeDouble(value)
    }

    mutating func encode(_ value: String, forKey key: Key) throws {
        try begin(key)
        try impl.writer.writeString(value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try begin(key)
        try impl.encodeNested(value, depth: depth + 1, key: key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        do {
            try begin(key)
        } catch {
            return impl.deadContainer(error, keyedBy: NestedKey.self)
        }
        let id = impl.openFrame(isMap: true)
        return KeyedEncodingContainer(KeyedEncoder<NestedKey>(impl: impl, frame: id, depth: depth + 1, parentKey: key))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        do {
            try begin(key)
        } catch {
            impl.deferError(error)
            return UnkeyedEncoder(
                impl: impl, frame: EncoderImpl.deadFrameID, depth: depth + 1, parentKey: key, count: 0)
        }
        let id = impl.openFrame(isMap: false)
        return UnkeyedEncoder(impl: impl, frame: id, depth: depth + 1, parentKey: key, count: 0)
    }

    mutating func superEncoder() -> any Encoder {
        superEncoder(key: AnyCodingKey.super)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        superEncoder(key: key)
    }

    private mutating func superEncoder(key: some CodingKey) -> any Encoder {
        do {
            try begin(key)
        } catch {
            impl.deferError(error)
        }
        // An empty map until the super encoder writes its value over it, as JSONEncoder leaves `{}` when unused.
        impl.writer.writeByte(0x80)
        return SubEncoder(impl: impl, path: codingPath + [key], start: impl.writer.count - 1)
    }
}
