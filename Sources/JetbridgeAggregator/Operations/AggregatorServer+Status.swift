import Foundation
import JetbridgeProtocol
import Logging
import JetbridgeStore
import SystemSupport

extension AggregatorServer {
    /// What `status` shows, as of now.
    public func currentStatus() -> ServeStatus {
        let statistics = ledger.statistics
        let seen = ledger.devices
        let handshakes = handshakes.snapshot
        return ServeStatus(
            pid: getpid(), version: JetbridgeVersion.release, wireProtocol: WireProtocol.version, startedAt: startedAt,
            updatedAt: Date(), mode: insecure ? "insecure" : "CURVE",
            endpoints: .init(data: dataEndpoint, acks: acksEndpoint, metrics: metricsEndpoint),
            store: storeLocation.description, receipts: home.resolve(configuration.receipts).path,
            notReady: readiness(), batchesQueued: queue.depth, acksHeld: statistics.acksHeld,
            lastCommitAt: seen.lastCommitAt, receiptsPending: receiptsPending.withLock { $0 }, totals: statistics,
            devices: seen.devices.values.sorted { $0.device < $1.device }, recentRejections: seen.recentRejections,
            handshakes: handshakes.counts,
            recentRefusedHandshakes: handshakes.recent.map {
                .init(time: $0.time, result: $0.result, publicKey: $0.publicKey, address: $0.address)
            }, fleet: fleet.withLock { $0 })
    }

    /// The status thread's loop (``StatusService``): reads the receipts backlog from the store and rewrites
    /// `<home>/status.json` every ``ServeStatus/writeInterval`` until `stopped()`; then removes the file (no status is
    /// better than a stale one).
    func writeStatus(until stopped: () -> Bool) {
        let url = ServeStatus.url(in: home)
        var failedBefore = false
        while !stopped() {
            checkWritable()
            // The one store reading `status` and `/metrics` show, taken here on a thread of its own.
            if let pending = try? store.dirtyReceiptCount() { receiptsPending.withLock { $0 = pending } }
            let now = Date()
            if let counts = try? store.fleetCounts(since: now - FleetFlightCounts.window, now: now) {
                fleet.withLock { $0 = counts }
            }
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
            while !stopped() && ContinuousClock.now < until { Thread.sleep(forTimeInterval: 0.05) }
        }
        try? FileManager.default.removeItem(at: url)
    }
}
