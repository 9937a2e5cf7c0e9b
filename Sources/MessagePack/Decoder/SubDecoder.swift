import Foundation

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
