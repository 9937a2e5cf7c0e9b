import Foundation
internal import GRDB
internal import GRDBSQLite

/// A cached GRDB statement that ``SQLiteStore/apply(_:at:)`` binds and steps through the SQLite C API.
///
/// GRDB's `execute(arguments:)` takes a `StatementArguments`: per record an array of boxed
/// `DatabaseValueConvertible` existentials, converted into `DatabaseValue`s (a `Data` allocated per UUID), then
/// bound. Here each value goes straight from the model's fields into SQLite, which copies it (`SQLITE_TRANSIENT`, into
/// a buffer the statement keeps across resets), as the direct-insert floor in the benchmarks does.
///
/// Only for statements run inside a transaction GRDB began on the same connection (no transaction observers are
/// registered on the store, so GRDB has nothing to learn from the steps it does not see).
struct HotStatement {
    private let statement: Statement
    private let handle: SQLiteStatement
    private let connection: SQLiteConnection?

    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
        handle = statement.sqliteStatement
        connection = db.sqliteConnection
    }

    /// SQLite's "copy it now" destructor.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    // Each bind is checked: a failed bind (out of memory, too big) leaves the previous record's value in place, and
    // stepping would store it under this record.

    func bind(_ value: UUID, at index: Int32) throws {
        try check(
            withUnsafeBytes(of: value.uuid) { sqlite3_bind_blob(handle, index, $0.baseAddress, 16, Self.transient) })
    }

    func bind(_ value: String, at index: Int32) throws {
        var value = value
        try check(value.withUTF8 { sqlite3_bind_text(handle, index, $0.baseAddress, Int32($0.count), Self.transient) })
    }

    func bind(_ value: Data, at index: Int32) throws {
        // An empty buffer may have no base address, which SQLite would bind as NULL rather than an empty blob.
        guard !value.isEmpty else { return try check(sqlite3_bind_zeroblob(handle, index, 0)) }
        try check(
            value.withUnsafeBytes { sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), Self.transient) })
    }

    func bind(_ value: Int, at index: Int32) throws {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    func bind(_ value: Double, at index: Int32) throws {
        try check(sqlite3_bind_double(handle, index, value))
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errstr(code)),
                sql: statement.sql)
        }
    }

    /// What an `INSERT … ON CONFLICT DO UPDATE` did.
    enum Change {
        /// A new row.
        case inserted
        /// The conflicting row was updated.
        case updated
        /// Nothing (the `DO UPDATE`'s `WHERE` was false).
        case none
    }

    /// Runs an upsert into a rowid table with the values bound since the last run, and tells an insert from an
    /// update: SQLite sets the connection's last inserted rowid on an insert only (never on the `DO UPDATE` path),
    /// and a rowid it chooses is at least 1, so the rowid is cleared to 0 first.
    /// - Throws: As ``run()``.
    func upsert() throws -> Change {
        sqlite3_set_last_insert_rowid(connection, 0)
        guard try run() > 0 else { return .none }
        return sqlite3_last_insert_rowid(connection) != 0 ? .inserted : .updated
    }

    /// Runs a query whose first column is a 16-byte id and whose second, when `integers` is true, an integer; calls
    /// `body` with each row's id and integer (0 without one). For reads of many rows: no `Row`, no `Data` per row.
    /// - Throws: `DatabaseError`, and a `StoreError` (`corruptRow`) for an id that is not 16 bytes.
    func forEachID(path: String, integers: Bool, _ body: (UUID, Int) -> Void) throws {
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { return }
            guard code == SQLITE_ROW else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)),
                    sql: statement.sql)
            }
            guard sqlite3_column_bytes(handle, 0) == 16, let blob = sqlite3_column_blob(handle, 0) else {
                throw StoreError(.corruptRow, "a stored id is not 16 bytes (\(statement.sql))", path: path)
            }
            let id = UUID(uuid: UnsafeRawPointer(blob).loadUnaligned(as: uuid_t.self))
            body(id, integers ? Int(sqlite3_column_int64(handle, 1)) : 0)
        }
    }

    /// Runs the statement with the values bound since the last run.
    ///
    /// - Returns: The rows it inserted or updated (0: the record was a duplicate).
    /// - Throws: `DatabaseError` with SQLite's code and message, such as a CHECK constraint failing.
    func run() throws -> Int {
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else {
            let message = String(cString: sqlite3_errmsg(connection))
            sqlite3_reset(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
        sqlite3_reset(handle)
        return Int(sqlite3_changes(connection))
    }
}
