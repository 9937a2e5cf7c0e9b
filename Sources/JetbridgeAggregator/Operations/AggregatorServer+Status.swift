import Foundation
import JetbridgeProtocol
import Logging
import SystemSupport

extension AggregatorServer {
    /// What `status` shows, as of now.
    public func currentStatus() -> ServeStatus {
        let statistics = currentStatistics
        let seen = metrics.statusSnapshot
        let handshakes = handshakes.snapshot
        return ServeStatus(
            pid: getpid(), version: JetbridgeVersion.release, wireProtocol: WireProtocol.version, startedAt: startedAt,
            updatedAt: Date(), mode: insecure ? "insecure" : "CURVE",
            endpoints: .init(data: dataEndpoint, acks: acksEndpoint, metrics: metricsEndpoint),
            store: storeLocation.description, receipts: home.resolve(configuration.receipts).path,
            notReady: readiness(), batchesQueued: queue.depth, acksHeld: acksHeld.withLock { $0 },
            lastCommitAt: seen.lastCommitAt, receiptsPending: receiptsPending.withLock { $0 },
            totals: .init(
                storedBatches: statistics.storedBatches, storedRecords: statistics.storedRecords,
                newRecords: statistics.newRecords, duplicateRecords: statistics.duplicateRecords,
                rejectedBatches: statistics.rejectedBatches, retriedBatches: statistics.retriedBatches,
                transactions: statistics.transactions, unroutableAcks: statistics.unroutableAcks),
            devices: seen.devices.values.sorted { $0.device < $1.device }, recentRejections: seen.recentRejections,
            handshakes: handshakes.counts,
            recentRefusedHandshakes: handshakes.recent.map {
                .init(time: $0.time, result: $0.result, publicKey: $0.publicKey, address: $0.address)
            })
    }

    /// The status thread: reads the receipts backlog from the store and rewrites `<home>/status.json` every
    /// ``ServeStatus/writeInterval`` until a stop begins.
    func runStatusWriter() {
        let url = ServeStatus.url(in: home)
        var failedBefore = false
        while !stopRequested {
            // The one store reading `status` and `/metrics` show, taken here on a thread of its own.
            if let pending = try? store.dirtyReceiptCount() { receiptsPending.withLock { $0 = pending } }
            do {
                try AtomicFile.write(try currentStatus().json(), to: url, mode: 0o600)
                failedBefore = false
            } catch {
                if !failedBefore {
                    logger.warning(
                        "cannot write the status file", metadata: ["file": "\(url.path)", "error": "\(error)"])
                }
                failedBefore = true
            }
            let until = ContinuousClock.now + ServeStatus.writeInterval
            while !stopRequested && ContinuousClock.now < until { Thread.sleep(forTimeInterval: 0.05) }
        }
    }

    /// Removes the status file at the end of a stop: no status is better than a stale one.
    func removeStatusFile() {
        try? FileManager.default.removeItem(at: ServeStatus.url(in: home))
    }
}
