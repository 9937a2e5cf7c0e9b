public import JetbridgeProtocol

/// What one stored batch changed: the numbers a `stored` ack carries (`new + duplicates == count`).
///
/// A batch refused by a rule that needs the store (an order of another device, a flight's second currency) has a
/// ``rejection``, and a batch past one of its device's flight limits a ``limit``; either counts nothing: none of its
/// records was stored.
public struct BatchOutcome: Hashable, Sendable {
    public var device: String
    public var first: UInt64
    public var last: UInt64
    /// Records that changed the store: a new scan, a new order or a higher revision of one.
    public var new: Int
    /// Records already there: the same scan id, or an order revision not above the stored one.
    public var duplicates: Int
    /// Why the batch was refused as a whole, with the offending record's index; nil when it was stored.
    public var rejection: BatchRejection?
    /// Why the batch was not stored now (answer `limited` with its `retryAfter`); nil when it was stored. Already
    /// counted against the device (`report devices`, `limited`) in the same transaction.
    public var limit: BatchLimit?

    public init(
        device: String, first: UInt64, last: UInt64, new: Int, duplicates: Int, rejection: BatchRejection? = nil,
        limit: BatchLimit? = nil
    ) {
        self.device = device
        self.first = first
        self.last = last
        self.new = new
        self.duplicates = duplicates
        self.rejection = rejection
        self.limit = limit
    }

    /// Records in the batch.
    public var count: Int { new + duplicates }
}
