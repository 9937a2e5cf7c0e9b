import Foundation
import Logging

/// The receipts thread: rewrites the receipts of seats the store marked, off the ack path, after commits; once at
/// start-up (repairing what a crash left behind) and once more at shutdown, where it stops after at most one group
/// of 500 seats: the remaining marks stay in the store for the next start, so a backlog never delays a stop.
///
/// Refreshes are at least `interval` apart, and a refresh that took `t` waits `t ×` ``backoffFactor`` before the
/// next. During a bulk sync nearly every commit marks nearly every seat, and a refresh reads each marked flight's
/// orders again: measured at 1M records, refreshing after every commit cost as much CPU as storing. The marks are in
/// the store, so a later refresh loses nothing.
final class ReceiptWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending = true  // the start-up refresh
    private var stopping = false
    private let store: AggregatorStore
    private let writer: ReceiptWriter
    private let logger: Logger
    private let finished = DispatchSemaphore(value: 0)
    private let interval: TimeInterval

    init(store: AggregatorStore, writer: ReceiptWriter, interval: TimeInterval, logger: Logger) {
        self.store = store
        self.writer = writer
        self.interval = interval
        self.logger = logger
    }

    func start() {
        startThread("jb-receipts") { [self] in
            run()
            finished.signal()
        }
    }

    /// Something was committed: refresh soon. Several signals during one refresh make one more refresh.
    func signal() {
        condition.lock()
        pending = true
        condition.signal()
        condition.unlock()
    }

    private var isStopping: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopping
    }

    /// Finishes what is pending (at most one more group of seats) and ends the thread; blocks until it has.
    func stopAndWait() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
        finished.wait()
    }

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
                    notBefore = Date().addingTimeInterval(max(interval, took * Self.backoffFactor))
                }
                do {
                    var firstGroup = true
                    let written = try writer.refreshDirty(
                        store,
                        while: { [self] in
                            defer { firstGroup = false }
                            return firstGroup || !isStopping
                        })
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
