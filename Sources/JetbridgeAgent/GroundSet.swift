/// Which aggregator gets a batch, with no sockets or clock: the choice part of sync with several aggregators
/// (docs/PROTOCOL.md, "Several aggregators"); ``SyncWindow`` keeps the batches and records each send's route.
///
/// New batches go round robin over the aggregators that are *usable* (link up, not refusing this device) and not
/// *in backoff* (one whose ack came too late is skipped for 1 s, then 2 s, … up to 60 s, until it answers again, so
/// a hung aggregator that still holds its TCP connection gets one probe batch at a time, not a share of every
/// window). A resend goes to the next usable aggregator after the one that had the batch last, never back to it
/// while another is usable. With one aggregator every choice is that one, whenever its link is up: the behaviour
/// of a single ground.
public struct GroundSet: Sendable, Hashable {
    /// Why a batch is being sent.
    public enum Reason: Sendable, Hashable {
        /// Its first send.
        case new
        /// Its ack did not come in time from the aggregator it went to last: that one goes into backoff.
        case timedOut
        /// Sent again for another reason (`retry`, `limited`, a rebuild, a link lost or restored).
        case again
    }

    /// Aggregators in the configured order.
    public let count: Int
    /// Per aggregator: its link is up (both channels' handshakes done, no disconnect since).
    public private(set) var up: [Bool]
    /// Per aggregator: it answered `forbidden` or `unsupported-version`, so it gets nothing more in this run.
    public private(set) var refusing: [Bool]
    /// Per aggregator: skipped for new batches until this time (after a late ack).
    public private(set) var backoffUntil: [Double]
    private var backoffDelay: [Double]
    private var cursor = 0
    /// The first and the longest backoff of an aggregator whose ack came too late, in seconds (as the window's).
    public static let backoffRange = 1.0...60.0

    /// - Parameter count: How many aggregators; at least one.
    public init(count: Int) {
        precondition(count >= 1, "at least one aggregator")
        self.count = count
        up = Array(repeating: false, count: count)
        refusing = Array(repeating: false, count: count)
        backoffUntil = Array(repeating: -.infinity, count: count)
        backoffDelay = Array(repeating: Self.backoffRange.lowerBound, count: count)
    }

    /// Whether aggregator `index` may get batches now: link up and not refusing this device.
    public func isUsable(_ index: Int) -> Bool { up[index] && !refusing[index] }
    /// Some aggregator may get batches.
    public var anyUsable: Bool { (0..<count).contains(where: isUsable) }
    /// Every aggregator refused this device: sync cannot go on.
    public var allRefusing: Bool { !refusing.contains(false) }

    /// Records what an aggregator's link monitors say.
    public mutating func setUp(_ index: Int, _ isUp: Bool) {
        up[index] = isUp
    }

    /// Chooses the aggregator for one send.
    /// - Parameters:
    ///   - previous: Where the batch went last (``SyncWindow/Batch/route``), `nil` for its first send.
    ///   - reason: Why it is sent; `timedOut` puts `previous` into backoff.
    ///   - now: The current time (the window's clock).
    /// - Returns: The aggregator's index, or `nil` when none is usable (nothing is sent then).
    public mutating func choose(previous: Int?, reason: Reason, now: Double) -> Int? {
        if reason == .timedOut, let previous { lateAck(from: previous, now: now) }
        let usable = (0..<count).filter(isUsable)
        guard !usable.isEmpty else { return nil }
        // Those not in backoff, unless every usable one is: then they share the probing.
        let ready = usable.filter { backoffUntil[$0] <= now }
        let pool = ready.isEmpty ? usable : ready
        if let previous, reason != .new {
            // The next one after the last, cyclically; the same one only when it is the only one left.
            return pool.min { distance(from: previous, to: $0) < distance(from: previous, to: $1) }!
        }
        // Round robin: the first one from the cursor on.
        let start = (cursor + count - 1) % count
        let chosen = pool.min { distance(from: start, to: $0) < distance(from: start, to: $1) }!
        cursor = (chosen + 1) % count
        return chosen
    }

    /// An aggregator's ack came too late: it is skipped for new batches for a while, twice as long each time.
    public mutating func lateAck(from index: Int, now: Double) {
        backoffUntil[index] = now + backoffDelay[index]
        backoffDelay[index] = min(backoffDelay[index] * 2, Self.backoffRange.upperBound)
    }

    /// An aggregator answered: its backoff ends.
    public mutating func answered(by index: Int) {
        backoffUntil[index] = -.infinity
        backoffDelay[index] = Self.backoffRange.lowerBound
    }

    /// An aggregator refused this device (`forbidden`, `unsupported-version`): it gets nothing more in this run.
    public mutating func refused(by index: Int) {
        refusing[index] = true
    }

    /// Steps from `start` to `index` going forward around the list, 1 … count (the start itself is `count`), so
    /// the minimum is the next one after `start` and `start` comes last.
    private func distance(from start: Int, to index: Int) -> Int {
        let steps = (index - start + count) % count
        return steps == 0 ? count : steps
    }
}
