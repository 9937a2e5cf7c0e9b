public import Foundation
internal import GRDB
import JetbridgeModel
public import JetbridgeProtocol
public import Logging
import SystemSupport

/// The aggregator's embedded store: one SQLite file (WAL) holding every order at its latest revision, every scan,
/// per-device statistics and the receipts waiting to be rewritten.
///
/// ``apply(_:at:)`` is the hot path: several batches in one transaction, committed with `synchronous=FULL` so that
/// an ack sent after it returns promises durability. Reads (reports, receipts) run on their own connections and
/// see committed snapshots, so they never block the writer. See docs/STORE.md for the schema and the rules.
///
/// Thread-safe: writes are serialised, reads run concurrently.
public final class SQLiteStore: Sendable {
    /// The database file's name under the aggregator's home.
    public static let fileName = "jetbridge.sqlite"

    /// Pages SQLite lets the WAL grow to before it checkpoints on its own (×4 KiB: about 400 MB). Checkpointing after
    /// every commit is what made the measured Python prototype spend 70% of its time in COMMIT; ``checkpoint()``
    /// is meant for idle moments instead.
    static let walAutocheckpointPages = 100_000
    /// The writer's page cache: 64 MiB keeps the id indexes' hot pages in memory at a million rows.
    static let writerCacheKiB = 65_536
    /// Readers only stream; a small cache is enough.
    static let readerCacheKiB = 8_192

    /// The database file.
    public let path: String
    let pool: DatabasePool
    let logger: Logger
    /// The writes in progress (``StoreReader/busySince``).
    let calls = StoreCalls()
    /// The console's decoded sales per flight, kept while the flight's orders are unchanged (``ConsoleSales``).
    let consoleSales = ConsoleSales()
    /// The console's bag counts and scans per device per flight, caught up with new scans (``ConsoleTallies``).
    let consoleTallies = ConsoleTallies()

    /// Opens (creating if needed) the store at `path` and brings its schema up to date.
    ///
    /// Orders are stored with the MessagePack bytes they arrived as (receipts and reports decode them again); scans
    /// as columns only, since every field of a scan is one.
    ///
    /// - Parameters:
    ///   - path: The SQLite file, such as `<home>/jetbridge.sqlite`; its directory must exist.
    ///   - logger: Where the store logs; it never bootstraps logging.
    /// - Throws: `DatabaseError` when the file cannot be opened or migrated.
    public init(path: String, logger: Logger) throws {
        var configuration = Configuration()
        configuration.label = "jetbridge-store"
        configuration.maximumReaderCount = 4
        configuration.prepareDatabase { db in
            // An ack promises durability, so every commit syncs the WAL (NORMAL would survive a process crash but
            // not a power cut).
            try db.execute(sql: "PRAGMA synchronous = FULL")
            if db.configuration.readonly {
                try db.execute(sql: "PRAGMA cache_size = -\(SQLiteStore.readerCacheKiB)")
            } else {
                try db.execute(sql: "PRAGMA cache_size = -\(SQLiteStore.writerCacheKiB)")
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \(SQLiteStore.walAutocheckpointPages)")
            }
        }
        self.path = path
        self.logger = logger
        pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
        logger.debug("store open", metadata: ["path": "\(path)"])
    }

    /// Opens the store in the aggregator's home directory, creating the directory if needed.
    ///
    /// - Parameters:
    ///   - home: The aggregator's home; the file is ``fileName`` inside it.
    ///   - logger: Where the store logs.
    /// - Throws: A file-system error or `DatabaseError`.
    public convenience init(home: URL, logger: Logger) throws {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try self.init(path: home.appendingPathComponent(Self.fileName).path, logger: logger)
    }

    /// Decodes a stored record's bytes (MessagePack, as received) for receipts and reports, with the codec that
    /// accepted them (`RecordCoding`, about ten times cheaper than Codable).
    func decoder(_ bytes: Data) throws -> JetbridgeModel.Record {
        try RecordCoding.decode(bytes)
    }

    /// Stores several batches in ONE transaction and returns what each changed, in the same order.
    ///
    /// Orders are unique by id and the highest revision wins; scans are unique by scan id; anything already there
    /// counts as a duplicate. Per-device statistics and the seats whose receipts must be rewritten are updated in
    /// the same transaction, so a crash after the commit loses no receipt update. When this returns, everything is
    /// durable and the batches may be acked; when it throws, nothing of any batch was stored.
    ///
    /// Two rules need the store, so they are checked here rather than in `IncomingBatch.decode`: an order belongs to
    /// the device that first stored it (a record of that id from another device is refused), and a flight sells in
    /// one currency (an order in another currency than the flight's first stored order is refused), also within
    /// one batch. A batch breaking either is not stored at all: its outcome carries the ``BatchOutcome/rejection``
    /// (index and reason), and the other batches are stored as if it had never arrived.
    ///
    /// - Parameters:
    ///   - batches: Batches that arrived together, checked by `IncomingBatch.decode(frames:authenticatedDevice:)`.
    ///   - now: The sync time recorded for the batches' devices.
    /// - Returns: One outcome per batch.
    /// - Throws: `DatabaseError` (such as a full disk, or a record breaking a table constraint); then nothing was
    ///   stored and the caller answers `retry` or `rejected`.
    public func apply(_ batches: [IncomingBatch], at now: Date = Date()) throws -> [BatchOutcome] {
        guard !batches.isEmpty else { return [] }
        return try calls.measure {
            try pool.writeWithoutTransaction { db in
                try Self.storeRefusingOnePerRound(batches) { refused in
                    var pass: (outcomes: [BatchOutcome], refusal: Refusal?) = ([], nil)
                    try db.inTransaction(.immediate) {
                        pass = try Self.store(batches, skipping: refused, now: now, in: db)
                        return pass.refusal == nil ? .commit : .rollback
                    }
                    return pass
                }
            }
        }
    }

    /// One refusal found while storing: the batch's position in the group, and why.
    typealias Refusal = (batch: Int, rejection: BatchRejection)

    private static func store(
        _ batches: [IncomingBatch], skipping refused: [Int: BatchRejection], now: Date, in db: Database
    ) throws -> (outcomes: [BatchOutcome], refusal: Refusal?) {
        let upsertOrder = try HotStatement(db, sql: upsertOrderSQL)
        let insertScan = try HotStatement(db, sql: insertScanSQL)
        let deviceBatch = try db.cachedStatement(sql: deviceBatchSQL)
        var dirty: Set<SeatKey> = []
        var newCounts = [Int](repeating: 0, count: batches.count)

        func storeOrder(_ order: Order, bytes: Data) throws -> Bool {
            try upsertOrder.bind(order.id, at: 1)
            try upsertOrder.bind(order.revision, at: 2)
            try upsertOrder.bind(order.flight.rawValue, at: 3)
            try upsertOrder.bind(order.seat.rawValue, at: 4)
            try upsertOrder.bind(order.device, at: 5)
            try upsertOrder.bind(bytes, at: 6)
            guard try upsertOrder.run() > 0 else { return false }
            dirty.insert(SeatKey(flight: order.flight.rawValue, seat: order.seat.rawValue))
            return true
        }
        func storeScan(_ scan: Scan) throws -> Bool {
            try insertScan.bind(scan.id, at: 1)
            try insertScan.bind(scan.flight.rawValue, at: 2)
            try insertScan.bind(scan.tag.id, at: 3)
            try insertScan.bind(scan.point == .origin ? 0 : 1, at: 4)
            try insertScan.bind(scan.scannedAt.timeIntervalSinceReferenceDate, at: 5)
            try insertScan.bind(scan.tag.owner.initial + scan.tag.owner.family, at: 6)
            try insertScan.bind(scan.tag.weight, at: 7)
            try insertScan.bind(scan.device, at: 8)
            return try insertScan.run() > 0
        }

        // Each table's rows go in by id, so the random-id UNIQUE index is walked in order: consecutive inserts land
        // on the same or the next leaf page, which is still in the CPU's caches, instead of a random one of
        // thousands. Measured with store-benchmark: 7.1 → 6.3–6.8 µs/record at 20 batches per transaction, 5.5–6.5
        // → 4.5 at 100. Equal ids keep their arrival order, so every batch's outcome is what arrival order gives.
        let total = batches.reduce(0) { $0 + $1.records.count }
        var orders: [PendingRow] = []
        var scans: [PendingRow] = []
        orders.reserveCapacity(total)
        scans.reserveCapacity(total)
        // The earliest batch (in arrival order) found breaking a rule, and its first such record.
        var refusal: Refusal?
        func refuse(_ b: Int, _ i: Int, _ error: ValidationError) {
            refusal = Self.earliest(refusal, b, i, error, in: batches)
        }
        // A flight's currency: what the store says, else the first order of this transaction that names the flight.
        // Checked in arrival order, so a second currency is refused also within one batch.
        var currencies: [String: String] = [:]
        let flightCurrency = try db.cachedStatement(sql: flightCurrencySQL)
        let insertFlight = try db.cachedStatement(sql: insertFlightSQL)
        for (b, batch) in batches.enumerated() where refused[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                switch incoming.record {
                case .order(let order):
                    orders.append(PendingRow(order.id, batch: b, index: i))
                    let flight = order.flight.rawValue
                    let currency: String
                    if let known = currencies[flight] {
                        currency = known
                    } else if let stored = try String.fetchOne(flightCurrency, arguments: [flight]) {
                        currency = stored
                        currencies[flight] = stored
                    } else {
                        try insertFlight.execute(arguments: [flight, order.currency])
                        currency = order.currency
                        currencies[flight] = currency
                    }
                    if order.currency != currency {
                        refuse(b, i, .flightCurrency(flight: flight, stored: currency, incoming: order.currency))
                    }
                case .scan(let scan): scans.append(PendingRow(scan.id, batch: b, index: i))
                }
            }
        }
        orders.sort()
        scans.sort()
        let orderDevice = try db.cachedStatement(sql: orderDeviceSQL)
        for row in orders {
            let incoming = batches[Int(row.batch)].records[Int(row.index)]
            guard case .order(let order) = incoming.record else { continue }
            if try storeOrder(order, bytes: incoming.bytes) {
                newCounts[Int(row.batch)] += 1
            } else if let owner = try String.fetchOne(orderDevice, arguments: [order.id.blob]), owner != order.device {
                // Nothing changed, and not because of the revision: the order is another device's.
                refuse(Int(row.batch), Int(row.index), .foreignOrder(order, owner: owner))
            }
        }
        if let refusal { return ([], refusal) }
        for row in scans {
            guard case .scan(let scan) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
            if try storeScan(scan) { newCounts[Int(row.batch)] += 1 }
        }
        let outcomes = try Self.outcomes(of: batches, new: newCounts, skipping: refused) {
            header, records, new, duplicates in
            try deviceBatch.execute(arguments: [header.device, now.timeIntervalSince1970, records, new, duplicates])
        }
        if !dirty.isEmpty {
            // A bulk transaction touches thousands of seats (3,600 in store-benchmark's 40,000-record groups): bound
            // like the records rather than through a `StatementArguments` array each.
            let markDirty = try HotStatement(db, sql: markDirtySQL)
            for key in dirty {
                try markDirty.bind(key.flight, at: 1)
                try markDirty.bind(key.seat, at: 2)
                _ = try markDirty.run()
            }
        }
        return (outcomes, nil)
    }

    /// Counts one rejected batch against its device, with the reason shown in the devices report.
    ///
    /// - Parameters:
    ///   - device: The device named in the batch header.
    ///   - reason: Why the batch was rejected, for people.
    ///   - now: When.
    /// - Throws: `DatabaseError`.
    public func recordRejection(device: String, reason: String, at now: Date = Date()) throws {
        // Stored inert (``InertText``): the reason may quote the device's own text, and it is shown on terminals.
        let shown = InertText.escape(String(reason.prefix(500)))
        try calls.measure {
            try pool.write { db in
                try db.execute(sql: Self.deviceRejectSQL, arguments: [device, now.timeIntervalSince1970, shown])
            }
        }
    }

    /// When a batch was last stored (the latest `last sync` of any device), or `nil` before the first.
    ///
    /// - Throws: `DatabaseError`.
    public func lastCommit() throws -> Date? {
        try pool.read { db in
            try Double.fetchOne(db, sql: "SELECT max(last_sync) FROM devices").map(Date.init(timeIntervalSince1970:))
        }
    }

    /// Counts one batch answered `limited` against its device (docs/AGGREGATOR.md, Limits).
    ///
    /// - Throws: `DatabaseError`.
    public func recordLimited(device: String, reason: String, at now: Date = Date()) throws {
        try calls.measure {
            try pool.write { db in
                try db.execute(
                    sql: Self.deviceLimitedSQL,
                    arguments: [device, now.timeIntervalSince1970, String(reason.prefix(500))])
            }
        }
    }

    /// How many records (orders and scans) `device` has stored on `flight`.
    ///
    /// - Throws: `DatabaseError`.
    public func recordCount(device: String, flight: String) throws -> Int {
        try pool.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT (SELECT COUNT(*) FROM orders WHERE flight = ?1 AND device = ?2)
                         + (SELECT COUNT(*) FROM scans WHERE flight = ?1 AND device = ?2)
                    """, arguments: [flight, device]) ?? 0
        }
    }

    /// How many of `records` the store does not have yet, by id (an order stored at any revision counts as stored).
    ///
    /// - Throws: `DatabaseError`.
    func unstoredCount(_ records: [JetbridgeModel.Record]) throws -> Int {
        try pool.read { db in
            var count = 0
            for record in records {
                let table = if case .order = record { "orders" } else { "scans" }
                let id = withUnsafeBytes(of: record.id.uuid) { Data($0) }
                if try Int.fetchOne(db, sql: "SELECT 1 FROM \(table) WHERE id = ?", arguments: [id]) == nil {
                    count += 1
                }
            }
            return count
        }
    }

    /// Copies the WAL into the database without waiting for readers (SQLite's PASSIVE checkpoint); call it when
    /// no batches are waiting, so the WAL stays short without costing a commit on the hot path.
    ///
    /// - Throws: `DatabaseError`.
    public func checkpoint() throws {
        _ = try calls.measure { try pool.writeWithoutTransaction { db in try db.checkpoint(.passive) } }
    }

    /// Closes the database; later calls fail. Closing is optional: every acknowledged batch is already durable.
    ///
    /// - Throws: `DatabaseError` when a connection is still in use.
    public func close() throws {
        try pool.close()
    }
}

extension ValidationError {
    /// An order in another currency than its flight's.
    static func flightCurrency(flight: String, stored: String, incoming: String) -> ValidationError {
        ValidationError(
            .currencyMismatch,
            "flight \(flight) sells in \(stored) (its first stored order's currency); this order is in \(incoming), "
                + "and a flight has one currency",
            path: "currency")
    }

    /// A record of an order id that another device created.
    static func foreignOrder(_ order: Order, owner: String) -> ValidationError {
        ValidationError(
            .foreignOrder,
            "order \(order.id.uuidString) belongs to device '\(owner)', which created it; a device may only revise "
                + "its own orders",
            path: "id")
    }
}

extension UUID {
    /// The 16 bytes, as the tables store ids.
    var blob: Data { withUnsafeBytes(of: uuid) { Data($0) } }
}

/// A (flight, seat) pair by canonical text, as the tables store it.
struct SeatKey: Hashable, Sendable {
    var flight: String
    var seat: String
}

/// One record of a transaction, placed by its id (first as SQLite compares 16-byte blobs, byte by byte) and then by
/// arrival (batch, then position), so that rows are inserted in index order and equal ids keep their arrival order.
struct PendingRow: Comparable {
    var high: UInt64
    var low: UInt64
    var batch: Int32
    var index: Int32

    init(_ id: UUID, batch: Int, index: Int) {
        (high, low) = withUnsafeBytes(of: id.uuid) {
            (
                $0.loadUnaligned(as: UInt64.self).bigEndian,
                $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self).bigEndian
            )
        }
        self.batch = Int32(batch)
        self.index = Int32(index)
    }

    static func < (a: PendingRow, b: PendingRow) -> Bool {
        (a.high, a.low, a.batch, a.index) < (b.high, b.low, b.batch, b.index)
    }
}
