public import FileQueue
public import JetbridgeProtocol
import SystemSupport

/// The bookkeeping of `sync`, with no sockets, files or clocks: which batches are in flight, when each is due again,
/// and how far the queue may be acknowledged.
///
/// Batches are cut in queue order and each one *covers* the queue positions from the end of the previous batch to
/// its own ``Batch/through``, so the acknowledged position is simply the `through` of the last batch in the
/// contiguous prefix of finished ones. A batch is finished when the ground stored it or when every record it held
/// was set aside. Times are seconds on any monotonic clock the caller chooses.
public struct SyncWindow: Sendable {
    /// How batches are cut and paced.
    public struct Limits: Sendable, Hashable {
        public var batchRecords: Int
        public var batchBytes: Int
        /// Most unfinished batches before no more are cut.
        public var window: Int
        /// Seconds to wait for an ack before any round trip is measured; then the measured one decides.
        public var ackTimeout: Double
        /// The shortest ack timeout the measured round trip may give.
        public var minTimeout: Double
        /// The longest wait between two sends of one batch.
        public var maxBackoff: Double
        /// Seconds before the first resend after a `retry` ack; doubled on every further `retry`.
        public var retryDelay: Double
        /// ± fraction applied to every wait, so devices that lost the ground together do not return together.
        public var jitter: Double
        /// `rejected` answers with index −1 in a row, for one batch, that end the sync.
        public var maxMalformedRejections: Int

        public init(
            batchRecords: Int, batchBytes: Int, window: Int, ackTimeout: Double, maxBackoff: Double = 60,
            retryDelay: Double? = nil, jitter: Double = 0.2, maxMalformedRejections: Int = 3,
            minTimeout: Double? = nil
        ) {
            self.batchRecords = batchRecords
            self.batchBytes = batchBytes
            self.window = window
            self.ackTimeout = ackTimeout
            self.minTimeout = minTimeout ?? min(1, ackTimeout)
            self.maxBackoff = maxBackoff
            self.retryDelay = retryDelay ?? min(1, ackTimeout)
            self.jitter = jitter
            self.maxMalformedRejections = maxMalformedRejections
        }

        /// The limits a configuration asks for.
        public init(_ sync: AgentConfiguration.Sync) {
            self.init(
                batchRecords: sync.batchRecords, batchBytes: sync.batchBytes, window: sync.window,
                ackTimeout: sync.ackTimeoutSeconds)
        }
    }

    /// A queue record on its way to the ground: the queue's own type, so what `read` returns goes into the window
    /// as it is.
    public typealias Record = FileQueue.Record

    /// Where a batch stands.
    public enum State: Sendable, Hashable {
        /// To be sent once the clock reaches `at` (at once when new).
        case due(at: Double)
        /// Sent; sent again if no ack comes by `deadline`.
        case waiting(sentAt: Double, deadline: Double)
        /// Stored by the ground, or every record set aside.
        case done
    }

    /// Records sent together and answered together.
    public struct Batch: Sendable, Hashable {
        /// Unique within this window; a split batch gets new ids.
        public let id: Int
        /// The records to send, in sequence order; empty only for a finished batch.
        public fileprivate(set) var records: [Record]
        /// The last queue position this batch accounts for (its own last record, or a set-aside one after it).
        public let through: UInt64
        public fileprivate(set) var state: State
        /// How many times it was handed to the socket.
        public fileprivate(set) var sends = 0
        /// Which aggregator the last send went to (an index the caller chooses; always 0 with one aggregator), or
        /// `nil` before the first send. Only that aggregator's `retry`, `limited` and `rejected` count for the
        /// batch: an older send's answer is stale (docs/PROTOCOL.md, "Several aggregators").
        public fileprivate(set) var route: Int?
        fileprivate var retryDelay: Double
        /// Batches sent after this one's last send and stored since: three mean this one was lost on the way.
        fileprivate var storedAfter = 0
        fileprivate var malformedRejections = 0

        /// The name on the wire: the first and last sequence it carries.
        public var first: UInt64 { records.first?.sequence ?? through }
        public var last: UInt64 { records.last?.sequence ?? through }
        public var isDone: Bool { state == .done }
    }

    /// What an ack did.
    public enum AckOutcome: Sendable, Hashable {
        /// The ack names no unfinished batch: a late or repeated answer, or another device's.
        case ignored
        /// The batch is durably stored.
        case stored(records: Int, new: Int, duplicates: Int)
        /// One record was refused: keep it aside (before the queue is acknowledged past it); the rest go again.
        case setAside(Record, reason: String)
        /// The batch as a whole was refused: read its records from the queue again and ``replaceRecords(ofBatch:with:now:)``.
        case rebuild(batchID: Int, sequences: [UInt64])
        /// The ground asked for the batch later; it is scheduled.
        case retryLater(at: Double)
        /// The ground limits this device (`limited`); the batch is scheduled no earlier than its `retryAfter`.
        case limited(at: Double)
        /// The ack breaks one of the bounds of docs/PROTOCOL.md "Bounds of an ack" (said in words): nothing changed, as
        /// if it had not come; the batch goes again on its timeout.
        case invalid(String)
        /// Sync cannot go on: `forbidden`, `unsupported-version`, or a batch malformed three times in a row.
        case fatal(AgentError)
    }

    public let limits: Limits
    /// Unfinished batches, and finished ones not yet at the front, in queue order.
    public private(set) var batches: [Batch] = []
    /// Everything up to here is finished: the queue may be acknowledged through it.
    public private(set) var acknowledgedThrough: UInt64
    /// The next queue sequence to read.
    public private(set) var nextSequence: UInt64
    /// Records set aside in this run or an earlier one; never sent again.
    public private(set) var setAside: Set<UInt64>
    private var nextID = 0
    private var random: SplitMix
    /// The round trip as TCP measures it (RFC 6298): smoothed, and its mean deviation; `nil` before the first sample.
    public private(set) var smoothedRoundTrip: Double?
    public private(set) var roundTripVariation: Double = 0
    /// Timeouts in a row without progress: each doubles the wait, up to ``Limits/maxBackoff``.
    public private(set) var backoffs = 0

    /// Starts after the queue's acknowledged position.
    /// - Parameters:
    ///   - acknowledgedThrough: The queue's durable position.
    ///   - limits: Batch sizes, window and timing.
    ///   - setAside: Sequences already set aside (found in `rejected/`), skipped when read.
    ///   - seed: Seeds the jitter; tests pass a fixed one.
    public init(
        acknowledgedThrough: UInt64, limits: Limits, setAside: Set<UInt64> = [],
        seed: UInt64 = UInt64.random(in: .min ... .max)
    ) {
        self.acknowledgedThrough = acknowledgedThrough
        self.nextSequence = acknowledgedThrough + 1
        self.limits = limits
        self.setAside = setAside
        self.random = SplitMix(state: seed)
    }

    /// Whether another batch may be cut now.
    public var hasRoom: Bool { unfinishedCount < limits.window }
    /// Batches cut and not yet finished.
    public var unfinishedCount: Int { batches.count { !$0.isDone } }
    /// Nothing in flight: every batch cut so far is finished.
    public var isIdle: Bool { batches.isEmpty }
    /// A batch is waiting for the ack of its last send (also past its deadline: a late ack may still come). A
    /// stopping sync waits for acks only then: batches read but never sent (no link was up), or due to be sent again
    /// after a `retry` answer, have none coming.
    public var awaitsAnAck: Bool { oldestWaitingSince != nil }
    /// Records in unfinished batches.
    public var recordsInFlight: Int { batches.reduce(0) { $0 + ($1.isDone ? 0 : $1.records.count) } }
    /// When the oldest batch still waiting for its ack was last sent.
    public var oldestWaitingSince: Double? {
        batches.compactMap { batch -> Double? in
            if case .waiting(let sentAt, _) = batch.state { return sentAt }
            return nil
        }.min()
    }

    public func batch(id: Int) -> Batch? { batches.first { $0.id == id } }

    /// Cuts a batch from records read from the queue at ``nextSequence`` (at most the limits' records and bytes).
    ///
    /// Records already set aside are left out, and the records on either side of one go in separate batches, as
    /// when a record is set aside in the run (``split(at:removing:now:)``): a batch's name (first…last) then never
    /// spans a record it does not carry. The ground holds late answers for a device up to a minute, so the next run
    /// can get the answers to the last run's batches; had it named `#1…10` a batch of nine records (4 set aside), a
    /// late `rejected, index 3` to the last run's ten-record `#1…10` set aside record 5 with record 4's reason.
    /// - Parameters:
    ///   - read: What the queue returned, in sequence order; at least one record.
    ///   - now: The current time.
    /// - Returns: The first new batch's id, or `nil` when every record read was already set aside.
    @discardableResult
    public mutating func add(read: [Record], now: Double) -> Int? {
        guard let through = read.last?.sequence else { return nil }
        precondition(read[0].sequence >= nextSequence, "records must be read from nextSequence on")
        nextSequence = through + 1
        // Runs of records not set aside; each batch also covers the set-aside records after it (its `through`).
        var runs: [[Record]] = [[]]
        for record in read {
            if setAside.contains(record.sequence) {
                if !runs[runs.count - 1].isEmpty { runs.append([]) }
            } else {
                runs[runs.count - 1].append(record)
            }
        }
        if runs.count > 1, runs[runs.count - 1].isEmpty { runs.removeLast() }
        var first: Int?
        for (index, records) in runs.enumerated() {
            let covers = index + 1 < runs.count ? runs[index + 1][0].sequence - 1 : through
            let batch = newBatch(records: records, through: covers, now: now)
            if first == nil, !records.isEmpty { first = batch.id }
            batches.append(batch)
        }
        advance()
        return first
    }

    /// The ack timeout the measured round trip gives (RFC 6298: SRTT + 4 × RTTVAR), before backoff, within
    /// ``Limits/minTimeout`` … ``Limits/maxBackoff``; ``Limits/ackTimeout`` until a round trip is measured.
    public var timeout: Double {
        guard let srtt = smoothedRoundTrip else { return limits.ackTimeout }
        return min(max(srtt + max(0.01, 4 * roundTripVariation), limits.minTimeout), limits.maxBackoff)
    }

    /// The timeout with the current backoff applied.
    public var backedOffTimeout: Double {
        min(timeout * Double(1 << min(backoffs, 20)), max(limits.maxBackoff, timeout))
    }

    /// The batches to hand to the socket now: new ones, ones the ground asked for again, the oldest whose ack is late
    /// (one at a time: while the link or the ground is silent, one batch probes it, with a doubling wait, rather than
    /// the whole window going again), and any that three later batches overtook (lost on the way; sent again at
    /// once, like TCP's fast retransmit).
    public func batchesToSend(now: Double) -> [Int] {
        var late = false
        return batches.compactMap { batch in
            switch batch.state {
            case .due(let at) where at <= now:
                return batch.id
            case .waiting(_, let deadline) where deadline <= now && !late:
                late = true
                return batch.id
            case .waiting where batch.storedAfter >= 3:
                return batch.id
            default:
                return nil
            }
        }
    }

    /// Records that a batch was handed to the socket; its ack is due within the (backed-off, jittered) timeout.
    ///
    /// The wait is measured from the send only as a bound: every ack that stores a batch restarts the wait of all the
    /// batches still waiting (see ``apply(_:now:from:)``), so a batch queued behind others on a slow link is not
    /// resent while the ones ahead of it are still being answered.
    /// - Parameters:
    ///   - batchID: The batch handed to a socket.
    ///   - now: The current time.
    ///   - route: The aggregator it went to (0 with one aggregator).
    public mutating func sent(batchID: Int, now: Double, route: Int = 0) {
        guard let index = batches.firstIndex(where: { $0.id == batchID }), !batches[index].isDone else { return }
        if case .waiting(_, let deadline) = batches[index].state, deadline <= now {
            // A timeout: wait twice as long before the next one, for this batch and every other still waiting.
            backoffs += 1
            let wait = backedOffTimeout
            for other in batches.indices where other != index {
                if case .waiting(let sentAt, let deadline) = batches[other].state, deadline < now + wait {
                    batches[other].state = .waiting(sentAt: sentAt, deadline: now + jittered(wait))
                }
            }
        }
        batches[index].state = .waiting(sentAt: now, deadline: now + jittered(backedOffTimeout))
        batches[index].sends += 1
        batches[index].storedAfter = 0
        batches[index].route = route
    }

    /// Takes one round-trip sample (RFC 6298, 2.2–2.3).
    private mutating func sample(_ roundTrip: Double) {
        guard let srtt = smoothedRoundTrip else {
            smoothedRoundTrip = roundTrip
            roundTripVariation = roundTrip / 2
            return
        }
        roundTripVariation = 0.75 * roundTripVariation + 0.25 * abs(srtt - roundTrip)
        smoothedRoundTrip = 0.875 * srtt + 0.125 * roundTrip
    }

    /// A batch was stored: a round-trip sample if it was sent once (Karn: the ack of a resent batch may answer any of
    /// its sends), the backoff ends, and every batch still waiting gets a full timeout from now.
    ///
    /// Only batches sent earlier *to the same aggregator* count as overtaken: another aggregator may simply be
    /// slower (a longer commit), and counting its batches would resend them for nothing.
    private mutating func progress(storedBatchSentAt sentAt: Double?, sends: Int, route: Int?, now: Double) {
        if let sentAt, sends == 1 { sample(now - sentAt) }
        backoffs = 0
        for index in batches.indices {
            guard case .waiting(let waitingSince, _) = batches[index].state else { continue }
            if let sentAt, waitingSince < sentAt, batches[index].route == route { batches[index].storedAfter += 1 }
            batches[index].state = .waiting(sentAt: waitingSince, deadline: now + jittered(timeout))
        }
    }

    /// The link to the ground came back after it was down: every batch still waiting for its ack is due once more,
    /// now. Each was either stored (its ack lost with the connection) or lost on the way; sending it once is what it
    /// takes, and waiting out a timeout that backed off while the link was down would only leave the device behind.
    /// - Parameter now: The current time.
    /// - Returns: How many batches are due again.
    @discardableResult
    public mutating func linkRestored(now: Double) -> Int {
        defer { backoffs = 0 }
        return sendAgain(now: now) { _ in true }
    }

    /// Makes the batches still waiting for an ack that `predicate` picks due once more, now, and ends the backoff:
    /// with several aggregators, the batches last sent to one whose link went down (they go to another) or came back.
    /// - Parameters:
    ///   - now: The current time.
    ///   - predicate: Which waiting batches (by their ``Batch/route``).
    /// - Returns: How many batches are due again.
    @discardableResult
    public mutating func sendAgain(now: Double, where predicate: (Batch) -> Bool) -> Int {
        var again = 0
        for index in batches.indices {
            guard case .waiting = batches[index].state, predicate(batches[index]) else { continue }
            batches[index].state = .due(at: now)
            again += 1
        }
        if again > 0 { backoffs = 0 }
        return again
    }

    /// Applies an ack from the ground.
    ///
    /// An ack whose numbers break a bound for the batch it names (``Ack/boundsProblem(batchRecords:)``: a `retryAfter`
    /// of `inf`, a `new` above the batch's count, an `index` outside it) changes nothing and is ``AckOutcome/invalid(_:)``:
    /// the batch waits on exactly as if no ack had come, and goes again on its timeout.
    ///
    /// `stored` counts from whichever aggregator sends it: it says the batch is durable in the (shared) store, so a
    /// late ack from an aggregator the batch was sent to before saves the resend's answer, and the resend's own
    /// `stored` is then ignored. Every other answer describes one send, and counts only from the aggregator of the
    /// batch's last send (``Batch/route``): a stale `retry` must not hold back a resend another aggregator is storing.
    /// - Parameters:
    ///   - ack: The decoded ack.
    ///   - now: The current time.
    ///   - route: The aggregator it came from (0 with one aggregator).
    /// - Returns: What the caller must do next.
    public mutating func apply(_ ack: Ack, now: Double, from route: Int = 0) -> AckOutcome {
        guard
            let index = batches.firstIndex(where: { !$0.isDone && $0.first == ack.first && $0.last == ack.last })
        else { return .ignored }
        let count = batches[index].records.count
        if let problem = ack.boundsProblem(batchRecords: count) { return .invalid(problem) }
        if ack.status != .stored, let last = batches[index].route, last != route { return .ignored }
        let label = "batch #\(ack.first)…\(ack.last)"
        switch ack.status {
        case .stored:
            var sentAt: Double?
            if case .waiting(let at, _) = batches[index].state { sentAt = at }
            batches[index].state = .done
            // Its records are the caller's now (it read them before applying the ack). A finished batch behind an
            // unfinished one stays in `batches` until that one finishes, and only unfinished batches count against
            // the window: kept with their records, batches stored behind one held back for minutes (`limited`)
            // held the whole unacknowledged queue in memory.
            batches[index].records = []
            progress(storedBatchSentAt: sentAt, sends: batches[index].sends, route: batches[index].route, now: now)
            advance()
            let stored = ack.storedCounts(records: count)
            return .stored(records: count, new: stored.new, duplicates: stored.duplicates)
        case .rejected:
            let recordIndex = ack.index ?? -1
            let reason = ack.shownReason
            if recordIndex >= 0, recordIndex < count {
                let record = batches[index].records[recordIndex]
                split(at: index, removing: recordIndex, now: now)
                return .setAside(record, reason: reason)
            }
            batches[index].malformedRejections += 1
            if batches[index].malformedRejections >= limits.maxMalformedRejections {
                return .fatal(
                    AgentError(
                        .dataError,
                        "the ground rejected \(label) as malformed \(batches[index].malformedRejections) times in a row (\(reason)); the queue may be damaged: run `jetbridge-queue fsck` on it"
                    ))
            }
            batches[index].state = .due(at: now)
            return .rebuild(batchID: batches[index].id, sequences: batches[index].records.map(\.sequence))
        case .retry:
            let delay = jittered(batches[index].retryDelay)
            batches[index].retryDelay = min(batches[index].retryDelay * 2, limits.maxBackoff)
            batches[index].malformedRejections = 0
            batches[index].state = .due(at: now + delay)
            return .retryLater(at: now + delay)
        case .limited:
            // Back off as for `retry`, but never sooner than the ground said (0 … an hour, the bounds above): a limit
            // does not lift by resending.
            let delay = max(jittered(batches[index].retryDelay), ack.retryAfter ?? 0)
            batches[index].retryDelay = min(batches[index].retryDelay * 2, limits.maxBackoff)
            batches[index].malformedRejections = 0
            batches[index].state = .due(at: now + delay)
            return .limited(at: now + delay)
        case .forbidden:
            return .fatal(
                AgentError(
                    .dataError,
                    "the ground refused \(label) as forbidden (\(ack.shownReason)): this device's key is revoked or registered to another device id; check \"device\" in the configuration and the allow list on the ground"
                ))
        case .unsupportedVersion:
            let supported = ack.supported.map { " (it speaks \($0.map(String.init).joined(separator: ", ")))" } ?? ""
            return .fatal(
                AgentError(
                    .unavailable,
                    "the ground does not speak protocol version \(WireProtocol.version)\(supported); upgrade the agent or the aggregator"
                ))
        }
    }

    /// Puts records read again from the queue into a batch the ground found malformed; it is sent again at once.
    /// - Parameters:
    ///   - batchID: The batch named by ``AckOutcome/rebuild(batchID:sequences:)``.
    ///   - records: The records with the batch's sequences, fresh from the queue.
    ///   - now: The current time.
    public mutating func replaceRecords(ofBatch batchID: Int, with records: [Record], now: Double) {
        guard let index = batches.firstIndex(where: { $0.id == batchID }), !batches[index].isDone else { return }
        let wanted = Set(batches[index].records.map(\.sequence))
        let fresh = records.filter { wanted.contains($0.sequence) }
        // A record that vanished from the queue (quarantined as damaged) is not resent; its position stays covered.
        batches[index].records = fresh
        if fresh.isEmpty {
            batches[index].state = .done
            advance()
        } else {
            batches[index].state = .due(at: now)
        }
    }

    /// Sets one record aside and replaces the batch by the records before it and the records after it.
    ///
    /// Two batches rather than one so the new names (first, last) differ from the refused batch's: a late second
    /// answer to the refused batch can then never be taken for an answer to its replacement.
    private mutating func split(at index: Int, removing recordIndex: Int, now: Double) {
        let old = batches[index]
        setAside.insert(old.records[recordIndex].sequence)
        let before = Array(old.records[..<recordIndex])
        let after = Array(old.records[(recordIndex + 1)...])
        var replacement: [Batch] = []
        if !before.isEmpty {
            // Covers the set-aside record too, unless a later part follows to cover it.
            let through = after.isEmpty ? old.through : old.records[recordIndex].sequence
            replacement.append(newBatch(records: before, through: through, now: now))
        }
        if !after.isEmpty || before.isEmpty {
            replacement.append(newBatch(records: after, through: old.through, now: now))
        }
        batches.replaceSubrange(index...index, with: replacement)
        advance()
    }

    private mutating func newBatch(records: [Record], through: UInt64, now: Double) -> Batch {
        defer { nextID += 1 }
        return Batch(
            id: nextID, records: records, through: through, state: records.isEmpty ? .done : .due(at: now),
            retryDelay: limits.retryDelay)
    }

    /// Drops finished batches from the front and moves the acknowledged position with them.
    private mutating func advance() {
        var finished = 0
        for batch in batches {
            guard batch.isDone else { break }
            acknowledgedThrough = max(acknowledgedThrough, batch.through)
            finished += 1
        }
        batches.removeFirst(finished)
    }

    private mutating func jittered(_ seconds: Double) -> Double {
        guard limits.jitter > 0 else { return seconds }
        let factor = 1 + limits.jitter * (2 * Double(random.next() >> 11) / Double(1 << 53) - 1)
        return seconds * factor
    }
}
