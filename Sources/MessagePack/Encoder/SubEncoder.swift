#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The encoder a `superEncoder()` hands out: it writes its one value where the container left room for it.
final class SubEncoder: SubCoder<EncoderImpl>, Encoder {
    private func prepare() {
        // Replace the placeholder empty map, unless something was written after it (then the container refuses).
        if impl.writer.count == start + 1 {
            impl.writer.truncate(to: start)
        }
        impl.enter(path)
        impl.valueStart = start
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        prepare()
        return impl.container(keyedBy: type)
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        prepare()
        return impl.unkeyedContainer()
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        prepare()
        return impl.singleValueContainer()
    }
}
