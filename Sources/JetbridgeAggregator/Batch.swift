public import Foundation
public import JetbridgeModel

/// Turns a record's stored bytes (as received on the wire) back into a ``Record``.
///
/// The store keeps each record's original bytes instead of re-encoding it, so whoever owns the codec supplies the
/// decoder: the MessagePack codec in production, anything in tests.
public typealias RecordDecoding = @Sendable (Data) throws -> Record

/// One decoded and validated record together with the bytes it arrived as.
public struct IncomingRecord: Hashable, Sendable {
    public var record: Record
    /// The record's original encoding, stored as is and decoded again for receipts and reports.
    public var bytes: Data

    public init(record: Record, bytes: Data) {
        self.record = record
        self.bytes = bytes
    }
}

/// One batch as the network layer hands it over: named by device and queue sequence range, records validated.
public struct IncomingBatch: Hashable, Sendable {
    public var device: String
    public var first: UInt64
    public var last: UInt64
    public var records: [IncomingRecord]

    public init(device: String, first: UInt64, last: UInt64, records: [IncomingRecord]) {
        self.device = device
        self.first = first
        self.last = last
        self.records = records
    }
}

/// What one stored batch changed: the numbers a `stored` ack carries (`new + duplicates == count`).
public struct BatchOutcome: Hashable, Sendable {
    public var device: String
    public var first: UInt64
    public var last: UInt64
    /// Records that changed the store: a new scan, a new order or a higher revision of one.
    public var new: Int
    /// Records already there: the same scan id, or an order revision not above the stored one.
    public var duplicates: Int

    public init(device: String, first: UInt64, last: UInt64, new: Int, duplicates: Int) {
        self.device = device
        self.first = first
        self.last = last
        self.new = new
        self.duplicates = duplicates
    }

    /// Records in the batch.
    public var count: Int { new + duplicates }
}
