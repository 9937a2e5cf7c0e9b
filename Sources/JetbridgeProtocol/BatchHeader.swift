/// Frame 1 of a batch: who sent it, which queue records it carries, and the checksum of frame 2.
public struct BatchHeader: Codable, Hashable, Sendable {
    /// The protocol version, ``WireProtocol/version`` when written by this build.
    public var v: Int
    /// The sending device's id.
    public var device: String
    /// Queue sequence number of the first record in the batch.
    public var first: UInt64
    /// Queue sequence number of the last record in the batch.
    public var last: UInt64
    /// Number of records in frame 2.
    public var count: Int
    /// CRC-32C of frame 2's bytes.
    public var crc32c: UInt32

    public init(v: Int = WireProtocol.version, device: String, first: UInt64, last: UInt64, count: Int, crc32c: UInt32)
    {
        self.v = v
        self.device = device
        self.first = first
        self.last = last
        self.count = count
        self.crc32c = crc32c
    }

    public static let example = BatchHeader(device: "cart-1", first: 1, last: 1, count: 1, crc32c: 0x098d_0b75)

    /// The batch's name in logs and acks: `cart-1 #1…40`.
    public var label: String { Self.label(device: device, first: first, last: last) }

    /// How logs and messages name a batch: `cart-1 #1…1000`.
    public static func label(device: String, first: UInt64, last: UInt64) -> String { "\(device) #\(first)…\(last)" }
}
