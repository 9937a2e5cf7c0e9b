/// The ground's answer to one batch, on the ack channel (docs/PROTOCOL.md "Acks").
public struct Ack: Codable, Hashable, Sendable {
    /// What became of the batch.
    public enum Status: String, Codable, Hashable, Sendable {
        /// Durably committed.
        case stored
        /// Invalid; nothing of it was stored. `index` names the record, or is −1 for the batch as a whole.
        case rejected
        /// Not stored now (store busy, disk full); send again after a backoff.
        case retry
        /// The header names another device than the connection's key.
        case forbidden
        /// The ground does not speak this protocol version.
        case unsupportedVersion = "unsupported-version"
        /// Past one of the device's limits (records or bytes per second, records per flight, flights per day);
        /// nothing of it was stored. Send it again after `retryAfter` seconds at the earliest.
        case limited

        /// Statuses a later protocol version may add are treated as `retry`, as the version rule says.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            self = Status(rawValue: text) ?? .retry
        }
    }

    public var v: Int
    public var device: String
    public var first: UInt64
    public var last: UInt64
    public var status: Status
    /// Records that changed the store (`stored` only).
    public var new: Int?
    /// Records already stored (`stored` only).
    public var duplicates: Int?
    /// The offending record's index, −1 for the batch (`rejected` only).
    public var index: Int?
    /// What is wrong, for people (all but `stored`).
    public var reason: String?
    /// The versions the ground speaks (`unsupported-version` only).
    public var supported: [Int]?
    /// Seconds to wait before sending the batch again (`limited` only).
    public var retryAfter: Double?

    public init(
        v: Int = WireProtocol.version, device: String, first: UInt64, last: UInt64, status: Status,
        new: Int? = nil, duplicates: Int? = nil, index: Int? = nil, reason: String? = nil, supported: [Int]? = nil,
        retryAfter: Double? = nil
    ) {
        self.v = v
        self.device = device
        self.first = first
        self.last = last
        self.status = status
        self.new = new
        self.duplicates = duplicates
        self.index = index
        self.reason = reason
        self.supported = supported
        self.retryAfter = retryAfter
    }

    /// The ack for a batch that was committed.
    public static func stored(_ header: BatchHeader, new: Int, duplicates: Int) -> Ack {
        Ack(
            device: header.device, first: header.first, last: header.last, status: .stored, new: new,
            duplicates: duplicates)
    }

    /// The ack asking the device to send a batch again later.
    public static func retry(_ header: BatchHeader, reason: String) -> Ack {
        Ack(device: header.device, first: header.first, last: header.last, status: .retry, reason: reason)
    }

    public static let example = Ack.stored(.example, new: 1, duplicates: 0)

    /// The wire keys in the documented order. The synthesized `encode(to:)` writes them in this order and leaves
    /// out the optional ones that are `nil` (`encodeIfPresent`), as docs/PROTOCOL.md "Acks" specifies.
    enum CodingKeys: String, CodingKey {
        case v, device, first, last, status, new, duplicates, index, reason, supported, retryAfter
    }
}
