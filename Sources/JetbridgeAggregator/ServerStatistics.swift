import Foundation

/// Counters the network and store threads add to, logged periodically and read by tests.
public struct ServerStatistics: Hashable, Sendable {
    /// Batches committed and acked `stored`.
    public var storedBatches = 0
    /// Records in those batches.
    public var storedRecords = 0
    /// Records that changed the store.
    public var newRecords = 0
    /// Records already stored.
    public var duplicateRecords = 0
    /// Batches refused (`rejected`, `forbidden`, `unsupported-version`).
    public var rejectedBatches = 0
    /// Batches answered `retry` because their transaction failed.
    public var retriedBatches = 0
    /// Store transactions committed.
    public var transactions = 0
    /// Acks dropped because the device was not connected on the ack channel (it will resend).
    public var unroutableAcks = 0
    /// Hellos received from devices whose key matched (each means the route for its acks exists).
    public var hellos = 0

    public init() {}
}
