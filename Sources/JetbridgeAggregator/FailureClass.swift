import Foundation
import GRDB
import SystemSupport

/// Whether waiting may help with a failure: the aggregator's one rule for a full disk and a busy store, used by every
/// command's exit code (75, "try again later") and by `serve`'s log, which counts a full disk as one failure whatever
/// file it hit (``failureKind(_:)``).
enum FailureClass: Hashable, Sendable {
    /// The disk or the user's quota is full: SQLite's `SQLITE_FULL`; `ENOSPC` or `EDQUOT` from a file call
    /// (SystemSupport's rule, ``SystemError/isNoSpace``), also as Foundation's `fileWriteOutOfSpace`; PostgreSQL's
    /// `disk_full` (SQLSTATE 53100).
    case noSpace
    /// The SQLite store is busy or locked by another connection (`SQLITE_BUSY`, `SQLITE_LOCKED`).
    case busy
    /// Anything else: waiting is not known to help.
    case other

    init(_ error: any Error) {
        switch error {
        case let error as DatabaseError:
            switch error.resultCode {
            case .SQLITE_FULL: self = .noSpace
            case .SQLITE_BUSY, .SQLITE_LOCKED: self = .busy
            default: self = .other
            }
        case let error as SystemError: self = error.isNoSpace ? .noSpace : .other
        case let error as StoreError: self = error.errno.map(SystemError.isNoSpace) == true ? .noSpace : .other
        case let error as PostgresStoreError: self = error.sqlState == "53100" ? .noSpace : .other
        // FileManager reports both ENOSPC and EDQUOT as fileWriteOutOfSpace.
        case let error as CocoaError: self = error.code == .fileWriteOutOfSpace ? .noSpace : .other
        default: self = .other
        }
    }
}

extension AggregatorError {
    /// The operator's error for a full disk or a busy store (``FailureClass``): `.tryAgain` (exit 75), saying what
    /// to do; nil for any other failure, which the caller maps by what it was doing.
    /// - Parameters:
    ///   - error: What failed.
    ///   - context: What was attempted, such as `cannot write /ground/devices.json`.
    init?(temporary error: any Error, context: String) {
        switch FailureClass(error) {
        case .noSpace:
            self.init(.tryAgain, "\(context): no space left on device; free some space and try again: \(error)")
        case .busy: self.init(.tryAgain, "\(context): the store is busy; try again: \(error)")
        case .other: return nil
        }
    }
}
