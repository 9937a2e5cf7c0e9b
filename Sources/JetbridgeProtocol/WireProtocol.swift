/// The constants of the Jetbridge wire protocol, version 1 (docs/PROTOCOL.md).
public enum WireProtocol: Sendable {
    /// The protocol version this build speaks, written as `v` in every header, hello and ack.
    public static let version = 1
    /// The versions this build accepts from a peer.
    public static let supportedVersions = [1]
    /// The most records one batch may carry.
    public static let maxBatchRecords = 10_000
    /// The largest frame 2 (the records array) one batch may carry, in bytes.
    public static let maxBatchBytes = 8 << 20
    /// The nesting limit for decoding records from the wire: a record nests four levels deep, so 32 is generous.
    public static let recordNestingLimit = 32
}
