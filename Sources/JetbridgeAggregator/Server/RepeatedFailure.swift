import Foundation
import JetbridgeStore

/// Keeps a failure that repeats (a full disk fails every checkpoint, every retried batch, every receipts refresh)
/// from filling the log: the first occurrence is logged, the same failure again only as a count at most every
/// ``summaryInterval``, and the first success after failures once.
struct RepeatedFailure {
    enum Decision: Equatable {
        /// Log it: a new failure (or a different one).
        case log
        /// Log a summary: the same failure happened `count` times since the last line about it.
        case summary(count: Int)
        /// Say nothing.
        case quiet
    }

    static let summaryInterval: Duration = .seconds(30)

    private var failure: String?
    private var lastLogged = ContinuousClock.now
    private var unlogged = 0
    private var total = 0

    /// - Parameters:
    ///   - description: The failure as logged.
    ///   - kind: What makes two failures the same one (default: the description). A full disk names a different
    ///     temporary file at each attempt, so its kind is just "no space" (``failureKind(_:)``).
    mutating func failed(
        _ description: String, kind: String? = nil, now: ContinuousClock.Instant = .now
    ) -> Decision {
        total += 1
        let kind = kind ?? description
        if failure != kind {
            failure = kind
            lastLogged = now
            unlogged = 0
            return .log
        }
        unlogged += 1
        guard now - lastLogged >= Self.summaryInterval else { return .quiet }
        lastLogged = now
        defer { unlogged = 0 }
        return .summary(count: unlogged)
    }

    /// - Returns: how many failures came before this success, or nil when the last attempt did not fail.
    mutating func succeeded() -> Int? {
        guard failure != nil else { return nil }
        defer {
            failure = nil
            total = 0
            unlogged = 0
        }
        return total
    }
}

/// What makes two store failures the same one for ``RepeatedFailure``: a full disk (``FailureClass``) is one,
/// whatever file it hit.
func failureKind(_ error: any Error) -> String {
    // A PostgreSQL outage is one failure whatever each attempt saw (refused, reset, shutting down, backing off).
    if let error = error as? PostgresStoreError, error.unreachable { return "store unreachable" }
    return FailureClass(error) == .noSpace ? "no space left on device" : "\(error)"
}

/// `error` for people: a full disk (``FailureClass``) says so and names the file it could not write.
func describeStoreFailure(_ error: any Error, path: String) -> String {
    guard FailureClass(error) == .noSpace else { return "\(error)" }
    return "no space left on device for \(path) (\(error))"
}

/// When each subject (a key, a device) was last warned about, so that one that repeats itself does not flood the log:
/// at most one line per subject and interval. Bounded: past 10,000 subjects it starts again empty.
struct WarningGate {
    private var last: [String: ContinuousClock.Instant] = [:]

    /// Whether to warn about `subject` now; if so, the interval starts again.
    mutating func shouldWarn(about subject: String, interval: Duration, now: ContinuousClock.Instant = .now) -> Bool {
        if let at = last[subject], now - at < interval { return false }
        if last.count >= 10_000 { last = [:] }
        last[subject] = now
        return true
    }
}
