#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An array being written.
struct UnkeyedEncoder: UnkeyedEncodingContainer, ScalarEncodingContainer {
    let impl: EncoderImpl
    let frame: Int
    let depth: Int
    /// The key this container was opened under by `nestedContainer`, boxed to keep the container small.
    let parent: ParentKey?
    var parentKey: (any CodingKey)? { parent?.key }
    private(set) var count: Int

    init(impl: EncoderImpl, frame: Int, depth: Int, parentKey: (any CodingKey)?, count: Int) {
        self.impl = impl
        self.frame = frame
        self.depth = depth
        self.parent = parentKey.map(ParentKey.init)
        self.count = count
    }

    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: parentKey) }

    @inline(__always)
    mutating func begin() throws {
        try impl.activate(frame, codingPath: codingPath)
        try impl.bump()
        count += 1
        if let parent {
            impl.restore(parentKey: parent.key, depth: depth)
        }
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try impl.encodeNested(value, depth: depth + 1, key: IndexKey(index: count - 1))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<
        NestedKey
    > {
        do {
            try begin()
        } catch {
            return impl.deadContainer(error, keyedBy: NestedKey.self)
        }
        let id = impl.openFrame(isMap: true)
        return KeyedEncodingContainer(
            KeyedEncoder<NestedKey>(impl: impl, frame: id, depth: depth + 1, parentKey: IndexKey(index: count - 1)))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        do {
            try begin()
        } catch {
            impl.deferError(error)
            return UnkeyedEncoder(
                impl: impl, frame: EncoderImpl.deadFrameID, depth: depth + 1, parentKey: IndexKey(index: count),
                count: 0)
        }
        let id = impl.openFrame(isMap: false)
        return UnkeyedEncoder(impl: impl, frame: id, depth: depth + 1, parentKey: IndexKey(index: count - 1), count: 0)
    }

    mutating func superEncoder() -> any Encoder {
        do {
            try begin()
        } catch {
            impl.deferError(error)
        }
        impl.writer.writeByte(0x80)
        return SubEncoder(impl: impl, path: codingPath + [IndexKey(index: count - 1)], start: impl.writer.count - 1)
    }
}
