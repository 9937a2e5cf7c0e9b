import Foundation
import JetbridgeStore
import Logging
import SystemSupport

/// The receipts thread: rewrites the receipts of seats the store marked, off the ack path, after commits; once at
/// start-up (repairing what a crash left behind, after removing the temporary files a killed writer left:
/// ``ReceiptWriter/removeLeftovers(now:)``) and once more at shutdown, where it stops after at most one group
/// of 500 seats: the remaining marks stay in the store for the next start, so a backlog never delays a stop.
///
/// While batches keep coming (the store thread has not gone idle since the last commit), refreshes wait: a refresh
/// reads and decodes every order of every marked seat, and during a bulk sync nearly every commit marks nearly every
/// seat, so refreshing along the way re-reads the growing store again and again for receipts that are stale again at
/// the next commit. The refresh runs once the store thread reports it is idle (no batch for its idle interval, about
/// a second), or ``RefreshSchedule/maximumDeferral`` after the first commit it waits for, whichever comes first.
/// Refreshes are also at least `interval` apart, and while batches keep coming a refresh that took `t` waits
/// `t ×` ``RefreshSchedule/backoffFactor`` before the next, so receipts take at most about a tenth of a core from a
/// sync however many orders a seat has. Once the store is idle nothing competes for the CPU and the next refresh waits
/// `interval` only: a refresh that ran during a long sync otherwise held the whole backlog back for nine times its own
/// length after the sync had ended (300 devices: receipts caught up 201 s after it, issue 29). The marks are in the
/// store, so a later refresh loses nothing.
final class ReceiptWorker: @unchecked Sendable {
    private let condition = NSCondition()
    private var pending = true  // the start-up refresh
    private var stopping = false
    /// Whether the store thread found no batch waiting since the last commit.
    private var storeIdle = true
    /// The first commit not refreshed yet while batches kept coming.
    private var deferredSince: Date?
    /// When to refresh again without a commit: a claim another aggregator holds on a marked seat ends then
    /// (PostgreSQL). Before, seats claimed by an aggregator killed after the last sync stayed stale until the next
    /// commit, which may never come.
    private var claimsEndAt: Date?
    private let store: any StoreWriter
    private let writer: ReceiptWriter
    private let logger: Logger
    private let interval: TimeInterval
    /// Told how long each refresh took (`jetbridge_receipts_refresh_seconds`).
    private let refreshed: (@Sendable (Duration) -> Void)?

    init(
        store: any StoreWriter, writer: ReceiptWriter, interval: TimeInterval, logger: Logger,
        refreshed: (@Sendable (Duration) -> Void)? = nil
    ) {
        self.refreshed = refreshed
        self.store = store
        self.writer = writer
        self.interval = interval
        self.logger = logger
    }

    /// Something was committed: refresh once the store thread goes idle (or ``RefreshSchedule/maximumDeferral`` from
    /// now at the latest). Several signals before a refresh make one refresh.
    func signal() {
        condition.lock()
        pending = true
        storeIdle = false
        if deferredSince == nil { deferredSince = Date() }
        condition.signal()
        condition.unlock()
    }

    /// The store thread found no batch waiting: what was committed can be refreshed now.
    func storeWentIdle() {
        condition.lock()
        if !storeIdle {
            storeIdle = true
            condition.signal()
        }
        condition.unlock()
    }

    private var isStopping: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopping
    }

    /// Finishes what is pending (at most one more group of seats), then ``run()`` returns. Never blocks.
    func requestStop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    /// The receipts thread's loop (``ReceiptsService`` runs it on its own thread); returns after ``requestStop()``.
    func run() {
        do { try writer.removeLeftovers() } catch {
            logger.warning(
                "could not remove leftover temporary receipt files",
                metadata: ["directory": "\(writer.directory.path)", "error": "\(error)"])
        }
        var schedule = RefreshSchedule(interval: interval)
        // A full disk fails every refresh: logged once, then a count every 30 s.
        var failures = RepeatedFailure()
        // Logged once per wait for the receipts lock (a rebuild), not at every retry.
        var waitingForLock = false
        while true {
            condition.lock()
            while !stopping {
                if !pending, let claimsEndAt {
                    if Date() >= claimsEndAt {
                        pending = true
                        self.claimsEndAt = nil
                    } else {
                        _ = condition.wait(until: claimsEndAt)
                        continue
                    }
                }
                guard pending else {
                    condition.wait()
                    continue
                }
                let due = schedule.due(storeIdle: storeIdle, deferredSince: deferredSince)
                if Date() >= due { break }
                _ = condition.wait(until: due)
            }
            let work = pending
            let last = stopping
            pending = false
            deferredSince = nil
            condition.unlock()
            if work {
                let started = Date()
                var failed = false
                defer {
                    let took = Date().timeIntervalSince(started)
                    refreshed?(.nanoseconds(Int64(took * 1e9)))
                    schedule.refreshed(at: Date(), took: took, failed: failed)
                }
                do {
                    var firstGroup = true
                    let written = try writer.refreshDirty(
                        store,
                        while: { [self] in
                            defer { firstGroup = false }
                            return firstGroup || !isStopping
                        })
                    if written > 0 { logger.debug("receipts refreshed", metadata: ["seats": .stringConvertible(written)]) }
                    waitingForLock = false
                    if !last {
                        // A little past the claim's end, so the refresh finds it ended. A failure to ask is no
                        // failure of the refresh: the next commit starts one anyway.
                        let seconds = try? store.receiptClaimsHeldElsewhere()
                        condition.lock()
                        claimsEndAt = (seconds ?? nil).map { Date().addingTimeInterval($0 + 0.5) }
                        condition.unlock()
                    }
                    if let failed = failures.succeeded() {
                        logger.notice("receipts refreshed again", metadata: ["failedRefreshes": .stringConvertible(failed)])
                    }
                } catch let busy as ReceiptWriter.Busy {
                    // A `receipts rebuild` runs: the marks stay, and the next refresh writes what it read too early.
                    failed = true
                    condition.lock()
                    pending = true
                    condition.unlock()
                    if !waitingForLock {
                        logger.notice("receipts wait: \(busy)")
                    }
                    waitingForLock = true
                } catch {
                    // The marks stay in the store; retried after the interval without waiting for another commit.
                    failed = true
                    condition.lock()
                    pending = true
                    condition.unlock()
                    let failure = describeStoreFailure(error, path: writer.directory.path)
                    switch failures.failed(failure, kind: failureKind(error)) {
                    case .log:
                        logger.error(
                            "receipts could not be refreshed; they will be retried",
                            metadata: ["error": "\(failure)", "directory": "\(writer.directory.path)"])
                    case .summary(let count):
                        logger.error(
                            "receipts still cannot be refreshed; retrying",
                            metadata: ["error": "\(failure)", "refreshesSinceLastLine": .stringConvertible(count)])
                    case .quiet: break
                    }
                }
            }
            if last { return }
        }
    }
}

/// When the receipts thread may refresh next (``ReceiptWorker``'s rule as a value, tested without threads): at least
/// `interval` after the last refresh; while batches keep coming, also ``backoffFactor`` times its length after it and
/// no sooner than the store goes idle or ``maximumDeferral`` after the first commit waiting, whichever is first; once
/// the store is idle, `interval` after it, unless it failed.
struct RefreshSchedule: Hashable, Sendable {
    /// A refresh that took `t` waits at least `t × backoffFactor` before the next while batches keep coming: receipts
    /// take at most about a tenth of a core from a sync however many orders a seat has (4 still left them a quarter of
    /// the aggregator's CPU in perf).
    static let backoffFactor = 9.0

    /// How long receipts may lag behind commits while batches keep coming, at most (plus the refresh's own time).
    static let maximumDeferral: TimeInterval = 30

    let interval: TimeInterval
    /// The earliest next refresh while batches keep coming.
    private(set) var busyNotBefore = Date.distantPast
    /// The earliest next refresh once the store is idle.
    private(set) var idleNotBefore = Date.distantPast

    init(interval: TimeInterval) { self.interval = interval }

    /// A refresh ended at `end` after `took` seconds. One that failed (a full disk fails each one, after rendering
    /// every receipt) waits `took × backoffFactor` also when the store is idle.
    mutating func refreshed(at end: Date, took: TimeInterval, failed: Bool) {
        busyNotBefore = end.addingTimeInterval(max(interval, took * Self.backoffFactor))
        idleNotBefore = failed ? busyNotBefore : end.addingTimeInterval(interval)
    }

    /// When a refresh that is pending may start.
    /// - Parameters:
    ///   - storeIdle: Whether the store thread found no batch waiting since the last commit.
    ///   - deferredSince: The first commit not refreshed yet while batches kept coming.
    func due(storeIdle: Bool, deferredSince: Date?) -> Date {
        guard !storeIdle else { return idleNotBefore }
        guard let deferredSince else { return busyNotBefore }
        return max(busyNotBefore, deferredSince + Self.maximumDeferral)
    }
}
