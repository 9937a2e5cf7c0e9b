#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One value written in place.
struct SingleValueEncoder: SingleValueEncodingContainer, ScalarEncodingContainer {
    let impl: EncoderImpl
    let depth: Int
    /// Where this value starts; writing is allowed only while nothing has been written there.
    let start: Int

    var codingPath: [any CodingKey] { impl.path(depth: depth, parentKey: nil) }

    @inline(__always)
    func begin() throws {
        guard impl.writer.count == start else {
            throw EncodingError.invalidValue(
                start,
                EncodingError.Context(
                    codingPath: codingPath,
                    debugDescription: "A single value container was asked to encode a second value"))
        }
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try begin()
        try impl.encodeValue(value)
        if impl.writer.count == start {
            impl.writer.writeByte(0x80)
        }
    }
}
