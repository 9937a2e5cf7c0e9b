import Foundation
import GRDB
import PostgresNIO
import SystemSupport

/// Whether waiting may help with a failure: the aggregator's one rule for a full disk and a busy store, used by every
/// command's exit code (75, "try again later") and by `serve`'s log, which counts a full disk as one failure whatever
/// file it hit (``failureKind(_:)``).
public enum FailureClass: Hashable, Sendable {
    /// The disk or the user's quota is full: SQLite's `SQLITE_FULL`; `ENOSPC` or `EDQUOT` from a file call
    /// (SystemSupport's rule, ``SystemError/isNoSpace``), also as Foundation's `fileWriteOutOfSpace`; PostgreSQL's
    /// `disk_full` (SQLSTATE 53100).
    case noSpace
    /// The SQLite store is busy or locked by another connection (`SQLITE_BUSY`, `SQLITE_LOCKED`), or PostgreSQL gave
    /// up a wait for a lock or a statement (SQLSTATE 55P03, 57014).
    case busy
    /// Anything else: waiting is not known to help.
    case other

    public init(_ error: any Error) {
        switch error {
        case let error as DatabaseError:
            switch error.resultCode {
            case .SQLITE_FULL: self = .noSpace
            case .SQLITE_BUSY, .SQLITE_LOCKED: self = .busy
            default: self = .other
            }
        case let error as SystemError: self = error.isNoSpace ? .noSpace : .other
        case let error as StoreError: self = error.errno.map(SystemError.isNoSpace) == true ? .noSpace : .other
        case let error as PostgresStoreError:
            self = error.sqlState == "53100" ? .noSpace : error.isTimeout ? .busy : .other
        // FileManager reports both ENOSPC and EDQUOT as fileWriteOutOfSpace.
        case let error as CocoaError: self = error.code == .fileWriteOutOfSpace ? .noSpace : .other
        default: self = .other
        }
    }
}
