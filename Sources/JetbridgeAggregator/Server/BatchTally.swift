import JetbridgeProtocol
import SystemSupport

/// The one place an answered batch is counted, whichever thread answers it and however: in the metrics (`/metrics`,
/// and `status`'s devices and recent rejections) and in the statistics (`status`'s totals, the statistics log line).
/// Every answer (`stored`, `retry`, a refusal, `limited`) goes through ``answer(device:_:send:)``, so the two tallies
/// cannot disagree about which batches were answered or how.
struct BatchTally: Sendable {
    let statistics: Locked<ServerStatistics>
    let metrics: AggregatorMetrics

    /// How a batch was answered, with what the two tallies need of it.
    enum Outcome {
        /// Committed and acked `stored`: `new` records changed the store, `duplicates` were there already.
        case stored(new: Int, duplicates: Int)
        /// Its transaction failed and it was acked `retry`; `reason` (the store's error) is for `status`.
        case retry(reason: String)
        /// Refused (`rejected`, `forbidden`, `unsupported-version`): `records` is its header's count, 0 when the header
        /// could not be read.
        case refused(Ack.Status, records: Int, reason: String)
        /// Past its device's limits, acked `limited` (not a rejection: `status` does not list it).
        case limited
    }

    /// Counts `outcome` against `device` in the metrics, has `send` answer the batch, then counts it in the statistics.
    /// The order is the contract both readers rely on: a device (or a test) that got the answer finds it in
    /// `/metrics`, and whoever reads ``ServerStatistics`` finds the answer already sent, held or dropped.
    /// - Parameters:
    ///   - device: The device the batch is counted against.
    ///   - outcome: How it was answered.
    ///   - send: Sends (or passes on) the answer; it may send nothing (a refusal with no device to answer).
    func answer(device: String, _ outcome: Outcome, send: () -> Void) {
        switch outcome {
        case .stored(let new, let duplicates):
            metrics.batch(device: device, status: Ack.Status.stored.rawValue, new: new, duplicates: duplicates)
        case .retry(let reason):
            metrics.batch(device: device, status: Ack.Status.retry.rawValue, reason: reason)
        case .refused(let status, let records, let reason):
            metrics.batch(device: device, status: status.rawValue, rejected: records, reason: reason)
        case .limited:
            metrics.batch(device: device, status: Ack.Status.limited.rawValue)
        }
        send()
        statistics.withLock { statistics in
            switch outcome {
            case .stored(let new, let duplicates):
                statistics.storedBatches += 1
                statistics.storedRecords += new + duplicates
                statistics.newRecords += new
                statistics.duplicateRecords += duplicates
            case .retry: statistics.retriedBatches += 1
            case .refused: statistics.rejectedBatches += 1
            case .limited: statistics.limitedBatches += 1
            }
        }
    }

    /// Counts a committed store transaction (its batches are counted one by one as they are answered).
    func committedTransaction() {
        statistics.withLock { $0.transactions += 1 }
    }
}
