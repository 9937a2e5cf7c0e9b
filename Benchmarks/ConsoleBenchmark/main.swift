// Console benchmark (issue 26 item 3): builds a SQLite store at real size — by default 3,100 flights over 31 days
// (1,800 orders and 500 bags each, bags scanned at the origin and, past a few missing, at the destination) plus one
// flight today with 600,000 bags (1,000 of them missing) and 30,000 orders: about 10 million records — by bulk
// inserts straight into the store's schema (SQL generating the rows, indexes dropped and built again after, as the
// store's migrations define them); then starts a real `serve --console` on it in this process and times each page's
// JSON answer over HTTP, and prints EXPLAIN QUERY PLAN of every console query.
//
//   swift build --product console-benchmark && .build/debug/console-benchmark [--dir DIR] [--reuse] [--runs N]
//       [--settle SECONDS] [--flights N] [--orders N] [--bags N] [--big-bags N] [--store sqlite|postgres]
//       [--url URL] [--database NAME]
//
// --reuse times an existing store in DIR (or database NAME) without building it again. Orders are distinct records
// (each has its own id inside its MessagePack bytes, which the console decodes); the rows' `id` column is a random
// value of its own. --store postgres builds the same store in database NAME (console_benchmark) of the server URL
// names (default: $JETBRIDGE_TEST_POSTGRES, e.g. a throwaway from Tests/postgres/start-throwaway.sh) by
// set-based SQL (generate_series), with its indexes dropped and built again as the schema defines them, then
// VACUUM ANALYZE; DIR is then the aggregator's home only.

import BenchmarkSupport
import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import Logging
import PostgresNIO

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

let usage = """
    usage: console-benchmark [--dir DIR] [--reuse] [--runs N] [--settle SECONDS] [--flights N] [--orders N] [--bags N]
        [--big-bags N] [--store sqlite|postgres] [--url URL] [--database NAME]
    """
var options: [String: String] = [:]
var reuse = false
var arguments = Array(CommandLine.arguments.dropFirst())
while !arguments.isEmpty {
    let flag = arguments.removeFirst()
    if flag == "--reuse" {
        reuse = true
        continue
    }
    guard flag.hasPrefix("--"), !arguments.isEmpty else { exitWithUsage("unknown or incomplete flag \(flag)", usage: usage) }
    options[String(flag.dropFirst(2))] = arguments.removeFirst()
}
@MainActor func number(_ name: String, _ fallback: Int) -> Int {
    guard let text = options[name] else { return fallback }
    guard let value = Int(text), value >= 0 else { exitWithUsage("--\(name) takes a number", usage: usage) }
    return value
}
let directory = URL(fileURLWithPath: options["dir"] ?? "/tmp/console-benchmark")
let postgres = options["store"] == "postgres"
if let engine = options["store"], engine != "postgres", engine != "sqlite" {
    exitWithUsage("--store is sqlite or postgres, not \(engine)", usage: usage)
}
let pgServer: PostgresCopy? = postgres ? PostgresCopy(url: options["url"] ?? ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"] ?? {
    exitWithUsage("--store postgres needs --url URL or JETBRIDGE_TEST_POSTGRES", usage: usage)
}()) : nil
let databaseName = options["database"] ?? "console_benchmark"
let flightCount = number("flights", 3_100)
let ordersPerFlight = number("orders", 1_800)
let bagsPerFlight = number("bags", 500)
let bigBags = number("big-bags", 600_000)
let bigOrders = 30_000
let runs = max(1, number("runs", 5))
let days = 31
let seatsPerFlight = 12

let logger = Logger(label: "console-benchmark")
let home = AggregatorHome(directory: directory)
let storePath = directory.appendingPathComponent(SQLiteStore.fileName).path
let today = String(ISO8601DateFormatter().string(from: Date()).prefix(10))
func day(_ back: Int) -> String {
    String(ISO8601DateFormatter().string(from: Date().addingTimeInterval(-86_400 * Double(back))).prefix(10))
}
let bigFlight = try FlightID("ZA9999/\(today)")
func flight(_ index: Int) throws -> FlightID {
    try FlightID("ZA\(100 + index / days)/\(day(index % days))")
}

/// Closes a connection, blocking (top-level code here is asynchronous, where `wait()` is not offered).
func closeQuietly(_ connection: PostgresConnection) { try? connection.close().wait() }

func elapsed(_ start: ContinuousClock.Instant) -> String {
    String(format: "%.1f s", Double((ContinuousClock.now - start).components.attoseconds) / 1e18
        + Double((ContinuousClock.now - start).components.seconds))
}

// MARK: Build

/// How many flights the board lists, and how long the list's read takes (the board keeps it for 20 times that).
func flightsRead(_ store: any ConsoleReading) throws -> String {
    let started = ContinuousClock.now
    let count = try store.consoleFlights().count
    let took = ContinuousClock.now - started
    return "\(count), listed in \(String(format: "%.2f s", Double(took.components.attoseconds) / 1e18 + Double(took.components.seconds)))"
}

/// One order's bytes split around its id, so SQL can write a distinct id into each copy.
func template(flight: FlightID, seat: String, device: String, currency: String) throws -> (Data, Data) {
    let marker = UUID(uuidString: "ABCDEF01-2345-4678-9ABC-DEF012345678")!
    let order = Order(
        id: marker, revision: 1, flight: flight, seat: try Seat(seat),
        lineItems: [
            LineItem(item: Item(name: "Coffee", unitPrice: 350), count: 1),
            LineItem(item: Item(name: "Sandwich", unitPrice: 690), count: 1),
        ], currency: currency, createdAt: Date(), device: device)
    let bytes = try RecordCoding.encode(order)
    let text = Data(marker.uuidString.utf8)
    guard let range = bytes.range(of: text) else {
        fatalError("the order's id is not where the benchmark expects it (as its 36-character text)")
    }
    return (bytes[..<range.lowerBound], bytes[range.upperBound...])
}

func build() throws {
    try? FileManager.default.removeItem(at: directory)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    chmod(directory.path, 0o700)
    try SQLiteStore(path: storePath, logger: logger).close()
    let queue = try DatabaseQueue(path: storePath)
    let started = ContinuousClock.now
    try queue.writeWithoutTransaction { db in
        try db.execute(
            sql: """
                PRAGMA synchronous = OFF; PRAGMA cache_size = -262144;
                DROP INDEX orders_id; DROP INDEX orders_flight; DROP INDEX scans_id;
                DROP INDEX scans_flight_tag; DROP INDEX scans_flight_device;
                """)
    }
    // The id inside each order's bytes: unique per flight (n) and flight (f), upper-case UUID text.
    let idText = "printf('%08X-%04X-4%03X-8%03X-%012X', ?, 0, 0, 0, n)"
    let counter = "WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n + 1 < ?)"
    func fill(_ flight: FlightID, index: Int, orders: Int, bags: Int, missingEvery: Int, landed: Bool) throws {
        let currency = index % 3 == 0 ? "USD" : "EUR"
        let cart = "cart-\(index % 50)"
        let ramp = "ramp-\(index % 50)"
        try queue.inTransaction { db in
            try db.execute(
                sql: "INSERT OR IGNORE INTO flights (flight, currency) VALUES (?, ?)",
                arguments: [flight.rawValue, currency])
            for seatIndex in 0..<seatsPerFlight {
                let seat = "\(1 + seatIndex / 6)\(["A", "B", "C", "D", "E", "F"][seatIndex % 6])"
                let (pre, post) = try template(flight: flight, seat: seat, device: cart, currency: currency)
                let share = orders / seatsPerFlight + (seatIndex < orders % seatsPerFlight ? 1 : 0)
                guard share > 0 else { continue }
                try db.execute(
                    sql: """
                        \(counter)
                        INSERT INTO orders (id, revision, flight, seat, device, record)
                        SELECT randomblob(16), 1, ?, ?, ?, CAST(? || \(idText) || ? AS BLOB) FROM c
                        """,
                    arguments: [share, flight.rawValue, seat, cart, pre, index * 16 + seatIndex, post])
            }
            let base = Date().timeIntervalSinceReferenceDate - 3_600
            // The origin scans about to be inserted come after this rowid (no index is there to find them).
            let firstRow = try Int64.fetchOne(db, sql: "SELECT coalesce(max(rowid), 0) FROM scans") ?? 0
            try db.execute(
                sql: """
                    \(counter)
                    INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
                    SELECT randomblob(16), ?, randomblob(16), 0, ? + n * 0.01, 'DZMU', 12.5 + (n % 20), ? FROM c
                    """,
                arguments: [bags, flight.rawValue, base, ramp])
            if landed {
                try db.execute(
                    sql: """
                        INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
                        SELECT randomblob(16), flight, tag, 1, scanned_at + 7200, owner, weight, ?
                        FROM scans WHERE rowid > ? AND rowid % ? != 0
                        """,
                    arguments: ["ramp-dest-\(index % 50)", firstRow, missingEvery])
            }
            return .commit
        }
    }
    for index in 0..<flightCount {
        let flight = try flight(index)
        // Today's flights: a third still in the air; earlier ones landed with one bag in 250 missing.
        let landed = flight.date != today || index % 3 != 0
        try fill(flight, index: index, orders: ordersPerFlight, bags: bagsPerFlight, missingEvery: 250, landed: landed)
        if index % 500 == 499 { print("  \(index + 1) flights (\(elapsed(started)))") }
    }
    try fill(bigFlight, index: 9_999, orders: bigOrders, bags: bigBags, missingEvery: bigBags / 1_000, landed: true)
    print("  rows inserted (\(elapsed(started)))")
    try queue.inTransaction { db in
        for device in 0..<50 {
            for name in ["cart-\(device)", "ramp-\(device)", "ramp-dest-\(device)"] {
                try db.execute(
                    sql: """
                        INSERT OR IGNORE INTO devices (device, last_sync, batches, records, new_records, duplicates)
                        VALUES (?, ?, 100, 100000, 100000, 0)
                        """,
                    arguments: [name, Date().timeIntervalSince1970 - Double(device * 60)])
            }
        }
        return .commit
    }
    try queue.writeWithoutTransaction { db in
        try db.execute(
            sql: """
                CREATE UNIQUE INDEX orders_id ON orders(id);
                CREATE INDEX orders_flight ON orders(flight);
                CREATE UNIQUE INDEX scans_id ON scans(id);
                CREATE INDEX scans_flight_tag ON scans(flight, tag, point);
                CREATE INDEX scans_flight_device ON scans(flight, device);
                PRAGMA wal_checkpoint(TRUNCATE);
                """)
    }
    try queue.close()
    print("  indexes built (\(elapsed(started)))")
}

// MARK: PostgreSQL

/// Builds the same store in database `databaseName` of `pgServer`: the schema made by the store itself, then rows by
/// set-based SQL (each order's bytes from a template per flight and seat, its id written in by SQL), the indexes and
/// primary keys built after, then VACUUM ANALYZE (index-only scans need the visibility map).
func buildPostgres(_ pg: PostgresCopy) throws -> String {
    let url = pg.createDatabase(databaseName)
    try StoreLocation(url, home: home).open(create: true, logger: logger).close()
    let connection = pg.connect(database: databaseName)
    defer { try? connection.close().wait() }
    let started = ContinuousClock.now
    for statement in [
        "SET maintenance_work_mem = '512MB'", "SET synchronous_commit = off",
        "DROP INDEX orders_flight", "DROP INDEX orders_device_flight", "DROP INDEX scans_flight_tag",
        "DROP INDEX scans_flight_device",
        "ALTER TABLE orders DROP CONSTRAINT orders_pkey", "ALTER TABLE scans DROP CONSTRAINT scans_pkey",
        """
        CREATE TEMP TABLE plan (flight text COLLATE "C", idx int, seat text COLLATE "C", seat_idx int, share int,
            device text COLLATE "C", pre bytea, post bytea)
        """,
        """
        CREATE TEMP TABLE flight_plan (flight text COLLATE "C", idx int, currency text, bags int, missing_every int,
            landed boolean, ramp text, dest text)
        """,
    ] { pg.run(connection, statement) }
    func hex(_ data: Data) -> String { "'\\x" + data.map { String(format: "%02x", $0) }.joined() + "'::bytea" }
    var plans: [String] = []
    var flights: [String] = []
    func plan(_ flight: FlightID, index: Int, orders: Int, bags: Int, missingEvery: Int, landed: Bool) throws {
        let currency = index % 3 == 0 ? "USD" : "EUR"
        let cart = "cart-\(index % 50)"
        flights.append(
            "('\(flight.rawValue)', \(index), '\(currency)', \(bags), \(missingEvery), \(landed), 'ramp-\(index % 50)', "
                + "'ramp-dest-\(index % 50)')")
        for seatIndex in 0..<seatsPerFlight {
            let seat = "\(1 + seatIndex / 6)\(["A", "B", "C", "D", "E", "F"][seatIndex % 6])"
            let share = orders / seatsPerFlight + (seatIndex < orders % seatsPerFlight ? 1 : 0)
            guard share > 0 else { continue }
            let (pre, post) = try template(flight: flight, seat: seat, device: cart, currency: currency)
            plans.append(
                "('\(flight.rawValue)', \(index), '\(seat)', \(seatIndex), \(share), '\(cart)', \(hex(Data(pre))), "
                    + "\(hex(Data(post))))")
        }
        if plans.count >= 600 {
            pg.run(connection, "INSERT INTO plan VALUES " + plans.joined(separator: ", "))
            plans = []
        }
    }
    for index in 0..<flightCount {
        let flight = try flight(index)
        try plan(
            flight, index: index, orders: ordersPerFlight, bags: bagsPerFlight, missingEvery: 250,
            landed: flight.date != today || index % 3 != 0)
    }
    try plan(bigFlight, index: 9_999, orders: bigOrders, bags: bigBags, missingEvery: bigBags / 1_000, landed: true)
    if !plans.isEmpty { pg.run(connection, "INSERT INTO plan VALUES " + plans.joined(separator: ", ")) }
    for chunk in stride(from: 0, to: flights.count, by: 1_000) {
        pg.run(
            connection,
            "INSERT INTO flight_plan VALUES " + flights[chunk..<min(chunk + 1_000, flights.count)].joined(separator: ", "))
    }
    let base = Date().timeIntervalSinceReferenceDate - 3_600
    for (what, statement) in [
        ("flights", "INSERT INTO flights (flight, currency) SELECT flight, currency FROM flight_plan"),
        (
            "orders",
            """
            INSERT INTO orders (id, revision, flight, seat, device, record)
            SELECT gen_random_uuid(), 1, p.flight, p.seat, p.device,
                p.pre || convert_to(upper(lpad(to_hex(p.idx * 16 + p.seat_idx), 8, '0')) || '-0000-4000-8000-'
                    || upper(lpad(to_hex(n), 12, '0')), 'UTF8') || p.post
            FROM plan p, generate_series(0, p.share - 1) AS n
            """
        ),
        (
            "origin scans",
            """
            INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
            SELECT gen_random_uuid(), f.flight, md5(f.flight || ':' || n)::uuid, 0, \(base) + n * 0.01, 'DZMU',
                12.5 + (n % 20), f.ramp
            FROM flight_plan f, generate_series(0, f.bags - 1) AS n
            """
        ),
        (
            "destination scans",
            """
            INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
            SELECT gen_random_uuid(), f.flight, md5(f.flight || ':' || n)::uuid, 1, \(base) + n * 0.01 + 7200,
                'DZMU', 12.5 + (n % 20), f.dest
            FROM flight_plan f, generate_series(0, f.bags - 1) AS n WHERE f.landed AND n % f.missing_every != 0
            """
        ),
        (
            "devices",
            """
            INSERT INTO devices (device, last_sync, batches, records, new_records, duplicates)
            SELECT name, \(Date().timeIntervalSince1970) - d * 60, 100, 100000, 100000, 0
            FROM generate_series(0, 49) AS d,
                LATERAL (VALUES ('cart-' || d), ('ramp-' || d), ('ramp-dest-' || d)) AS v(name)
            ON CONFLICT DO NOTHING
            """
        ),
    ] {
        pg.run(connection, statement)
        print("  \(what) inserted (\(elapsed(started)))")
    }
    for statement in [
        "ALTER TABLE orders ADD PRIMARY KEY (id)", "ALTER TABLE scans ADD PRIMARY KEY (id)",
        "CREATE INDEX orders_flight ON orders (flight, seat)",
        "CREATE INDEX orders_device_flight ON orders (device, flight) INCLUDE (id, revision)",
        "CREATE INDEX scans_flight_tag ON scans (flight, tag, point)",
        "CREATE INDEX scans_flight_device ON scans (flight, device)",
    ] { pg.run(connection, statement) }
    print("  indexes built (\(elapsed(started)))")
    pg.run(connection, "VACUUM ANALYZE")
    print("  vacuumed and analysed (\(elapsed(started)))")
    return url
}

let storeSetting: String
if let pgServer {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    chmod(directory.path, 0o700)
    let check = pgServer.connect()
    let exists = pgServer.value(check, "SELECT 1::text FROM pg_database WHERE datname = '\(databaseName)'") != nil
    closeQuietly(check)
    if !reuse || !exists {
        print("building the store in database \(databaseName) of \(pgServer.shown)")
        storeSetting = try buildPostgres(pgServer)
    } else {
        storeSetting = pgServer.url(database: databaseName)
    }
} else {
    if !reuse || !FileManager.default.fileExists(atPath: storePath) {
        print("building the store in \(directory.path)")
        try build()
    }
    storeSetting = storePath
}

// MARK: Measure

guard let store = try StoreLocation(storeSetting, home: home).open(create: false, logger: logger) as? any ConsoleReading
else { fatalError("the store cannot serve the console") }
let orderCount: Int
let scanCount: Int
let middleTag: UUID
if let pgServer {
    let connection = pgServer.connect(database: databaseName)
    orderCount = pgServer.integer(connection, "SELECT count(*) FROM orders")
    scanCount = pgServer.integer(connection, "SELECT count(*) FROM scans")
    let size = pgServer.value(connection, "SELECT pg_size_pretty(pg_database_size(current_database()))") ?? "?"
    print(
        "store (PostgreSQL \(pgServer.setting("server_version"))): \(orderCount) orders + \(scanCount) scans = "
            + "\(orderCount + scanCount) records, \(size); flights: \(try flightsRead(store))")
    middleTag = UUID(
        uuidString: pgServer.value(
            connection,
            "SELECT tag::text FROM scans WHERE flight = '\(bigFlight.rawValue)' ORDER BY tag LIMIT 1 OFFSET \(bigBags / 2)")!
    )!
    closeQuietly(connection)
} else {
    (orderCount, scanCount) = try DatabaseQueue(path: storePath).read { db in
        (try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") ?? 0, try Int.fetchOne(db, sql: "SELECT count(*) FROM scans") ?? 0)
    }
    let size = (try? FileManager.default.attributesOfItem(atPath: storePath)[.size] as? Int) ?? 0
    print(
        "store: \(orderCount) orders + \(scanCount) scans = \(orderCount + scanCount) records, "
            + "\(size / 1_000_000) MB; flights: \(try flightsRead(store))")
    middleTag = try DatabaseQueue(path: storePath).read { db in
        try UUID.fetchOne(
            db, sql: "SELECT tag FROM scans WHERE flight = ? ORDER BY tag LIMIT 1 OFFSET ?",
            arguments: [bigFlight.rawValue, scanCount > 0 ? bigBags : 0])!
    }
}
let big = try store.consoleSummary(flight: bigFlight)
print("big flight \(bigFlight): \(big.bags.total) bags, \(big.bags.missing) missing, \(big.orders) orders")
if let sqlite = store as? SQLiteStore {
    print("\nEXPLAIN QUERY PLAN")
    for (name, plan) in try sqlite.consoleQueryPlans() { print("  \(name): \(plan.joined(separator: " | "))") }
}
let missingTag = try store.consoleBags(flight: bigFlight, status: .missing, after: nil, limit: 1).bags.first!.bag.tagID
try store.close()

var configuration = AggregatorConfiguration()
configuration.insecure = true
configuration.store = storeSetting
configuration.dataEndpoint = "tcp://127.0.0.1:*"
configuration.acksEndpoint = "tcp://127.0.0.1:*"
configuration.console = "127.0.0.1:0"
configuration.receiptsIntervalSeconds = 3_600
var quiet = Logger(label: "console-benchmark")
quiet.logLevel = .error
let server = try AggregatorServer(home: home, configuration: configuration, logger: quiet)
Task.detached { try? await server.run() }
let console = server.consoleEndpoint!
// The console answers only with its token (made in the home at start).
let token = try String(contentsOf: home.directory.appendingPathComponent("console.token"), encoding: .utf8)
    .trimmingCharacters(in: .whitespacesAndNewlines)
// --settle S: wait S seconds before timing, as an operator opens the board a while after `serve` started (the console
// reads today's flights' totals in the background at start).
let settle = number("settle", 0)
if settle > 0 { try await Task.sleep(for: .seconds(settle)) }
let bigQuoted = bigFlight.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
let small = try flight(0).rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
let pages: [(String, String)] = [
    ("board: flights, today first", "/api/flights"),
    ("board: today's problem flights", "/api/flights?problems=1"),
    ("board: page 60 (all dates)", "/api/flights?page=60"),
    ("board: search", "/api/flights?q=ZA9999"),
    ("flight 600k bags: missing first", "/api/flight?flight=\(bigQuoted)"),
    ("flight 600k bags: arrived, page at 300,000", "/api/flight?flight=\(bigQuoted)&status=arrived&after=\(middleTag)"),
    ("flight 600k bags: all, page at 300,000", "/api/flight?flight=\(bigQuoted)&status=all&after=\(middleTag)"),
    ("flight 600k bags: in transit (none)", "/api/flight?flight=\(bigQuoted)&status=in-transit"),
    ("a flight of 500 bags", "/api/flight?flight=\(small)"),
    ("devices", "/api/devices"),
    ("bag lookup (a missing bag of the big flight)", "/api/bag?tag=\(missingTag)"),
    ("bag lookup (unknown tag)", "/api/bag?tag=\(UUID())"),
    ("receipt (a seat of 2,500 orders)", "/api/receipt?flight=\(bigQuoted)&seat=1A"),
    ("receipt (a seat of 150 orders)", "/api/receipt?flight=\(small)&seat=1A"),
    ("page HTML", "/"),
]
print("\nanswer times over HTTP, \(runs) runs each (ms): min / median / max, bytes")
for (name, path) in pages {
    var times: [Double] = []
    var bytes = 0
    var status = 0
    for _ in 0..<runs {
        let start = ContinuousClock.now
        var request = URLRequest(url: URL(string: "http://\(console)\(path)")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        let duration = ContinuousClock.now - start
        times.append(Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15)
        bytes = data.count
        status = (response as? HTTPURLResponse)?.statusCode ?? 0
    }
    times.sort()
    print(
        String(
            format: "  %-46@ %7.1f %7.1f %7.1f  %8d%@", name as NSString, times[0], times[times.count / 2],
            times[times.count - 1], bytes, (status == 200 ? "" : "  status \(status)") as NSString))
}
// Live: 2,000 more scans of the big flight stored (1,000 arrivals, 1,000 new bags), then its page and the board
// again, three rounds: the kept counts catch up with the new scans instead of counting 1.2 million index entries.
var afterTimes: [String: [Double]] = [:]
let livePages = [("after 2,000 new scans: flight 600k bags", "/api/flight?flight=\(bigQuoted)"), ("after 2,000 new scans: board", "/api/flights")]
for _ in 0..<3 {
    if let pgServer {
        let connection = pgServer.connect(database: databaseName)
        for sql in [
            """
            INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
            SELECT gen_random_uuid(), flight, tag, 1, scanned_at + 7300, owner, weight, 'ramp-late'
            FROM scans WHERE flight = '\(bigFlight.rawValue)' AND point = 0 LIMIT 1000
            """,
            """
            INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
            SELECT gen_random_uuid(), flight, gen_random_uuid(), 0, scanned_at, owner, weight, 'ramp-late'
            FROM scans WHERE flight = '\(bigFlight.rawValue)' AND point = 0 LIMIT 1000
            """,
        ] { pgServer.run(connection, sql) }
        closeQuietly(connection)
    } else {
        try DatabaseQueue(path: storePath).write { db in
            try db.execute(
                sql: """
                    INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
                    SELECT randomblob(16), flight, tag, 1, scanned_at + 7300, owner, weight, 'ramp-late'
                    FROM scans INDEXED BY scans_flight_tag WHERE flight = ? AND point = 0 LIMIT 1000;
                    INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
                    SELECT randomblob(16), flight, randomblob(16), 0, scanned_at, owner, weight, 'ramp-late'
                    FROM scans INDEXED BY scans_flight_tag WHERE flight = ? AND point = 0 LIMIT 1000;
                    """, arguments: [bigFlight.rawValue, bigFlight.rawValue])
        }
    }
    for (name, path) in livePages {
        let start = ContinuousClock.now
        var request = URLRequest(url: URL(string: "http://\(console)\(path)")!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        _ = try await URLSession.shared.data(for: request)
        let duration = ContinuousClock.now - start
        afterTimes[name, default: []].append(
            Double(duration.components.seconds) * 1_000 + Double(duration.components.attoseconds) / 1e15)
    }
}
for (name, _) in livePages {
    let times = afterTimes[name]!.sorted()
    print(String(format: "  %-46@ %7.1f %7.1f %7.1f  (3 rounds)", name as NSString, times[0], times[1], times[2]))
}
server.stop()
await server.finished()
