import Foundation
internal import GRDB
internal import GRDBSQLite

/// A cached GRDB statement that ``SQLiteStore/apply(_:at:)`` binds and steps through the SQLite C API.
///
/// GRDB's `execute(arguments:)` takes a `StatementArguments`: per record an array of boxed
/// `DatabaseValueConvertible` existentials, converted into `DatabaseValue`s (a `Data` allocated per UUID), then
/// bound. Here each value goes straight from the model's fields into SQLite. Texts and blobs are copied into a buffer
/// per parameter that this statement keeps (``BoundBytes``) and bound there in place (`SQLITE_STATIC`): a copying
/// bind (`SQLITE_TRANSIENT`, as the direct-insert floor binds) frees the previous record's copy and allocates the next
/// one, two calls into malloc per value per record.
///
/// Only for statements run inside a transaction GRDB began on the same connection (no transaction observers are
/// registered on the store, so GRDB has nothing to learn from the steps it does not see).
struct HotStatement {
    private let statement: Statement
    private let handle: SQLiteStatement
    private let connection: SQLiteConnection?
    private let bytes: BoundBytes

    init(_ db: Database, sql: String) throws {
        statement = try db.cachedStatement(sql: sql)
        handle = statement.sqliteStatement
        connection = db.sqliteConnection
        bytes = BoundBytes(handle)
    }

    /// SQLite's "read it in place" destructor: the bytes stay where they are until the parameter is bound again or
    /// the bindings are cleared (``BoundBytes``).
    private static let inPlace = unsafeBitCast(0, to: sqlite3_destructor_type.self)

    // Each bind is checked: a failed bind (out of memory, too big) leaves the previous record's value in place, and
    // stepping would store it under this record.

    // A parameter the statement does not have gets SQLite's own answer, SQLITE_RANGE.

    func bind(_ value: UUID, at index: Int32) throws {
        guard let copy = bytes.buffer(at: index, count: 16) else { return try check(SQLITE_RANGE) }
        withUnsafeBytes(of: value.uuid) { copy.copyMemory(from: $0.baseAddress!, byteCount: 16) }
        try check(sqlite3_bind_blob(handle, index, copy, 16, Self.inPlace))
    }

    func bind(_ value: String, at index: Int32) throws {
        var value = value
        let copy = value.withUTF8 { utf8 in
            let copy = bytes.buffer(at: index, count: utf8.count)
            if let copy, let start = utf8.baseAddress { copy.copyMemory(from: start, byteCount: utf8.count) }
            return copy.map { ($0, Int32(utf8.count)) }
        }
        guard let (start, count) = copy else { return try check(SQLITE_RANGE) }
        try check(sqlite3_bind_text(handle, index, start.assumingMemoryBound(to: CChar.self), count, Self.inPlace))
    }

    func bind(_ value: Data, at index: Int32) throws {
        guard let copy = bytes.buffer(at: index, count: value.count) else { return try check(SQLITE_RANGE) }
        value.withUnsafeBytes { if let start = $0.baseAddress { copy.copyMemory(from: start, byteCount: $0.count) } }
        try check(sqlite3_bind_blob(handle, index, copy, Int32(value.count), Self.inPlace))
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

/// The bytes a ``HotStatement`` binds in place: one buffer per parameter, reused from record to record and grown when
/// a value is larger. Never empty, so a buffer always has an address (SQLite binds a NULL address as NULL, not as an
/// empty text or blob). When the last copy of the statement goes, the bindings are cleared before the buffers are
/// freed: the cached statement never keeps a pointer to memory that is gone.
final class BoundBytes {
    private typealias Buffer = (start: UnsafeMutableRawPointer, capacity: Int)
    private let handle: SQLiteStatement
    /// One buffer per parameter, allocated up front: on the hot path a lookup is a pointer offset and a compare.
    private let buffers: UnsafeMutablePointer<Buffer>
    private let count: Int

    init(_ handle: SQLiteStatement) {
        self.handle = handle
        count = Int(sqlite3_bind_parameter_count(handle))
        buffers = .allocate(capacity: count)
        for slot in 0..<count {
            (buffers + slot).initialize(to: (UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 16), 64))
        }
    }

    /// The buffer of parameter `index` (from 1), with room for at least `byteCount` bytes, or `nil` when the
    /// statement has no such parameter. Its previous bytes may still be bound to the statement: call this only to bind
    /// the parameter again.
    func buffer(at index: Int32, count byteCount: Int) -> UnsafeMutableRawPointer? {
        guard index >= 1, Int(index) <= count else { return nil }
        let buffer = buffers + (Int(index) - 1)
        if buffer.pointee.capacity < byteCount {
            let capacity = max(byteCount, 2 * buffer.pointee.capacity)
            buffer.pointee.start.deallocate()
            buffer.pointee = (UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16), capacity)
        }
        return buffer.pointee.start
    }

    deinit {
        sqlite3_clear_bindings(handle)
        for slot in 0..<count { buffers[slot].start.deallocate() }
        buffers.deinitialize(count: count)
        buffers.deallocate()
    }
}
