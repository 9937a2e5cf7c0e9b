#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The decoder a `superDecoder()` hands out, reading the value it was given.
final class SubDecoder: SubCoder<DecoderImpl>, Decoder {
    private func prepare() {
        impl.enter(path)
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
