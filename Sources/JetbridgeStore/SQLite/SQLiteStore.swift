internal import CSQLiteSettings
public import Foundation
internal import GRDB
internal import GRDBSQLite
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
    /// Whether this process turned SQLite's memory statistics off, once, before its first connection (docs/STORE.md,
    /// "Measured"): counting every allocation took a process-wide mutex around each malloc and free, about 5 % of the
    /// store thread's CPU in sync-benchmark, for figures nothing reads. `false` when something opened a SQLite
    /// connection first (SQLite refuses then, and keeps counting).
    static let memoryStatisticsOff = jb_sqlite_disable_memory_statistics() == SQLITE_OK

    /// The database file.
    public let path: String
    let pool: DatabasePool
    let logger: Logger
    /// The writes in progress (``StoreReader/busySince``).
    let calls = StoreCalls()
    /// Pairs whose rows a summary read since their kept digest changed (``deliverySummary(device:flight:expected:)``).
    let rowReads = RowReadDigests()
    /// The console's kept totals (``ConsoleKept``): its decoded sales per flight while the flight's orders are
    /// unchanged, its bag counts and scans per device per flight.
    private let kept = Locked(ConsoleKept())
    var consoleSales: ConsoleSales { kept.withLock { $0.sales } }
    var consoleTallies: ConsoleTallies { kept.withLock { $0.tallies } }

    public func keepConsoleTotals(in kept: ConsoleKept) { self.kept.withLock { $0 = kept } }

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
        if !Self.memoryStatisticsOff {
            logger.debug("SQLite was in use before the store opened: its memory statistics stay on")
        }
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
    /// counts as a duplicate. Per-device statistics, the per-device flight counters (`device_flights`) and the seats
    /// whose receipts must be rewritten are updated in the same transaction, so a crash after the commit loses no
    /// receipt update. When this returns, everything is durable and the batches may be acked; when it throws, nothing
    /// of any batch was stored.
    ///
    /// Two rules need the store, so they are checked here rather than in `IncomingBatch.decode`: an order belongs to
    /// the device that first stored it (a record of that id from another device is refused), and a flight sells in
    /// one currency (an order in another currency than the flight's first stored order is refused), also within
    /// one batch. A batch breaking either is not stored at all: its outcome carries the ``BatchOutcome/rejection``
    /// (index and reason), and the other batches are stored as if it had never arrived.
    ///
    /// `limits` are checked here too, against the counters, in arrival order and counting what the batches before
    /// in the group add: a batch whose new records (new ids: a resend or a higher revision adds none) would take its
    /// device past ``DeviceFlightLimits/recordsPerFlight`` on a flight, or whose new flights would take it past
    /// ``DeviceFlightLimits/flightsPerDay`` flights first stored in the last 24 hours, is not stored at all: its
    /// outcome carries the ``BatchOutcome/limit`` (reason and `retryAfter`), it is counted against its device
    /// (`devices.limited`), and the other batches are stored as if it had never arrived.
    ///
    /// - Parameters:
    ///   - batches: Batches that arrived together, checked by `IncomingBatch.decode(frames:authenticatedDevice:)`.
    ///   - now: The sync time recorded for the batches' devices, and the clock of the flights-per-day window.
    ///   - limits: Each device's flight limits (``StoreLimits/none``: none).
    /// - Returns: One outcome per batch.
    /// - Throws: `DatabaseError` (such as a full disk, or a record breaking a table constraint); then nothing was
    ///   stored and the caller answers `retry` or `rejected`.
    public func apply(_ batches: [IncomingBatch], at now: Date, limits: StoreLimits) throws -> [BatchOutcome] {
        guard !batches.isEmpty else { return [] }
        return try calls.measure {
            try pool.writeWithoutTransaction { db in
                try Self.storeInRounds(batches) { skipping in
                    var pass: (outcomes: [BatchOutcome], verdicts: [Int: BatchVerdict]) = ([], [:])
                    try db.inTransaction(.immediate) {
                        pass = try Self.store(batches, skipping: skipping, now: now, limits: limits, in: db)
                        return pass.verdicts.isEmpty ? .commit : .rollback
                    }
                    return pass
                }
            }
        }
    }

    /// One refusal found while storing: the batch's position in the group, and why.
    typealias Refusal = (batch: Int, rejection: BatchRejection)

    private static func store(
        _ batches: [IncomingBatch], skipping skipped: [Int: BatchVerdict], now: Date, limits: StoreLimits,
        in db: Database
    ) throws -> (outcomes: [BatchOutcome], verdicts: [Int: BatchVerdict]) {
        let upsertOrder = try HotStatement(db, sql: upsertOrderSQL)
        let insertScan = try HotStatement(db, sql: insertScanSQL)
        let deviceBatch = try db.cachedStatement(sql: deviceBatchSQL)
        var dirty: Set<SeatKey> = []
        var newCounts = [Int](repeating: 0, count: batches.count)
        // Per batch, its records new to the store (new ids) per flight: what the flight limits count.
        var tally = NewRecordTally(batches)

        func storeOrder(_ order: Order, bytes: Data) throws -> HotStatement.Change {
            try upsertOrder.bind(order.id, at: 1)
            try upsertOrder.bind(order.revision, at: 2)
            try upsertOrder.bind(order.flight.rawValue, at: 3)
            try upsertOrder.bind(order.seat.rawValue, at: 4)
            try upsertOrder.bind(order.device, at: 5)
            try upsertOrder.bind(bytes, at: 6)
            let change = try upsertOrder.upsert()
            if change != .none { dirty.insert(SeatKey(flight: order.flight.rawValue, seat: order.seat.rawValue)) }
            return change
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

        // Each table's rows go in by id, so the UNIQUE id index is walked in order: consecutive inserts land
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
        for (b, batch) in batches.enumerated() where skipped[b] == nil {
            for i in batch.records.indices {
                switch batch.records[i].record {
                case .order(let order):
                    orders.append(PendingRow(order.id, batch: b, index: i))
                    tally.note(b, i, flight: order.flight.rawValue)
                case .scan(let scan):
                    scans.append(PendingRow(scan.id, batch: b, index: i))
                    tally.note(b, i, flight: scan.flight.rawValue)
                }
            }
        }
        tally.startCounting()
        // At most one seat per order: room for all up front, so the set never grows (each growth rehashed every seat's
        // two strings again).
        dirty.reserveCapacity(orders.count)
        orders.sort()
        scans.sort()
        let orderDevice = try db.cachedStatement(sql: orderDeviceSQL)
        // Kept digests through corrections: the trigger `orders_digest_stale` marks a pair stale when one of its orders
        // is updated (it must, for an operator's hand edit), which made every pair with a correction read its rows at
        // its next summary. Apply knows what it changes: an order that can raise a stored revision (revision 2 and
        // up) is looked up first, and each pair it marks gets back the validity it had before this transaction, with
        // the old revision's hash taken out and the new one's added.
        var revised = RevisedDigests()
        // The orders this transaction stores (inserted or raised): only they can fix a flight's currency.
        var storedOrders: [PendingRow] = []
        var validBefore: [DeviceFlight: Bool] = [:]
        let storedOrder = try db.cachedStatement(sql: storedOrderSQL)
        let pairValidity = try db.cachedStatement(sql: pairValiditySQL)
        for row in orders {
            guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
            var stored: (flight: String, revision: Int)?
            if order.revision > 1, let found = try Row.fetchOne(storedOrder, arguments: [order.id.blob]) {
                stored = (flight: found[1], revision: found[0])
                // The trigger marks the stored pair and, for an order that moves, the pair it moves to.
                for pair in [
                    DeviceFlight(device: found[2], flight: found[1]),
                    DeviceFlight(device: order.device, flight: order.flight.rawValue),
                ] where validBefore[pair] == nil {
                    validBefore[pair] = try Bool.fetchOne(pairValidity, arguments: [pair.device, pair.flight]) ?? false
                }
            }
            let change = try storeOrder(order, bytes: batches[Int(row.batch)].records[Int(row.index)].bytes)
            if change != .none { storedOrders.append(row) }
            switch change {
            case .inserted:
                newCounts[Int(row.batch)] += 1
                tally.countNew(
                    Int(row.batch), Int(row.index), hash: DeliverySummary.hash(order: order.id, revision: order.revision))
            case .updated:
                newCounts[Int(row.batch)] += 1
                if let stored {
                    revised.revise(
                        order: order.id, device: order.device, from: stored,
                        to: (flight: order.flight.rawValue, revision: order.revision))
                }
            case .none:
                // Nothing changed, and not because of the revision: the order is another device's.
                if let owner = try String.fetchOne(orderDevice, arguments: [order.id.blob]), owner != order.device {
                    refuse(Int(row.batch), Int(row.index), .foreignOrder(order, owner: owner))
                }
            }
        }
        try Self.checkCurrencies(of: storedOrders, in: batches, tally: tally, db: db, refuse: refuse)
        // The scans go in even after a refusal: whether a batch before the refused one is past a limit, which would
        // make it the earliest verdict, depends on them.
        for row in scans {
            guard case .scan(let scan) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
            if try storeScan(scan) {
                newCounts[Int(row.batch)] += 1
                tally.countNew(Int(row.batch), Int(row.index), hash: DeliverySummary.hash(scan: scan.id))
            }
        }
        let newRecords = tally.newRecords
        let increments = Self.counterIncrements(
            batches, skipping: skipped, newRecords: newRecords, newDigests: tally.newDigests)
        let verdicts = Self.limitVerdicts(
            batches, skipping: skipped, newRecords: newRecords, refusal: refusal,
            counters: try Self.flightCounters(increments, now: now, in: db), limits: limits, now: now)
        if !verdicts.isEmpty { return ([], verdicts) }
        let addDeviceFlight = try db.cachedStatement(sql: addDeviceFlightSQL)
        for increment in increments {
            try addDeviceFlight.execute(arguments: [
                increment.pair.device, increment.pair.flight, increment.records, now.timeIntervalSince1970,
                increment.digestHigh, increment.digestLow,
            ])
        }
        if !revised.isEmpty {
            let revise = try db.cachedStatement(sql: reviseDigestSQL)
            for (pair, change) in revised.changes {
                try revise.execute(arguments: [
                    change.held, change.high, change.low, validBefore[pair] == true, pair.device, pair.flight,
                ])
            }
        }
        let deviceLimited = try db.cachedStatement(sql: deviceLimitedSQL)
        let outcomes = try Self.outcomes(of: batches, new: newCounts, skipping: skipped) {
            header, records, new, duplicates in
            try deviceBatch.execute(arguments: [header.device, now.timeIntervalSince1970, records, new, duplicates])
        } limited: { header, limit in
            try deviceLimited.execute(
                arguments: [header.device, now.timeIntervalSince1970, String(limit.reason.prefix(500)), 1])
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
        return (outcomes, [:])
    }

    /// Fixes each new flight's currency and refuses an order in another than its flight's.
    ///
    /// A flight's currency is what the store says, else that of the first order (in arrival order) this transaction
    /// stores on it; so a second currency is refused also within one batch. Only stored orders count: before, every
    /// order did, and a resend of a stored order naming another flight (a duplicate, acked as stored) fixed that
    /// flight's currency, so that one stolen key could make every honest order of any flight it named refused.
    private static func checkCurrencies(
        of stored: [PendingRow], in batches: [IncomingBatch], tally: NewRecordTally, db: Database,
        refuse: (Int, Int, ValidationError) -> Void
    ) throws {
        guard !stored.isEmpty else { return }
        let arrival = stored.sorted { ($0.batch, $0.index) < ($1.batch, $1.index) }
        var currencies = [String?](repeating: nil, count: tally.flights.count)
        let flightCurrency = try db.cachedStatement(sql: flightCurrencySQL)
        let insertFlight = try db.cachedStatement(sql: insertFlightSQL)
        for row in arrival {
            let (b, i) = (Int(row.batch), Int(row.index))
            guard case .order(let order) = batches[b].records[i].record else { continue }
            let number = tally.flightNumber(b, i)
            let flight = order.flight.rawValue
            let currency: String
            if let known = currencies[number] {
                currency = known
            } else if let found = try String.fetchOne(flightCurrency, arguments: [flight]) {
                currency = found
                currencies[number] = found
            } else {
                try insertFlight.execute(arguments: [flight, order.currency])
                currency = order.currency
                currencies[number] = currency
            }
            if order.currency != currency {
                refuse(b, i, .flightCurrency(flight: flight, stored: currency, incoming: order.currency))
            }
        }
    }

    /// What `device_flights` holds for the pairs a transaction adds to (one primary-key read each), and for the
    /// devices among them with a flight they have no row for yet, their flights of the last 24 hours (one range of
    /// `device_flights_window` each).
    private static func flightCounters(
        _ increments: [FlightIncrement], now: Date, in db: Database
    ) throws -> FlightCounters {
        var counters = FlightCounters()
        guard !increments.isEmpty else { return counters }
        let read = try db.cachedStatement(sql: deviceFlightSQL)
        var adding: Set<String> = []
        for pair in increments.map(\.pair) {
            if let records = try Int.fetchOne(read, arguments: [pair.device, pair.flight]) {
                counters.records[pair] = records
            } else {
                adding.insert(pair.device)
            }
        }
        let window = try db.cachedStatement(sql: deviceWindowSQL)
        for device in adding {
            // An aggregate without GROUP BY answers one row, also over no rows (count 0, min NULL).
            let cutoff = now.timeIntervalSince1970 - BatchLimit.window
            guard let row = try Row.fetchOne(window, arguments: [device, cutoff]) else { continue }
            let flights: Int = row[0]
            let oldest: Double? = row[1]
            counters.window[device] = (flights, oldest)
        }
        return counters
    }
    /// Counts one rejected batch against its device, with the reason shown in the devices report.
    ///
    /// - Parameters:
    ///   - device: The device named in the batch header.
    ///   - reason: Why the batch was rejected, for people.
    ///   - now: When.
    /// - Throws: `DatabaseError`.
    public func recordRejection(device: String, reason: String, at now: Date, times: Int) throws {
        // Stored inert (``InertText``): the reason may quote the device's own text, and it is shown on terminals.
        let shown = InertText.escape(String(reason.prefix(500)))
        try calls.measure {
            try pool.write { db in
                try db.execute(sql: Self.deviceRejectSQL, arguments: [device, now.timeIntervalSince1970, shown, times])
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

    /// Counts one batch answered `limited` against its device (docs/AGGREGATOR.md, "Keys and the allow list", limits).
    ///
    /// - Throws: `DatabaseError`.
    public func recordLimited(device: String, reason: String, at now: Date, times: Int) throws {
        try calls.measure {
            try pool.write { db in
                try db.execute(
                    sql: Self.deviceLimitedSQL,
                    arguments: [device, now.timeIntervalSince1970, String(reason.prefix(500)), times])
            }
        }
    }

    /// What the store holds of `device`'s records on `flight`, as the device summarises what it holds acknowledged
    /// (docs/PROTOCOL.md, "Proof of delivery"): every order the device owns on the flight at its stored revision, and
    /// every scan.
    ///
    /// Answered from the pair's kept digest in `device_flights` (one primary-key read) when it is valid and equals
    /// `expected`: `apply` adds every row it stores to it, and a trigger marks it stale when a row leaves the pair or
    /// changes (docs/STORE.md, "Kept digests"). Otherwise (a stale digest, a mismatch, no `expected`) the rows are
    /// read through `orders_device_flight` and `scans_flight_device`, only that device's rows of that flight, and the
    /// kept digest is set to what they hold. So `confirmed` costs a read of one row, and a mismatch is always the rows' answer.
    ///
    /// - Throws: `DatabaseError`.
    public func deliverySummary(
        device: String, flight: String, expected: DeliverySummary?
    ) throws -> DeliverySummary {
        try calls.measure {
            let pair = DeviceFlight(device: device, flight: flight)
            if let expected, let kept = try pool.read({ db in try Self.keptDigest(device: device, flight: flight, in: db) }),
                kept == expected || rowReads.wereRead(pair, giving: kept)
            {
                return kept
            }
            let summary = try pool.write { db in
                var summary = DeliverySummary()
                // Straight from SQLite's row buffers: a flight of 100,000 records is 100,000 rows.
                let orders = try HotStatement(db, sql: Self.summaryOrdersSQL)
                try orders.bind(device, at: 1)
                try orders.bind(flight, at: 2)
                try orders.forEachID(path: path, integers: true) { summary.add(order: $0, revision: $1) }
                let scans = try HotStatement(db, sql: Self.summaryScansSQL)
                try scans.bind(device, at: 1)
                try scans.bind(flight, at: 2)
                try scans.forEachID(path: path, integers: false) { id, _ in summary.add(scan: id) }
                try db.execute(
                    sql: Self.keepDigestSQL,
                    arguments: [summary.count, summary.digestHigh, summary.digestLow, device, flight])
                return summary
            }
            // A pair with no rows (a flight made up) is not kept: asking about such pairs must not push out the others.
            if summary.count > 0 { rowReads.note(pair, summary) }
            return summary
        }
    }

    /// The pair's kept digest when it is valid.
    static func keptDigest(device: String, flight: String, in db: Database) throws -> DeliverySummary? {
        guard let row = try Row.fetchOne(db, sql: keptDigestSQL, arguments: [device, flight]) else { return nil }
        return DeliverySummary(count: row[0], high: row[1], low: row[2])
    }

    static let keptDigestSQL = """
        SELECT held, digest_hi, digest_lo FROM device_flights WHERE device = ? AND flight = ? AND digest_valid
        """
    /// Sets a pair's kept digest to what its rows hold (a pair without a row keeps none: `apply` creates it).
    static let keepDigestSQL = """
        UPDATE device_flights SET held = ?, digest_hi = ?, digest_lo = ?, digest_valid = 1 WHERE device = ? AND flight = ?
        """

    static let summaryOrdersSQL = "SELECT id, revision FROM orders WHERE device = ? AND flight = ?"
    static let summaryScansSQL = "SELECT id FROM scans WHERE device = ? AND flight = ?"

    /// How many records (orders and scans) `device` first stored on `flight`: its `device_flights` counter.
    ///
    /// Deprecated (``StoreReader/recordCount(device:flight:)``): ``apply(_:at:limits:)`` checks the limit itself.
    /// - Throws: `DatabaseError`.
    public func recordCount(device: String, flight: String) throws -> Int {
        try pool.read { db in
            try Int.fetchOne(db, sql: Self.deviceFlightSQL, arguments: [device, flight]) ?? 0
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
