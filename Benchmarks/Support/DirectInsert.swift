public import Foundation
internal import GRDBSQLite
public import JetbridgeModel

/// The floor a store is measured against: rows written with the sqlite3 C API into the store's tables and indexes
/// (kept in step with SQLiteStore's migrations by hand: docs/STORE.md, "Schema"), with the store's pragmas, and none
/// of its statistics, counters or receipt marks. Like the store, it keeps the bytes of
/// orders only (a scan is all columns). Any SQLite failure stops the benchmark, naming the call.
///
/// Not `Sendable`: one connection, used from one thread.
public final class DirectInsert {
    private var db: OpaquePointer?
    private var insertOrder: OpaquePointer?
    private var insertScan: OpaquePointer?
    private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Creates the database and its tables.
    /// - Parameters:
    ///   - path: A new database file.
    ///   - upsertingOrders: Whether a later revision of an order replaces the earlier one, as the store's upsert does
    ///     (needed where the records hold corrections; otherwise a plain INSERT).
    public init(path: String, upsertingOrders: Bool) {
        check(sqlite3_open(path, &db), "open")
        exec(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 100000"
        )
        exec(
            """
            CREATE TABLE orders (id BLOB NOT NULL, revision INTEGER NOT NULL, flight TEXT NOT NULL, seat TEXT NOT NULL,
                device TEXT NOT NULL, record BLOB NOT NULL);
            CREATE UNIQUE INDEX orders_id ON orders(id);
            CREATE INDEX orders_flight ON orders(flight);
            CREATE TABLE scans (id BLOB NOT NULL, flight TEXT NOT NULL, tag BLOB NOT NULL, point INTEGER NOT NULL,
                scanned_at REAL NOT NULL, owner TEXT NOT NULL, weight REAL NOT NULL, device TEXT NOT NULL);
            CREATE UNIQUE INDEX scans_id ON scans(id);
            CREATE INDEX orders_device_flight ON orders(device, flight);
            CREATE INDEX scans_flight_tag ON scans(flight, tag, point);
            CREATE INDEX scans_flight_device ON scans(flight, device);
            """)
        let orderSQL =
            upsertingOrders
            ? "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET revision = excluded.revision, record = excluded.record WHERE excluded.revision > orders.revision"
            : "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)"
        check(sqlite3_prepare_v2(db, orderSQL, -1, &insertOrder, nil), "prepare")
        check(
            sqlite3_prepare_v2(db, "INSERT INTO scans VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1, &insertScan, nil), "prepare"
        )
    }

    deinit {
        sqlite3_finalize(insertOrder)
        sqlite3_finalize(insertScan)
        sqlite3_close(db)
    }

    /// Opens the one transaction (`BEGIN IMMEDIATE`).
    public func begin() {
        exec("BEGIN IMMEDIATE")
    }

    /// Inserts one record's row.
    /// - Parameters:
    ///   - record: The record.
    ///   - bytes: Its MessagePack bytes, kept for orders.
    public func insert(_ record: Record, bytes: Data) {
        switch record {
        case .order(let order):
            bind(insertOrder, 1, order.id)
            sqlite3_bind_int64(insertOrder, 2, Int64(order.revision))
            bind(insertOrder, 3, order.flight.rawValue)
            bind(insertOrder, 4, order.seat.rawValue)
            bind(insertOrder, 5, order.device)
            bind(insertOrder, 6, bytes)
            step(insertOrder)
        case .scan(let scan):
            bind(insertScan, 1, scan.id)
            bind(insertScan, 2, scan.flight.rawValue)
            bind(insertScan, 3, scan.tag.id)
            sqlite3_bind_int64(insertScan, 4, scan.point == .origin ? 0 : 1)
            sqlite3_bind_double(insertScan, 5, scan.scannedAt.timeIntervalSinceReferenceDate)
            bind(insertScan, 6, scan.tag.owner.initial + scan.tag.owner.family)
            sqlite3_bind_double(insertScan, 7, scan.tag.weight)
            bind(insertScan, 8, scan.device)
            step(insertScan)
        }
    }

    /// Commits the transaction.
    public func commit() {
        exec("COMMIT")
    }

    private func check(_ code: Int32, _ what: String) {
        guard code == SQLITE_OK || code == SQLITE_DONE || code == SQLITE_ROW else {
            fatalError("\(what): \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    private func exec(_ sql: String) {
        check(sqlite3_exec(db, sql, nil, nil, nil), sql)
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ uuid: UUID) {
        var bytes = uuid.uuid
        withUnsafeBytes(of: &bytes) { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, 16, transient) }
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        _ = sqlite3_bind_text(statement, index, text, -1, transient)
    }

    private func bind(_ statement: OpaquePointer?, _ index: Int32, _ data: Data) {
        data.withUnsafeBytes { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), transient) }
    }

    private func step(_ statement: OpaquePointer?) {
        check(sqlite3_step(statement), "step")
        sqlite3_reset(statement)
    }
}

@available(*, unavailable)
extension DirectInsert: Sendable {}
