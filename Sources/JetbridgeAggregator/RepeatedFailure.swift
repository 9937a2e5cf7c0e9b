import Foundation
import GRDB

#if canImport(Glibc)
    import Glibc
#endif

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

    mutating func failed(_ description: String, now: ContinuousClock.Instant = .now) -> Decision {
        total += 1
        if failure != description {
            failure = description
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

/// Whether `error` is a full disk: SQLite's `SQLITE_FULL` or an `ENOSPC` from a file call.
func isNoSpace(_ error: any Error) -> Bool {
    if let error = error as? DatabaseError, error.resultCode == .SQLITE_FULL { return true }
    if let error = error as? StoreError, error.errno == ENOSPC { return true }
    let text = "\(error)"
    return text.contains("No space left on device") || text.contains("database or disk is full")
}

/// `error` for people: a full disk says so and names the file it could not write.
func describeStoreFailure(_ error: any Error, path: String) -> String {
    guard isNoSpace(error) else { return "\(error)" }
    return "no space left on device for \(path) (\(error))"
}
