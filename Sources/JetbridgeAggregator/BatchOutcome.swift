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
