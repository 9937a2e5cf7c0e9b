#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Encodes `Encodable` values as MessagePack, in the shape of Foundation's `JSONEncoder`.
///
/// Every value is written once into one growing buffer, in its smallest form: integers of any width in the
/// smallest integer form, `Float` as float32, `Double` as float64, `String` as str, `Data` as bin, `Date` as the
/// timestamp extension (type −1), `UUID` as its canonical uppercase string, `URL` as its absolute string.
/// Keyed containers become maps with keys in the order `encode(to:)` writes them. `Dictionary` keys are sorted
/// (`String` keys by `<`, `Int` keys numerically, and `Int` keys are written as integers) because a dictionary's
/// iteration order differs between processes, and equal values must give equal bytes everywhere.
///
/// Containers must be filled in the order they were opened, as every synthesized and almost every hand-written
/// `encode(to:)` does; writing to a container after a sibling container was opened throws `EncodingError`.
public struct MessagePackEncoder: Sendable {
    /// How `Date` values are encoded.
    public enum DateEncodingStrategy: Sendable {
        /// The timestamp extension (type −1) in its smallest exact form. The default.
        case timestamp
        /// Whatever `Date.encode(to:)` writes: seconds since 2001 as float64.
        case deferredToDate
        /// Seconds since 1970 as float64.
        case secondsSince1970
        /// Milliseconds since 1970 as float64.
        case millisecondsSince1970
        /// ISO 8601 text, such as `2026-11-21T10:00:00Z`.
        case iso8601
        /// A closure that encodes the date into the given encoder.
        case custom(@Sendable (Date, any Encoder) throws -> Void)
    }

    /// How keyed containers' keys are written. Dictionary keys are data and are never converted.
    public enum KeyEncodingStrategy: Sendable {
        /// The keys' `stringValue`. The default.
        case useDefaultKeys
        /// `camelCase` keys become `snake_case`, as `JSONEncoder` converts them.
        case convertToSnakeCase
        /// A closure that gets the full coding path and returns the key to write.
        case custom(@Sendable (_ codingPath: [any CodingKey]) -> any CodingKey)
    }

    /// How dates are encoded; the timestamp extension by default.
    public var dateEncodingStrategy: DateEncodingStrategy = .timestamp
    /// How keys are written; the keys' own names by default.
    public var keyEncodingStrategy: KeyEncodingStrategy = .useDefaultKeys
    /// Values handed to every `encode(to:)` through `Encoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates an encoder with default options.
    public init() {}

    /// Encodes a value as MessagePack.
    /// - Parameter value: The value to encode.
    /// - Returns: The MessagePack bytes.
    /// - Throws: `EncodingError` if a value refuses to encode, a string, array or map exceeds 2³²−1, a value
    ///   encodes nothing at the top level, or containers are filled out of order.
    public func encode<T: Encodable>(_ value: T) throws -> Data {
        let impl = EncoderImpl(options: self)
        try impl.encodeTopLevel(value)
        return impl.takeData()
    }

    /// Encodes a value as MessagePack into an array of bytes, without the copy into `Data`.
    /// - Parameter value: The value to encode.
    /// - Returns: The MessagePack bytes.
    /// - Throws: `EncodingError`, as `encode(_:)`.
    public func encodeToBytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        let impl = EncoderImpl(options: self)
        try impl.encodeTopLevel(value)
        return impl.writer.bytes
    }
}
