import Foundation
import JetbridgeProtocol
import SystemSupport

/// The one record of what `serve` answered: every batch (`stored`, `retry`, a refusal, `limited`), every committed
/// transaction, every ack held or dropped for want of a route, hellos and allow-list reloads. `/metrics`
/// (``AggregatorMetrics``, the Prometheus view), ``ServerStatistics`` (the totals: the statistics log line, tests,
/// `status`'s totals) and `status`'s devices and recent refusals are views of it, so they cannot disagree about
/// which batches were answered or how.
///
/// Thread-safe: the network thread answers refusals and `limited`, the store thread `stored` and `retry`.
final class AnswerLedger: Sendable {
    /// How a batch was answered, with what the views need of it.
    enum Outcome {
        /// Committed and acked `stored`: `new` records changed the store, `duplicates` were there already.
        case stored(new: Int, duplicates: Int)
        /// Its transaction failed and it was acked `retry`; `reason` (the store's error) is for `status`.
        case retry(reason: String)
        /// Refused (`rejected`, `forbidden`, `unsupported-version`): `records` is its header's count, 0 when the header
        /// could not be read.
        case refused(Ack.Status, records: Int, reason: String)
        /// Past one of its device's limits, acked `limited` (not a refusal: `status` does not list it).
        case limited

        var status: Ack.Status {
            switch self {
            case .stored: .stored
            case .retry: .retry
            case .refused(let status, _, _): status
            case .limited: .limited
            }
        }
    }

    /// What `status` shows beside the totals.
    struct Devices: Sendable {
        var devices: [String: ServeStatus.Device] = [:]
        var recentRejections: [ServeStatus.Rejection] = []
        var lastCommitAt: Date?
    }

    /// The Prometheus view, updated here and nowhere else (but for the handshakes, which the ZAP handler decides, and
    /// the timers).
    let metrics: AggregatorMetrics
    private let totals = Locked(ServerStatistics())
    private let seen = Locked(Devices())
    /// Devices `status` lists at most (a flood of made-up device ids cannot grow it without bound).
    static let deviceLimit = 100_000
    /// Refused batches `status` keeps.
    static let recentLimit = 10

    init(metrics: AggregatorMetrics = AggregatorMetrics()) {
        self.metrics = metrics
    }

    /// Counts `outcome` against `device`, has `send` answer the batch, then adds it to the totals.
    ///
    /// The order is the contract readers rely on: a device (or a test) that got the answer finds it in `/metrics` and
    /// in `status`'s devices, and whoever reads ``statistics`` finds the answer already sent, held or dropped.
    /// - Parameters:
    ///   - device: The device the batch is counted against.
    ///   - outcome: How it was answered.
    ///   - send: Sends (or passes on) the answer; it may send nothing (a refusal with no device to answer).
    func answer(device: String, _ outcome: Outcome, send: () -> Void) {
        let status = outcome.status.rawValue
        var new = 0
        var duplicates = 0
        var rejected = 0
        var reason: String?
        switch outcome {
        case .stored(let n, let d): (new, duplicates) = (n, d)
        case .retry(let why): reason = why
        case .refused(_, let records, let why): (rejected, reason) = (records, why)
        case .limited: break
        }
        metrics.batch(device: device, status: status, new: new, duplicates: duplicates, rejected: rejected)
        let now = Date()
        seen.withLock { seen in
            var entry = seen.devices[device] ?? ServeStatus.Device(device: device, lastBatchAt: now)
            entry.lastBatchAt = now
            entry.batches[status, default: 0] += 1
            entry.records["new", default: 0] += new
            entry.records["duplicate", default: 0] += duplicates
            entry.records["rejected", default: 0] += rejected
            if seen.devices[device] != nil || seen.devices.count < Self.deviceLimit { seen.devices[device] = entry }
            if let reason {
                seen.recentRejections.append(.init(time: now, device: device, status: status, reason: reason))
                if seen.recentRejections.count > Self.recentLimit { seen.recentRejections.removeFirst() }
            }
        }
        send()
        totals.withLock { totals in
            switch outcome {
            case .stored(let new, let duplicates):
                totals.storedBatches += 1
                totals.storedRecords += new + duplicates
                totals.newRecords += new
                totals.duplicateRecords += duplicates
            case .retry: totals.retriedBatches += 1
            case .refused: totals.rejectedBatches += 1
            case .limited: totals.limitedBatches += 1
            }
        }
    }

    /// A summary answered (docs/PROTOCOL.md, "Proof of delivery"): counted, then `send` answers it.
    func summary(_ status: SummaryAnswer.Status, send: () -> Void) {
        metrics.summary(status: status.rawValue)
        send()
        totals.withLock { $0.summaries[status.rawValue, default: 0] += 1 }
    }

    /// An announcement answered (docs/PROTOCOL.md, "Announce"): counted, then `send` answers it.
    func announce(_ status: AnnounceAnswer.Status, send: () -> Void) {
        metrics.announce(status: status.rawValue)
        send()
        totals.withLock { $0.announces[status.rawValue, default: 0] += 1 }
    }

    /// One store transaction's commit (`apply`), successful or not; its batches are counted one by one as they are
    /// answered.
    func committed(in duration: Duration, succeeded: Bool = true) {
        metrics.committed(in: duration)
        guard succeeded else { return }
        seen.withLock { $0.lastCommitAt = Date() }
        totals.withLock { $0.transactions += 1 }
    }

    /// Acks now waiting for their device's route (a gauge), and how many were dropped unsent since the last call.
    func acksHeld(_ held: Int, dropped: Int = 0) {
        totals.withLock {
            $0.acksHeld = held
            $0.unroutableAcks += dropped
        }
    }

    /// A hello from a device whose key matched.
    func hello() { totals.withLock { $0.hellos += 1 } }

    /// The allow list was loaded again.
    func allowlistReloaded() { totals.withLock { $0.allowlistReloads += 1 } }

    /// The totals so far.
    var statistics: ServerStatistics { totals.withLock { $0 } }

    /// The devices seen, the last refusals and the last commit, for `status`.
    var devices: Devices { seen.withLock { $0 } }
}
