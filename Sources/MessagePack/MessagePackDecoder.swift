#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Decodes `Decodable` values from MessagePack, in the shape of Foundation's `JSONDecoder`, strictly.
///
/// Every failure is a `DecodingError` whose coding path names the value and whose description names the byte
/// offset: truncated input, lengths running past the end (checked before anything is allocated), nesting deeper
/// than `nestingLimit`, invalid UTF-8, the never-used byte 0xc1, integers out of range for the requested type, floats
/// into integers unless exact, nil into non-optionals, malformed timestamps, other extensions as `Date`, a key
/// present twice in a map read by a keyed container, and bytes left over after the top-level value. Values under
/// keys the type does not read are checked for structure only.
///
/// `decode` reads the bytes in place; pass a slice or a buffer pointer to decode part of a larger buffer without
/// copying it.
public struct MessagePackDecoder: Sendable {
    /// How `Date` values are decoded.
    public enum DateDecodingStrategy: Sendable {
        /// The timestamp extension (type −1) in any of its forms. The default.
        case timestamp
        /// Whatever `Date(from:)` reads: seconds since 2001 as a number.
        case deferredToDate
        /// Seconds since 1970 as a number.
        case secondsSince1970
        /// Milliseconds since 1970 as a number.
        case millisecondsSince1970
        /// ISO 8601 text, such as `2026-11-21T10:00:00Z`.
        case iso8601
        /// A closure that decodes the date from the given decoder.
        case custom(@Sendable (any Decoder) throws -> Date)
    }

    /// How map keys are matched to coding keys.
    public enum KeyDecodingStrategy: Sendable {
        /// Keys must equal the coding keys' `stringValue` (or, for integer map keys, their `intValue`). The default.
        case useDefaultKeys
        /// `snake_case` map keys are matched as `camelCase`, as `JSONDecoder` converts them.
        case convertFromSnakeCase
        /// A closure that gets the full coding path, ending in the map's key, and returns the key to match.
        case custom(@Sendable (_ codingPath: [any CodingKey]) -> any CodingKey)
    }

    /// The deepest nesting of arrays and maps accepted, in typed and in `MessagePackValue` decoding; 512 by default.
    public var nestingLimit: Int = 512
    /// The most entries a map read by a keyed container may hold; no limit by default. A keyed container indexes a
    /// map's keys (24 bytes each, and a sorted copy to find one present twice): a map of millions of tiny entries
    /// costs many times its bytes. Readers of small messages from peers they do not trust set it.
    public var maxMapEntries: Int = .max
    /// How dates are decoded; the timestamp extension by default.
    public var dateDecodingStrategy: DateDecodingStrategy = .timestamp
    /// How keys are matched; exactly by default.
    public var keyDecodingStrategy: KeyDecodingStrategy = .useDefaultKeys
    /// Values handed to every `init(from:)` through `Decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable] = [:]

    /// Creates a decoder with default options.
    public init() {}

    /// Decodes a value from MessagePack.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - data: Exactly one MessagePack value.
    /// - Returns: The decoded value.
    /// - Throws: `DecodingError`, with the coding path and the byte offset of the problem.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try data.withUnsafeBytes { try decode(type, fromBuffer: $0) }
    }

    /// Decodes a value from MessagePack bytes held in any contiguous storage, without copying them.
    ///
    /// Use it with `[UInt8]`, `ArraySlice<UInt8>`, `UnsafeRawBufferPointer` or a `Data` slice, for example an
    /// element range from `MessagePackStructure.arrayElements(in:)`.
    /// - Parameters:
    ///   - type: The type to decode.
    ///   - bytes: Exactly one MessagePack value.
    /// - Returns: The decoded value.
    /// - Throws: `DecodingError`; offsets count from the start of `bytes`.
    public func decode<T: Decodable>(_ type: T.Type, from bytes: some ContiguousBytes) throws -> T {
        try bytes.withUnsafeBytes { try decode(type, fromBuffer: $0) }
    }

    func decode<T: Decodable>(_ type: T.Type, fromBuffer buffer: UnsafeRawBufferPointer) throws -> T {
        let impl = DecoderImpl.acquire(reader: ByteReader(buffer), options: self)
        defer { impl.relinquish() }
        return try impl.decodeTopLevel(type)
    }
}
