public import Foundation
public import JetbridgeModel
public import JetbridgeProtocol
public import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// The scale-out store: a PostgreSQL database that several aggregators may share (docs/STORE.md, "PostgreSQL
/// engine"), chosen with `store` / `--store postgres://…` (``StoreLocation``); the parity tests hold it to
/// ``AggregatorStore``'s outcomes, reads, reports and receipts.
///
/// Exactly once comes from the database's own rules, not from locks in the aggregator: primary keys on order and
/// scan ids, `INSERT … ON CONFLICT` clauses (the highest revision wins, only for the owning device), rows written in
/// a fixed order (flights, orders and scans by id, devices, receipt marks by key) so that two transactions never
/// wait on each other in a cycle, and a serialization failure or deadlock (SQLSTATE 40001, 40P01) retried.
///
/// One connection, serialised by a lock. Calls block on postgres-nio futures (run on SwiftNIO's event loops), so they
/// belong on the store's own thread, never on Swift's cooperative pool.
///
/// A lost connection (the server restarted, stopped or unreachable) fails the call in progress with an error that
/// says so (``PostgresStoreError/unreachable``); the next call connects again, at most once per backoff interval
/// (0.1 s doubling to 5 s while attempts fail; calls in between fail at once without waiting on the network). The
/// outage is logged once when it begins and once when it ends, never per call.
public final class PostgresStore: StoreEngine, @unchecked Sendable {
    /// The schema, one entry per version, applied in order on open under an advisory lock (see ``migrate()``).
    ///
    /// Text columns compare as bytes (`COLLATE "C"`), like SQLite's BINARY collation, so that every ordering (flights,
    /// seats, the receipt walk) is the SQLite store's. `seq` columns give "order of first arrival" (SQLite's rowid):
    /// an upsert that raises a revision keeps its row's `seq`.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE orders (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id uuid NOT NULL PRIMARY KEY,
                revision bigint NOT NULL CHECK (revision >= 1),
                flight text COLLATE "C" NOT NULL,
                seat text COLLATE "C" NOT NULL,
                device text COLLATE "C" NOT NULL,
                record bytea NOT NULL
            )
            """,
            "CREATE INDEX orders_flight ON orders (flight, seat)",
            """
            CREATE TABLE scans (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id uuid NOT NULL PRIMARY KEY,
                flight text COLLATE "C" NOT NULL,
                tag uuid NOT NULL,
                point smallint NOT NULL CHECK (point IN (0, 1)),
                scanned_at double precision NOT NULL,
                owner text COLLATE "C" NOT NULL CHECK (char_length(owner) = 4),
                weight double precision NOT NULL CHECK (weight >= 0),
                device text COLLATE "C" NOT NULL
            )
            """,
            "CREATE INDEX scans_flight_tag ON scans (flight, tag)",
            """
            CREATE TABLE devices (
                device text COLLATE "C" NOT NULL PRIMARY KEY,
                last_sync double precision,
                batches bigint NOT NULL DEFAULT 0,
                records bigint NOT NULL DEFAULT 0,
                new_records bigint NOT NULL DEFAULT 0,
                duplicates bigint NOT NULL DEFAULT 0,
                rejects bigint NOT NULL DEFAULT 0,
                last_reject_at double precision,
                last_reject_reason text
            )
            """,
            """
            CREATE TABLE dirty_receipts (
                flight text COLLATE "C" NOT NULL,
                seat text COLLATE "C" NOT NULL,
                generation bigint NOT NULL,
                PRIMARY KEY (flight, seat)
            )
            """,
            """
            CREATE TABLE flights (
                flight text COLLATE "C" NOT NULL PRIMARY KEY,
                currency text COLLATE "C" NOT NULL
            )
            """,
            // A corrected order that moves to another seat (or flight) leaves the old seat's receipt stale: marked
            // by the same statement, hence in the same transaction, as SQLite's trigger does.
            """
            CREATE FUNCTION jetbridge_order_moved() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO dirty_receipts (flight, seat, generation) VALUES (OLD.flight, OLD.seat, 1)
                ON CONFLICT (flight, seat) DO UPDATE SET generation = dirty_receipts.generation + 1;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER orders_moved AFTER UPDATE OF flight, seat ON orders FOR EACH ROW
            WHEN (OLD.flight IS DISTINCT FROM NEW.flight OR OLD.seat IS DISTINCT FROM NEW.seat)
            EXECUTE FUNCTION jetbridge_order_moved()
            """,
        ],
        [
            // Batches answered `limited` (a device past its records per second or per flight), per device; SQLite's v4.
            """
            ALTER TABLE devices ADD COLUMN limited bigint NOT NULL DEFAULT 0,
                ADD COLUMN last_limited_at double precision, ADD COLUMN last_limited_reason text
            """
        ],
    ]

    /// The advisory lock key migrations hold ("Jetb"), so that two processes opening one database at once migrate
    /// it once.
    static let migrationLock: Int = 0x4A65_7462

    /// Attempts of one transaction that fails with a serialization failure or deadlock.
    static let maximumAttempts = 20

    /// The first wait after a failed connection attempt, and the longest.
    static let firstBackoff: Duration = .milliseconds(100)
    static let longestBackoff: Duration = .seconds(5)
    /// How long one connection attempt may take: an unreachable host must not hold the store thread for long.
    static let connectTimeout: Int64 = 5

    /// Where the store is (shown without its password).
    public let location: PostgresLocation
    private let configuration: PostgresConnection.Configuration
    private let lock = NSLock()
    private let logger: Logger
    // Guarded by `lock` (hence @unchecked Sendable).
    private var connection: PostgresConnection
    /// Set when the connection failed (rather than the server refusing a statement): the next call reconnects.
    private var broken = false
    private var backoff = PostgresStore.firstBackoff
    private var nextAttempt = ContinuousClock.now
    /// When the current outage began, if one is going on.
    private var outageSince: Date?

    /// Connects to the database at `url` and brings its schema up to date.
    ///
    /// - Parameters:
    ///   - url: `postgres://user[:password]@host[:port]/database` (see ``PostgresLocation``).
    ///   - logger: Where the store logs; never the password.
    ///   - environment: Where `PGPASSWORD` is looked up.
    /// - Throws: ``PostgresStoreError`` naming the URL without its password.
    public init(
        url: String, logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let location = try PostgresLocation(url, environment: environment)
        self.location = location
        self.logger = logger
        var configuration: PostgresConnection.Configuration
        if let directory = location.socketDirectory {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(location.port)", username: location.user,
                password: location.password, database: location.database)
        } else {
            configuration = .init(
                host: location.host!, port: location.port, username: location.user, password: location.password,
                database: location.database, tls: .disable)
        }
        configuration.options.connectTimeout = .seconds(Self.connectTimeout)
        self.configuration = configuration
        do {
            connection = try Self.connect(configuration, logger: logger)
        } catch {
            var failure = Self.describe(error, doing: "cannot connect to \(location.redacted)")
            failure.unreachable = failure.sqlState == nil || failure.isConnectionState
            throw failure
        }
        do {
            try migrate()
        } catch {
            try? connection.close().wait()
            throw error
        }
        logger.debug("store open", metadata: ["store": "\(location.redacted)"])
    }

    // MARK: Statements

    private static func connect(
        _ configuration: PostgresConnection.Configuration, logger: Logger
    ) throws -> PostgresConnection {
        try PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration,
            id: Int.random(in: 1...Int(Int32.max)), logger: logger
        ).wait()
    }

    @discardableResult
    private func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        do {
            return try connection.query(query, logger: logger).wait()
        } catch {
            var failure = Self.describe(error, doing: "\(location.redacted)")
            // No answer from the server (the connection closed or failed), or the server going away (57P01 admin
            // shutdown, 57P02, 57P03 starting up) or a connection exception (08xxx): reconnect before the next call.
            if failure.sqlState == nil || failure.isConnectionState {
                broken = true
                failure.unreachable = true
                noteOutage(failure)
            }
            throw failure
        }
    }

    /// Connects again when the connection was lost, at most once per backoff interval; called with the lock held
    /// before every call's statements.
    /// - Throws: ``PostgresStoreError`` with `unreachable` set while the server cannot be reached.
    private func reconnectIfNeeded() throws {
        guard broken || connection.isClosed else { return }
        let now = ContinuousClock.now
        guard now >= nextAttempt else {
            throw PostgresStoreError(
                "the store \(location.redacted) is unreachable; reconnecting (next attempt in "
                    + "\(Int(((nextAttempt - now) / .milliseconds(1)).rounded())) ms)", unreachable: true)
        }
        _ = try? connection.close().wait()
        do {
            connection = try Self.connect(configuration, logger: logger)
        } catch {
            var failure = Self.describe(error, doing: "the store \(location.redacted) is unreachable")
            failure.unreachable = true
            broken = true
            nextAttempt = now + backoff
            backoff = min(backoff * 2, Self.longestBackoff)
            noteOutage(failure)
            throw failure
        }
        broken = false
        backoff = Self.firstBackoff
        if let since = outageSince {
            outageSince = nil
            logger.notice(
                "store reachable again",
                metadata: [
                    "store": "\(location.redacted)", "outageSeconds": .stringConvertible(Int(Date().timeIntervalSince(since).rounded())),
                ])
        }
    }

    /// Logs the start of an outage, once.
    private func noteOutage(_ failure: PostgresStoreError) {
        guard outageSince == nil else { return }
        outageSince = Date()
        logger.warning(
            "store unreachable; reconnecting with backoff (up to \(Self.longestBackoff))",
            metadata: ["store": "\(location.redacted)", "error": "\(failure.message)"])
    }

    /// A message for `error` that never carries the password: the server's SQLSTATE and message, or what failed.
    private static func describe(_ error: any Error, doing what: String) -> PostgresStoreError {
        if let error = error as? PostgresStoreError { return error }
        guard let error = error as? PSQLError else { return PostgresStoreError("\(what): \(error)") }
        if let info = error.serverInfo {
            let state = info[.sqlState]
            let message = info[.message] ?? "error"
            let detail = info[.detail].map { " (\($0))" } ?? ""
            return PostgresStoreError("\(what): \(message)\(detail) [SQLSTATE \(state ?? "?")]", sqlState: state)
        }
        return PostgresStoreError("\(what): \(error.code)")
    }

    /// Runs `body` in one transaction (`BEGIN` … `COMMIT`, or `ROLLBACK` when it says so or throws), again from the
    /// start after a serialization failure or deadlock.
    private func transaction<T>(_ body: () throws -> (value: T, commit: Bool)) throws -> T {
        var attempt = 1
        while true {
            do {
                try run("BEGIN")
                let (value, commit) = try body()
                try run(commit ? "COMMIT" : "ROLLBACK")
                return value
            } catch let error as PostgresStoreError {
                if !broken { _ = try? connection.query("ROLLBACK", logger: logger).wait() }
                guard error.sqlState == "40001" || error.sqlState == "40P01", attempt < Self.maximumAttempts else {
                    throw error
                }
                logger.debug(
                    "store transaction retried", metadata: ["sqlstate": "\(error.sqlState ?? "")", "attempt": .stringConvertible(attempt)])
                Thread.sleep(forTimeInterval: Double.random(in: 0.001...0.005) * Double(attempt))
                attempt += 1
            } catch {
                if !broken { _ = try? connection.query("ROLLBACK", logger: logger).wait() }
                throw error
            }
        }
    }

    /// Runs `body` with the connection to itself, connecting again first if it was lost.
    private func locked<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        try reconnectIfNeeded()
        return try body()
    }

    // MARK: Schema

    /// Applies the migrations this database lacks, in one transaction under an advisory lock: a second process
    /// opening the same database waits, then finds them applied. Safe to call again (it applies nothing).
    public func migrate() throws {
        try locked {
            try transaction {
                try run("SELECT pg_advisory_xact_lock(\(Self.migrationLock))")
                try run(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version integer NOT NULL PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                var applied: Set<Int> = []
                for row in try run("SELECT version FROM schema_migrations") {
                    applied.insert(try row.decode(Int.self))
                }
                for (offset, statements) in Self.migrations.enumerated() where !applied.contains(offset + 1) {
                    for statement in statements { try run(PostgresQuery(unsafeSQL: statement)) }
                    try run("INSERT INTO schema_migrations (version) VALUES (\(offset + 1))")
                    logger.info("store migrated", metadata: ["store": "\(location.redacted)", "version": .stringConvertible(offset + 1)])
                }
                return ((), true)
            }
        }
    }

    /// The schema version the database is at.
    public func schemaVersion() throws -> Int {
        try locked {
            try run("SELECT coalesce(max(version), 0) FROM schema_migrations").first.map { try $0.decode(Int.self) } ?? 0
        }
    }

    // MARK: Writing

    public func apply(_ batches: [IncomingBatch], at now: Date) throws -> [BatchOutcome] {
        guard !batches.isEmpty else { return [] }
        return try locked {
            // As in SQLite: a refusal rolls the transaction back and the group is stored again without that batch,
            // one refused batch per round.
            try Self.storeRefusingOnePerRound(batches) { refused in
                try transaction {
                    let pass = try store(batches, skipping: refused, now: now)
                    return (pass, pass.refusal == nil)
                }
            }
        }
    }

    /// One pass of ``apply(_:at:)`` inside a transaction: the SQLite store's `store` with the same verdicts, rows in
    /// a fixed order, each table's rows in one statement (`PostgresStore+Apply.swift`).
    private func store(
        _ batches: [IncomingBatch], skipping refused: [Int: BatchRejection], now: Date
    ) throws -> (outcomes: [BatchOutcome], refusal: AggregatorStore.Refusal?) {
        var refusal: AggregatorStore.Refusal?
        func refuse(_ b: Int, _ i: Int, _ error: ValidationError) {
            refusal = Self.earliest(refusal, b, i, error, in: batches)
        }
        let total = batches.reduce(0) { $0 + $1.records.count }
        var orders: [PendingRow] = []
        var scans: [PendingRow] = []
        orders.reserveCapacity(total)
        scans.reserveCapacity(total)
        // Each flight's currency if this transaction creates it: its first order's, in arrival order.
        var firstCurrency: [String: String] = [:]
        for (b, batch) in batches.enumerated() where refused[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                switch incoming.record {
                case .order(let order):
                    orders.append(PendingRow(order.id, batch: b, index: i))
                    if firstCurrency[order.flight.rawValue] == nil {
                        firstCurrency[order.flight.rawValue] = order.currency
                    }
                case .scan(let scan): scans.append(PendingRow(scan.id, batch: b, index: i))
                }
            }
        }
        // Flights: the stored ones read first; the rest created in name order (the first writer of a flight fixes its
        // currency, a concurrent one waits for it), then read.
        var currencies: [String: String] = [:]
        func readCurrencies(_ flights: [String]) throws {
            for row in try run(Self.flightCurrencies(flights)) {
                let (flight, currency) = try row.decode((String, String).self)
                currencies[flight] = currency
            }
        }
        if !firstCurrency.isEmpty {
            try readCurrencies(Array(firstCurrency.keys))
            let missing = firstCurrency.filter { currencies[$0.key] == nil }.map { (flight: $0.key, currency: $0.value) }
            if !missing.isEmpty {
                try run(Self.insertFlights(missing.sorted { $0.flight < $1.flight }))
                try readCurrencies(missing.map(\.flight))
            }
        }
        for (b, batch) in batches.enumerated() where refused[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                guard case .order(let order) = incoming.record, let currency = currencies[order.flight.rawValue],
                    order.currency != currency
                else { continue }
                refuse(b, i, .flightCurrency(flight: order.flight.rawValue, stored: currency, incoming: order.currency))
            }
        }
        orders.sort()
        scans.sort()
        var newCounts = [Int](repeating: 0, count: batches.count)
        var dirty: Set<SeatKey> = []
        // Orders, one statement per round; an unchanged row is a duplicate unless another device owns the order.
        var unchanged: [PendingRow] = []
        for round in Self.rounds(orders) {
            var kept = [Bool](repeating: true, count: round.count)
            for row in try run(Self.upsertOrders(round, of: batches)) {
                kept[try row.decode(Int.self) - 1] = false
            }
            for (row, changed) in zip(round, kept) {
                guard changed else {
                    unchanged.append(row)
                    continue
                }
                guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
                newCounts[Int(row.batch)] += 1
                dirty.insert(SeatKey(flight: order.flight.rawValue, seat: order.seat.rawValue))
            }
        }
        if !unchanged.isEmpty {
            func order(_ row: PendingRow) -> Order? {
                guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { return nil }
                return order
            }
            var owners: [UUID: String] = [:]
            for row in try run(Self.orderOwners(unchanged.compactMap { order($0)?.id })) {
                let (id, device) = try row.decode((UUID, String).self)
                owners[id] = device
            }
            for row in unchanged {
                guard let order = order(row), let owner = owners[order.id], owner != order.device else { continue }
                refuse(Int(row.batch), Int(row.index), .foreignOrder(order, owner: owner))
            }
        }
        if let refusal { return ([], refusal) }
        for round in Self.rounds(scans) {
            var inserted = [Bool](repeating: true, count: round.count)
            for row in try run(Self.insertScans(round, of: batches)) {
                inserted[try row.decode(Int.self) - 1] = false
            }
            for (row, new) in zip(round, inserted) where new { newCounts[Int(row.batch)] += 1 }
        }
        // Devices' statistics summed per device and written in device order (one row each).
        var devices: [String: (batches: Int, records: Int, new: Int, duplicates: Int)] = [:]
        let outcomes = Self.outcomes(of: batches, new: newCounts, skipping: refused) { header, records, new, duplicates in
            var sums = devices[header.device] ?? (0, 0, 0, 0)
            sums.batches += 1
            sums.records += records
            sums.new += new
            sums.duplicates += duplicates
            devices[header.device] = sums
        }
        if !devices.isEmpty {
            try run(
                Self.addDeviceStatistics(
                    devices.sorted { $0.key < $1.key }.map { ($0.key, $0.value.0, $0.value.1, $0.value.2, $0.value.3) },
                    at: now.timeIntervalSince1970))
        }
        if !dirty.isEmpty {
            try run(Self.markDirty(dirty.sorted { ($0.flight, $0.seat) < ($1.flight, $1.seat) }))
        }
        return (outcomes, nil)
    }

    public func recordRejection(device: String, reason: String, at now: Date) throws {
        let shown = InertText.escape(String(reason.prefix(500)))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, rejects, last_reject_at, last_reject_reason)
            VALUES (\(device), 1, \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET rejects = devices.rejects + 1,
                last_reject_at = excluded.last_reject_at, last_reject_reason = excluded.last_reject_reason
            """)
    }

    public func recordLimited(device: String, reason: String, at now: Date) throws {
        let shown = String(reason.prefix(500))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, limited, last_limited_at, last_limited_reason)
            VALUES (\(device), 1, \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET limited = devices.limited + 1,
                last_limited_at = excluded.last_limited_at, last_limited_reason = excluded.last_limited_reason
            """)
    }

    /// Runs one `devices` upsert (a rejection or a limited batch counted) in a transaction of its own.
    private func countAgainstDevice(_ upsert: PostgresQuery) throws {
        try locked {
            try transaction {
                try run(upsert)
                return ((), true)
            }
        }
    }

    // MARK: Reading

    public func recordCount(device: String, flight: String) throws -> Int {
        try locked {
            try run(
                """
                SELECT (SELECT count(*) FROM orders WHERE flight = \(flight) AND device = \(device))
                    + (SELECT count(*) FROM scans WHERE flight = \(flight) AND device = \(device))
                """
            ).first?.decode(Int.self) ?? 0
        }
    }

    public func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int {
        try locked {
            var count = 0
            for record in records {
                let rows =
                    if case .order = record {
                        try run("SELECT 1 FROM orders WHERE id = \(record.id)")
                    } else {
                        try run("SELECT 1 FROM scans WHERE id = \(record.id)")
                    }
                if rows.first == nil { count += 1 }
            }
            return count
        }
    }

    public func lastCommit() throws -> Date? {
        try locked {
            try run("SELECT max(last_sync) FROM devices").first?.decode(Double?.self)
                .map(Date.init(timeIntervalSince1970:))
        }
    }

    public func orders(flight: FlightID?) throws -> [Order] {
        try locked {
            let rows =
                if let flight {
                    try run("SELECT record FROM orders WHERE flight = \(flight.rawValue) ORDER BY seq")
                } else {
                    try run("SELECT record FROM orders ORDER BY flight, seq")
                }
            return try rows.map { try decodeOrder($0.decode(Data.self)) }
        }
    }

    public func bags(flight: FlightID?) throws -> [BagState] {
        try locked { try bagGroups(flight: flight).flatMap(\.bags) }
    }

    public func receipt(flight: FlightID, seat: Seat) throws -> Receipt? {
        let orders = try locked {
            try run(
                "SELECT record FROM orders WHERE flight = \(flight.rawValue) AND seat = \(seat.rawValue) ORDER BY seq"
            ).map { try decodeOrder($0.decode(Data.self)) }
        }
        return orders.isEmpty ? nil : try Receipt(flight: flight, seat: seat, orders: orders)
    }

    public func receipts(flight: FlightID) throws -> [Receipt] {
        try Receipt.all(orders: orders(flight: flight))
    }

    public func dirtyReceiptCount() throws -> Int {
        try locked { try run("SELECT count(*) FROM dirty_receipts").first?.decode(Int.self) ?? 0 }
    }

    public func flightReports(flight: FlightID?) throws -> FlightReports {
        try locked {
            let orderFlights =
                if let flight {
                    try run("SELECT DISTINCT flight FROM orders WHERE flight = \(flight.rawValue)")
                        .map { try $0.decode(String.self) }
                } else {
                    try run("SELECT DISTINCT flight FROM orders ORDER BY flight").map { try $0.decode(String.self) }
                }
            var reports: [FlightReport] = []
            func emit(_ flight: FlightID, _ bags: [BagState]) throws {
                let rows = try run("SELECT record FROM orders WHERE flight = \(flight.rawValue) ORDER BY seq")
                do {
                    let orders = try rows.map { try decodeOrder($0.decode(Data.self)) }
                    reports.append(try FlightReport(flight: flight, orders: orders, bags: bags))
                } catch {
                    reports.append(FlightReport(flight: flight, error: "\(error)", orders: rows.count, bags: bags))
                }
            }
            var next = 0
            for group in try bagGroups(flight: flight) {
                try Self.emitFlights(through: group, orderFlights: orderFlights, next: &next, emit)
            }
            try Self.emitFlights(through: nil, orderFlights: orderFlights, next: &next, emit)
            return FlightReports(flights: reports)
        }
    }

    public func itemReport(flight: FlightID?) throws -> ItemReport {
        ItemReport(flights: try flightReports(flight: flight).flights)
    }

    public func luggageReport(flight: FlightID?, status: Set<BagStatus>) throws -> LuggageReport {
        var groups: [BagStatus: [LuggageReport.Row]] = [:]
        for (_, bags) in try locked({ try bagGroups(flight: flight) }) {
            for row in LuggageReport.rows(forFlight: bags) where status.isEmpty || status.contains(row.status) {
                groups[row.status, default: []].append(row)
            }
        }
        return LuggageReport(bags: BagStatus.reportOrder.flatMap { groups[$0] ?? [] })
    }

    public func deviceReport() throws -> DeviceReport {
        try locked {
            let rows = try run(
                """
                SELECT device, last_sync, batches, records, new_records, duplicates, rejects, last_reject_at,
                    last_reject_reason, limited
                FROM devices ORDER BY device
                """)
            return DeviceReport(
                devices: try rows.map { row in
                    let (device, lastSync, batches, records, new, duplicates, rejects, rejectAt, reason, limited) =
                        try row.decode((String, Double?, Int, Int, Int, Int, Int, Double?, String?, Int).self)
                    return DeviceStatistics(
                        device: device, lastSync: lastSync.map(Date.init(timeIntervalSince1970:)), batches: batches,
                        records: records, new: new, duplicates: duplicates, rejects: rejects,
                        lastRejectAt: rejectAt.map(Date.init(timeIntervalSince1970:)), lastRejectReason: reason,
                        limited: limited)
                })
        }
    }

    /// Nothing to do: PostgreSQL's own autovacuum and checkpointer keep the database in shape.
    public func idleMaintenance() throws {}

    public func close() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !connection.isClosed else { return }
        do { try connection.close().wait() } catch {
            // A connection the server already dropped has nothing left to close.
            if broken { return }
            throw Self.describe(error, doing: "closing \(location.redacted)")
        }
    }

    // MARK: Receipts

    public var name: String { location.redacted }

    public func flightsWithOrders() throws -> [FlightID] {
        try locked {
            try run("SELECT DISTINCT flight FROM orders ORDER BY flight").map { try flightID($0.decode(String.self)) }
        }
    }

    public func forEachReceipt(
        flight: FlightID, failed: (FlightID, Seat, any Error) -> Void, _ body: (Receipt) throws -> Void
    ) throws {
        // One flight's order rows in memory at a time (postgres-nio's future API returns them all), one seat's
        // decoded orders.
        let rows = try locked {
            try run("SELECT seat, record FROM orders WHERE flight = \(flight.rawValue) ORDER BY seat, seq")
        }
        try forEachSeat(rows) { seatText, orders in
            let seat = try seatValue(seatText)
            guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed) else { return }
            try body(receipt)
        }
    }

    /// Seats claimed per step of the receipt walk, at most: a commit that marks a claimed seat waits for the step's
    /// transaction (its files written and synced), so steps stay short (100 seats: 200 small files).
    static let receiptClaim = 100

    public func refreshReceipts(
        after: ReceiptMark?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        write: (FlightID, Seat, Receipt?) throws -> Void, durable: () throws -> Void
    ) throws -> [ReceiptMark] {
        try locked {
            try transaction {
                // Claimed: held until this transaction ends; another aggregator's walk skips them (and renders the
                // seats after them), a commit that marks one again waits, then marks it anew.
                let rows = try run(
                    """
                    SELECT flight, seat, generation FROM dirty_receipts
                    WHERE (flight, seat) > (\(after?.flight.rawValue ?? ""), \(after?.seat.rawValue ?? ""))
                    ORDER BY flight, seat LIMIT \(min(limit, Self.receiptClaim)) FOR UPDATE SKIP LOCKED
                    """)
                var marks: [ReceiptMark] = []
                for row in rows {
                    let (flight, seat, generation) = try row.decode((String, String, Int64).self)
                    marks.append(ReceiptMark(flight: try flightID(flight), seat: try seatValue(seat), generation: generation))
                }
                var failedSeats: Set<ReceiptMark> = []
                var index = 0
                while index < marks.count {
                    let flight = marks[index].flight
                    var seats: [Seat] = []
                    while index < marks.count, marks[index].flight == flight {
                        seats.append(marks[index].seat)
                        index += 1
                    }
                    let orderRows = try run(
                        """
                        SELECT seat, record FROM orders WHERE flight = \(flight.rawValue)
                            AND seat = ANY(\(seats.map(\.rawValue))) ORDER BY seat, seq
                        """)
                    var found: [String: Result<[Order], any Error>] = [:]
                    try forEachSeat(orderRows) { found[$0] = $1 }
                    for seat in seats {
                        guard let orders = found[seat.rawValue] else {
                            try write(flight, seat, nil)
                            continue
                        }
                        guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed)
                        else {
                            failedSeats.insert(ReceiptMark(flight: flight, seat: seat, generation: 0))
                            continue
                        }
                        try write(flight, seat, receipt)
                    }
                }
                guard !marks.isEmpty else { return (marks, true) }
                try durable()
                for mark in marks
                where !failedSeats.contains(ReceiptMark(flight: mark.flight, seat: mark.seat, generation: 0)) {
                    try run(
                        """
                        DELETE FROM dirty_receipts WHERE flight = \(mark.flight.rawValue) AND seat = \(mark.seat.rawValue)
                            AND generation = \(mark.generation)
                        """)
                }
                return (marks, true)
            }
        }
    }

    public func probe() -> String? {
        do {
            _ = try locked { try run("SELECT 1") }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Groups `seat, record` rows (in seat order) by seat: each seat's decoded orders, or the error of the first
    /// order that does not decode (the other seats go on).
    private func forEachSeat(
        _ rows: PostgresQueryResult, _ body: (String, Result<[Order], any Error>) throws -> Void
    ) throws {
        var iterator = rows.makeIterator()
        try Self.forEachSeat(
            rows: { try iterator.next().map { try $0.decode((String, Data).self) } }, decode: decodeOrder, body)
    }

    // MARK: Internals

    private func decodeOrder(_ bytes: Data) throws -> Order {
        let record: JetbridgeModel.Record
        do { record = try RecordCoding.decode(bytes) } catch {
            throw StoreError(
                .undecodableRecord,
                "a stored order no longer decodes (\(error)); open the store with the codec it was written with",
                path: location.redacted)
        }
        guard case .order(let order) = record else {
            throw StoreError(.corruptRow, "a row of the orders table holds a \(record) record", path: location.redacted)
        }
        return order
    }

    /// Every bag merged from its scans by ``BagState``, grouped by flight (flights in order, bags by tag id).
    private func bagGroups(flight: FlightID?) throws -> [(flight: FlightID, bags: [BagState])] {
        let columns = "flight, tag, owner, weight, point, scanned_at, id, device"
        let rows =
            if let flight {
                try run("SELECT \(unescaped: columns) FROM scans WHERE flight = \(flight.rawValue) ORDER BY tag, seq")
            } else {
                try run("SELECT \(unescaped: columns) FROM scans ORDER BY flight, tag, seq")
            }
        var groups: [(flight: FlightID, bags: [BagState])] = []
        var currentText = ""
        for row in rows {
            let (flightText, tag, ownerText, weight, point, scannedAt, id, device) =
                try row.decode((String, UUID, String, Double, Int16, Double, UUID, String).self)
            if flightText != currentText || groups.isEmpty {
                groups.append((try flightID(flightText), []))
                currentText = flightText
            }
            let owner = try ownerValue(ownerText)
            let scan = Scan(
                id: id, tag: LuggageTag(id: tag, owner: owner, weight: weight),
                point: point == 0 ? .origin : .destination,
                scannedAt: Date(timeIntervalSinceReferenceDate: scannedAt), flight: groups[groups.count - 1].flight,
                device: device)
            if let last = groups[groups.count - 1].bags.last, last.tagID == scan.tag.id {
                groups[groups.count - 1].bags[groups[groups.count - 1].bags.count - 1].apply(scan)
            } else {
                groups[groups.count - 1].bags.append(BagState(scan: scan))
            }
        }
        return groups
    }
}
