import Foundation

/// The totals of ``AnswerLedger``: logged periodically, shown by `status` (its `totals`, the keys below) and read
/// by tests.
public struct ServerStatistics: Codable, Hashable, Sendable {
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
    /// Batches answered `limited`: their device was past its records per second or per flight.
    public var limitedBatches = 0
    /// Batches answered `retry` because their transaction failed.
    public var retriedBatches = 0
    /// Store transactions committed.
    public var transactions = 0
    /// Acks dropped unsent: the device had no working ack route within 60 s, or too many acks were waiting for one
    /// (it will resend, and the resend counts as duplicates).
    public var unroutableAcks = 0
    /// Acks waiting for their device's route right now (a gauge, bounded by 256 per device and 65,536 in all).
    public var acksHeld = 0
    /// Times the allow list was loaded again (file change or SIGHUP).
    public var allowlistReloads = 0
    /// Hellos received from devices whose key matched (each means the route for its acks exists).
    public var hellos = 0
    /// Summaries answered, by answer status (`confirmed`, `mismatch`, `rejected`, …).
    public var summaries: [String: Int] = [:]
    /// Announcements answered, by the answer's status (docs/PROTOCOL.md, "Announce").
    public var announces: [String: Int] = [:]

    public init() {}

    /// The keys `status --json` shows under `totals` (docs/AGGREGATOR.md, "status"); the others are for the log and
    /// the tests.
    enum CodingKeys: String, CodingKey {
        case storedBatches, storedRecords, newRecords, duplicateRecords, rejectedBatches, retriedBatches, transactions
        case unroutableAcks
    }
}
