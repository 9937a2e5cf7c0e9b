internal import MessagePack

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Encodes and decodes the ack channel's one-frame messages.
public enum WireCoding: Sendable {
    /// Encodes an ack or a hello as one MessagePack frame.
    public static func encode(_ value: some Encodable) throws -> Data {
        try MessagePackEncoder().encode(value)
    }

    /// Decodes an ack or a hello from one frame, with a small nesting limit (these are flat maps).
    public static func decode<T: Decodable>(_ type: T.Type, from frame: Data) throws -> T {
        var decoder = MessagePackDecoder()
        decoder.nestingLimit = 4
        return try decoder.decode(type, from: frame)
    }
}
