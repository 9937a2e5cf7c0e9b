// The coding keys the encoder, the decoder and hand-written decoders in this package put in coding paths.

/// A coding key for dynamic keys, array indices and `super`; `package` so that hand-written decoders in this package
/// build the same coding paths.
package struct AnyCodingKey: CodingKey, Sendable {
    package let stringValue: String
    package let intValue: Int?

    package init(stringValue: String) {
        self.stringValue = stringValue
        self.intValue = nil
    }

    package init(intValue: Int) {
        self.stringValue = String(intValue)
        self.intValue = intValue
    }

    static let `super` = AnyCodingKey(stringValue: "super")
}

/// The key of an array element; its text is built only when an error message asks for it. `package`, as
/// ``AnyCodingKey``.
package struct IndexKey: CodingKey, Sendable {
    package let index: Int

    package init(index: Int) {
        self.index = index
    }

    package init?(stringValue: String) {
        return nil
    }

    package init?(intValue: Int) {
        self.index = intValue
    }

    package var intValue: Int? { index }
    package var stringValue: String { "Index \(index)" }
}

/// A coding key in a box, so containers that rarely have one carry a pointer rather than an existential.
final class ParentKey {
    let key: any CodingKey

    init(_ key: any CodingKey) {
        self.key = key
    }
}
