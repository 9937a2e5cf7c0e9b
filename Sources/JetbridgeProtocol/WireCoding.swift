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
        try decoder.decode(type, from: frame)
    }

    /// The decoder of frame 1 and of every message on the ack channel: flat maps, so four levels and
    /// ``WireProtocol/maxMapEntries`` entries a map.
    static var decoder: MessagePackDecoder {
        var decoder = MessagePackDecoder()
        decoder.nestingLimit = 4
        decoder.maxMapEntries = WireProtocol.maxMapEntries
        return decoder
    }
}
