import JetbridgeModel
public import ZeroMQ
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// How one `sync` run connects and when it ends.
public struct SyncOptions: Sendable {
    /// How the sockets authenticate.
    public enum Security: Sendable {
        /// CURVE on both channels: this device's key pair and the ground's public key (32 bytes).
        case curve(CurveKeyPair, serverPublicKey: Data)
        /// Plaintext, for development only.
        case insecure
    }

    /// One aggregator: where its PULL and ROUTER are, and its key when it has its own.
    public struct Aggregator: Sendable, Hashable {
        /// Its PULL endpoint; also its name in logs and output.
        public var dataEndpoint: String
        /// Its ROUTER endpoint.
        public var ackEndpoint: String
        /// Its CURVE public key (32 bytes); `nil`: the one in ``Security/curve(_:serverPublicKey:)``.
        public var serverPublicKey: Data?

        public init(dataEndpoint: String, ackEndpoint: String, serverPublicKey: Data? = nil) {
            self.dataEndpoint = dataEndpoint
            self.ackEndpoint = ackEndpoint
            self.serverPublicKey = serverPublicKey
        }
    }

    /// The aggregators to spread batches over, in the configured order; at least one.
    public var aggregators: [Aggregator]
    /// The first aggregator's PULL endpoint.
    public var dataEndpoint: String { aggregators[0].dataEndpoint }
    /// The first aggregator's ROUTER endpoint.
    public var ackEndpoint: String { aggregators[0].ackEndpoint }
    public var security: Security
    /// End with success once everything queued is acknowledged (checked when the queue has no more to read).
    public var untilDrained: Bool
    /// Give up after this many seconds (exit 75 if records remain).
    public var timeout: Double?
    /// After a stop request (not a timeout), how long to wait for acks of batches already sent.
    public var stopGrace: Double
    /// How often to write `sync-state.json` while running.
    public var stateInterval: Double
    /// How long batches may wait for an ack before the hello is sent again (the ground may have lost our route).
    public var helloInterval: Double
    /// `LINGER` of the data socket: long enough to flush batches on a normal exit; never needed for correctness.
    public var linger: Duration
    /// `LINGER` used when closing at the end: short, because whatever did not leave is resent next time.
    public var closingLinger: Duration
    /// Proof of delivery's waits (docs/AGENT.md, "Proof of delivery"): fixed for users, shortened by tests.
    var confirmLimits = DeliveryConfirmer.Limits()

    /// One aggregator.
    public init(
        dataEndpoint: String, ackEndpoint: String, security: Security, untilDrained: Bool = false,
        timeout: Double? = nil, stopGrace: Double = 2, stateInterval: Double = 10, helloInterval: Double = 1,
        linger: Duration = .seconds(5), closingLinger: Duration = .milliseconds(500)
    ) {
        self.init(
            aggregators: [Aggregator(dataEndpoint: dataEndpoint, ackEndpoint: ackEndpoint)], security: security,
            untilDrained: untilDrained, timeout: timeout, stopGrace: stopGrace, stateInterval: stateInterval,
            helloInterval: helloInterval, linger: linger, closingLinger: closingLinger)
    }

    /// Several aggregators sharing one store (docs/PROTOCOL.md, "Several aggregators"), or one.
    /// - Parameter aggregators: At least one, each endpoint once.
    public init(
        aggregators: [Aggregator], security: Security, untilDrained: Bool = false,
        timeout: Double? = nil, stopGrace: Double = 2, stateInterval: Double = 10, helloInterval: Double = 1,
        linger: Duration = .seconds(5), closingLinger: Duration = .milliseconds(500)
    ) {
        precondition(!aggregators.isEmpty, "sync needs at least one aggregator")
        self.aggregators = aggregators
        self.security = security
        self.untilDrained = untilDrained
        self.timeout = timeout
        self.stopGrace = stopGrace
        self.stateInterval = stateInterval
        self.helloInterval = helloInterval
        self.linger = linger
        self.closingLinger = closingLinger
    }
}

/// Counts of one sync run.
public struct SyncStatistics: Sendable, Hashable, Codable {
    /// Batches handed to the socket, resends included.
    public var batchesSent = 0
    /// Records handed to the socket, resends included.
    public var recordsSent = 0
    /// Sends of a batch that had been sent before (no ack in time, `retry`, or a rebuild).
    public var resends = 0
    /// Records the ground confirmed stored in this run.
    public var acknowledged = 0
    /// Of those, how many changed the store (the acks' `new`).
    public var new = 0
    /// Of those, how many the store already had (the acks' `duplicates`).
    public var duplicates = 0
    /// Records the ground refused, set aside in `rejected/` in this run.
    public var setAside = 0
    /// Records skipped because an earlier run had set them aside.
    public var skipped = 0
    /// Acks that named no batch in flight (late or repeated answers).
    public var ignoredAcks = 0
    /// `limited` answers: the ground held this device to one of its limits.
    public var limited = 0
    /// Flights the ground confirmed in this run (docs/AGENT.md, "Proof of delivery").
    public var confirmedFlights = 0
    /// Acknowledged records appended to the queue again because the ground no longer held all of their flight.
    public var resentForProof = 0
    /// Seconds from start to end.
    public var elapsed: Double = 0

    public init() {}
}

/// What one aggregator did in a sync run (`sync --json`'s `aggregators`).
public struct AggregatorStatistics: Sendable, Hashable, Codable {
    /// Its data endpoint: the aggregator's name in output and logs.
    public var data: String
    /// Its ack endpoint.
    public var acks: String
    /// Batches handed to its data socket, resends included.
    public var batchesSent = 0
    /// Records in those batches.
    public var recordsSent = 0
    /// Records it acknowledged stored (each batch counts once, with the first `stored` that came for it).
    public var acknowledged = 0
    /// Its `stored` acks for batches already finished (another aggregator's ack came first): not counted again.
    public var lateAcks = 0

    public init(data: String, acks: String) {
        self.data = data
        self.acks = acks
    }
}

/// Where a running sync stands, for a progress display.
public struct SyncProgress: Sendable, Hashable {
    /// Records finished in this run (stored, or set aside).
    public var acknowledged: Int
    /// Records to deliver in this run as far as known: what was unacknowledged at start plus what arrived since.
    public var total: Int
    /// Records in batches waiting for an ack.
    public var inFlight: Int
    /// Seconds since start.
    public var elapsed: Double
    /// Why nothing gets through right now (`cannot reach tcp://…; retrying`, a refused key), or `nil`.
    public var problem: String?
    /// With several aggregators, those that are down while others carry the sync (`tcp://10.0.0.2:5560 down`), or
    /// `nil`.
    public var down: String?
}

/// How a sync run ended.
public struct SyncOutcome: Sendable {
    public enum Ending: Sendable {
        /// `--until-drained`: everything queued was acknowledged.
        case drained
        /// Stopped by a signal (or a cancelled task).
        case stopped
        /// `--timeout` passed.
        case timedOut
        /// Could not go on.
        case failed(AgentError)
    }

    public var ending: Ending
    public var statistics: SyncStatistics
    /// The queue's acknowledged position at the end.
    public var acknowledgedThrough: UInt64
    /// Records still unacknowledged in the queue at the end (`nil` if the queue could not be read).
    public var remaining: Int?
    /// Why the ground could not be reached, when the sockets know (a refused key, a wrong server key).
    public var problem: String?
    /// Per aggregator, in the configured order.
    public var aggregators: [AggregatorStatistics] = []
    /// Flights with acknowledged records the ground has not confirmed, and why (docs/AGENT.md, "Proof of delivery").
    public var unconfirmed: [String: String] = [:]
    /// Flights the ground has confirmed (in this run or before, for what the device holds now).
    public var confirmedFlights: [String] = []
    /// Records set aside in `rejected/` (this run's and earlier ones'): not delivered.
    public var setAsideHeld = 0
    /// The run was `--until-drained`: a flight not confirmed is exit 75 also when it was stopped or timed out with
    /// everything acknowledged.
    public var untilDrained = false
    /// The status command the summary points to, with the device's `--home` when it is not the default one.
    public var statusCommand = "jetbridge-agent status"

    public init(ending: Ending, statistics: SyncStatistics, acknowledgedThrough: UInt64, remaining: Int?) {
        self.ending = ending
        self.statistics = statistics
        self.acknowledgedThrough = acknowledgedThrough
        self.remaining = remaining
    }

    /// The process exit code: 0 when nothing is left to deliver (or drained), 75 when records remain, the error's
    /// code on failure.
    ///
    /// After those: 65 when this run set records aside (the ground refused them: not delivered), else 75 when a drained
    /// run, or an `--until-drained` run stopped or timed out, leaves a flight the ground did not confirm
    /// (docs/EXIT-CODES.md). Before, `sync --until-drained --timeout 20` that timed out in the wait for confirmations
    /// exited 0, and a script's `sync … && hand back` went on.
    public var exitCode: Int32 {
        switch ending {
        case .failed(let error): return error.code.exitCode
        case .stopped, .timedOut:
            if remaining != 0 { return AgentError.Code.tryAgain.exitCode }
        case .drained: break
        }
        if statistics.setAside > 0 { return AgentError.Code.dataError.exitCode }
        if !unconfirmed.isEmpty, untilDrained || isDrained { return AgentError.Code.tryAgain.exitCode }
        return 0
    }

    public var isDrained: Bool {
        if case .drained = ending { return true }
        return false
    }

    /// What the delivery proof adds to the summary line: confirmed flights, those not confirmed and why, records set
    /// aside. Empty when there is nothing to say.
    public var deliverySummary: String {
        var parts: [String] = []
        let total = confirmedFlights.count + unconfirmed.count
        if total > 0 {
            parts.append("flights confirmed \(confirmedFlights.count) of \(total)")
        }
        for (flight, reason) in unconfirmed.sorted(by: { $0.key < $1.key }) {
            parts.append("\(flight) NOT CONFIRMED: \(reason)")
        }
        if setAsideHeld > 0 {
            parts.append(
                "\(NumberText.grouped(setAsideHeld)) record\(setAsideHeld == 1 ? "" : "s") SET ASIDE (refused by the ground, not delivered; see `\(statusCommand)`)"
            )
        }
        return parts.joined(separator: "; ")
    }

    /// How it ended, for `sync-state.json` and the summary: `drained`, `stopped with 12 records unacknowledged`.
    public var result: String {
        let left =
            remaining.map { "\(NumberText.grouped($0)) record\($0 == 1 ? "" : "s") unacknowledged" }
            ?? "records unacknowledged"
        switch ending {
        case .drained: return "drained"
        case .stopped: return remaining == 0 ? "stopped, all acknowledged" : "stopped with \(left)"
        case .timedOut: return remaining == 0 ? "timed out, all acknowledged" : "timed out with \(left)"
        case .failed(let error): return "failed (exit \(error.code.exitCode)): \(error.message)"
        }
    }

    /// The ending as one word for scripts: `drained`, `stopped`, `timed-out`, `failed`.
    public var outcome: String {
        switch ending {
        case .drained: "drained"
        case .stopped: "stopped"
        case .timedOut: "timed-out"
        case .failed: "failed"
        }
    }

    /// Acknowledged records per second over the whole run (0 for a run too short to measure).
    public var recordsPerSecond: Double {
        statistics.elapsed > 0 ? (Double(statistics.acknowledged) / statistics.elapsed * 10).rounded() / 10 : 0
    }

    /// `sync --json`'s last line: the run as one object (docs/AGENT.md, "sync").
    public var summaryObject: SyncSummary {
        SyncSummary(
            outcome: outcome, result: result, exitCode: exitCode, recordsSent: statistics.recordsSent,
            batchesSent: statistics.batchesSent, resends: statistics.resends, acknowledged: statistics.acknowledged,
            new: statistics.new, duplicates: statistics.duplicates, setAside: statistics.setAside,
            durationSeconds: (statistics.elapsed * 1000).rounded() / 1000, recordsPerSecond: recordsPerSecond,
            acknowledgedThrough: acknowledgedThrough, remaining: remaining, problem: problem,
            aggregators: aggregators, confirmedFlights: confirmedFlights, unconfirmedFlights: unconfirmed,
            setAsideHeld: setAsideHeld)
    }

    /// One line: `sync drained: sent 5,000 records in 5 batches (0 resent); acknowledged 5,000 (4,990 new, 10
    /// duplicates); set aside 0; 1.2 s, 4,167 records/s; queue acknowledged through 5000`.
    public var summary: String {
        let s = statistics
        let g = NumberText.grouped
        func n(_ count: Int, _ noun: String, _ plural: String? = nil) -> String {
            "\(g(count)) \(count == 1 ? noun : plural ?? noun + "s")"
        }
        let rate = s.elapsed > 0 ? Int((Double(s.acknowledged) / s.elapsed).rounded()) : 0
        return "sync \(result.split(separator: ":").first ?? ""): sent \(n(s.recordsSent, "record")) in "
            + "\(n(s.batchesSent, "batch", "batches")) (\(g(s.resends)) resent); acknowledged \(g(s.acknowledged)) "
            + "(\(g(s.new)) new, \(n(s.duplicates, "duplicate"))); set aside \(g(s.setAside)); "
            + "\(NumberText.oneDecimal(s.elapsed)) s, \(g(rate)) records/s; queue acknowledged through \(acknowledgedThrough)"
            + (aggregators.count > 1 ? "; " + aggregatorSummary : "")
            + (deliverySummary.isEmpty ? "" : "; " + deliverySummary)
    }

    /// With several aggregators, what each did: `via tcp://a:5560 3 batches, 2,000 acknowledged; tcp://b:5560 …`.
    public var aggregatorSummary: String {
        let g = NumberText.grouped
        return "via "
            + aggregators.map { a in
                "\(a.data) \(g(a.batchesSent)) batch\(a.batchesSent == 1 ? "" : "es"), \(g(a.acknowledged)) acknowledged"
                    + (a.lateAcks > 0 ? ", \(g(a.lateAcks)) late ack\(a.lateAcks == 1 ? "" : "s")" : "")
            }.joined(separator: "; ")
    }
}

/// The machine-readable summary `sync --json` prints as its last line of standard output; every key is always
/// present (`null` when unknown).
public struct SyncSummary: Codable, Sendable, Hashable {
    /// `drained`, `stopped`, `timed-out` or `failed`.
    public var outcome: String
    /// The same for people, with what is left: `stopped with 12 records unacknowledged`.
    public var result: String
    public var exitCode: Int32
    public var recordsSent: Int
    public var batchesSent: Int
    public var resends: Int
    public var acknowledged: Int
    public var new: Int
    public var duplicates: Int
    public var setAside: Int
    public var durationSeconds: Double
    /// Acknowledged records per second over the run.
    public var recordsPerSecond: Double
    public var acknowledgedThrough: UInt64
    /// Records still unacknowledged (`null` when the queue could not be read).
    @NullWhenAbsent public var remaining: Int?
    /// Why the ground could not be reached, when known.
    @NullWhenAbsent public var problem: String?
    /// Per aggregator, in the configured order (one element with one aggregator).
    public var aggregators: [AggregatorStatistics]
    /// Flights the ground confirmed (docs/AGENT.md, "Proof of delivery").
    public var confirmedFlights: [String] = []
    /// Flights not confirmed, with why.
    public var unconfirmedFlights: [String: String] = [:]
    /// Records in `rejected/`: refused by the ground, not delivered.
    public var setAsideHeld = 0

    enum CodingKeys: String, CodingKey, CaseIterable {
        case outcome, result, exitCode, recordsSent, batchesSent, resends, acknowledged, new, duplicates, setAside
        case durationSeconds, recordsPerSecond, acknowledgedThrough, remaining, problem, aggregators
        case confirmedFlights, unconfirmedFlights, setAsideHeld
    }
}
