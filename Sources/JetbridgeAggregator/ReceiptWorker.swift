import Foundation
import Logging

/// The receipts thread: rewrites the receipts of seats the store marked, off the ack path, whenever the store
/// thread signals a commit (at most once a second, less often when refreshes are slow); once at start-up (repairing what a crash left behind) and once more at shutdown.
final class ReceiptWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending = true  // the start-up refresh
    private var stopping = false
    private let store: AggregatorStore
    private let writer: ReceiptWriter
    private let logger: Logger
    private let finished = DispatchSemaphore(value: 0)

    init(store: AggregatorStore, writer: ReceiptWriter, logger: Logger) {
        self.store = store
        self.writer = writer
        self.logger = logger
    }

    func start() {
        let thread = Thread { [self] in
            Thread.current.name = "jb-receipts"
            run()
            finished.signal()
        }
        thread.name = "jetbridge-receipts"
        thread.start()
    }

    /// Something was committed: refresh soon. Several signals during one refresh make one more refresh.
    func signal() {
        condition.lock()
        pending = true
        condition.signal()
        condition.unlock()
    }

    /// Finishes what is pending and ends the thread; blocks until it has.
    func stopAndWait() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        finished.wait()
    }

    /// The least time between two refreshes. A refresh re-reads every order of each marked seat, so during a bulk
    /// sync (a commit every few milliseconds, most seats marked by each) refreshing after every commit cost as much
    /// CPU as storing; the marks are durable, so waiting only coalesces work.
    static let minimumInterval = 1.0
    /// A refresh that took `t` waits at least `t × backoffFactor` before the next: receipts take at most about a
    /// tenth of a core however many orders a seat has (4 still left them a quarter of the aggregator's CPU in perf).
    static let backoffFactor = 9.0

    private func run() {
        var notBefore = Date.distantPast
        while true {
            condition.lock()
            while !pending && !stopping { condition.wait() }
            // Coalesce the commits of the next moments into one refresh; a stop cuts the wait short.
            while !stopping && Date() < notBefore { _ = condition.wait(until: notBefore) }
            let work = pending
            let last = stopping
            pending = false
            condition.unlock()
            if work {
                let started = Date()
                defer {
                    let took = Date().timeIntervalSince(started)
                    notBefore = Date().addingTimeInterval(max(Self.minimumInterval, took * Self.backoffFactor))
                }
                do {
                    let written = try writer.refreshDirty(store)
                    if written > 0 { logger.debug("receipts refreshed", metadata: ["seats": "\(written)"]) }
                } catch {
                    // The marks stay in the store, so the next refresh (or the next start) repairs it.
                    logger.error(
                        "receipts could not be refreshed; they will be retried",
                        metadata: ["error": "\(error)", "directory": "\(writer.directory.path)"])
                }
            }
            if last { return }
        }
    }
}
