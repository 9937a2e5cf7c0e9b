import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

/// One engine's store for a test, with direct reads of its tables. SQLite always; PostgreSQL when the tests have a
/// server (`TestPostgres`).
final class EngineFixture: @unchecked Sendable {
    let name: String
    private(set) var store: any StoreWriter
    private let sqlite: Fixture?
    private let postgres: FreshDatabase?

    private init(name: String, sqlite: Fixture?, postgres: FreshDatabase?) throws {
        self.name = name
        self.sqlite = sqlite
        self.postgres = postgres
        if let sqlite {
            store = try sqlite.open()
        } else {
            store = try PostgresStore(url: postgres!.url, logger: Logger(label: "test"))
        }
    }

    static func sqlite() throws -> EngineFixture { try EngineFixture(name: "SQLite", sqlite: Fixture(), postgres: nil) }

    static func postgres() throws -> EngineFixture {
        try EngineFixture(name: "PostgreSQL", sqlite: nil, postgres: TestPostgres.freshDatabase())
    }

    /// The engines these tests run on: SQLite, and PostgreSQL when enabled (in CI without a server: fails).
    static var enabled: [@Sendable () throws -> EngineFixture] {
        TestPostgres.enabled ? [sqlite, postgres] : [sqlite]
    }

    /// The PostgreSQL database, if this is that engine.
    var database: FreshDatabase? { postgres }

    /// A second store on the same database (PostgreSQL: another connection, as a second aggregator).
    func another() throws -> any StoreWriter {
        if let sqlite { return try sqlite.open() }
        return try PostgresStore(url: postgres!.url, logger: Logger(label: "test"))
    }

    /// Closes the store and opens it again (migrating what it lacks).
    func reopen() throws {
        try store.close()
        store = try another()
    }

    /// Runs SQL on a connection of its own.
    func execute(_ sql: String) throws {
        if let sqlite {
            try DatabaseQueue(path: sqlite.storePath).write { try $0.execute(sql: sql) }
        } else {
            try TestPostgres.admin(postgres!.url, sql)
        }
    }

    /// Rows of `sql` (text, integer or real columns), each as its columns joined by spaces.
    func rows(_ sql: String, columns: Int) throws -> [String] {
        if let sqlite {
            return try DatabaseQueue(path: sqlite.storePath).read { db in
                try Row.fetchAll(db, sql: sql).map { row in
                    (0..<columns).map { column -> String in
                        switch (row[column] as DatabaseValue).storage {
                        case .string(let text): text
                        case .int64(let number): "\(number)"
                        case .double(let number): "\(number)"
                        case .null: "NULL"
                        case .blob: "BLOB"
                        }
                    }.joined(separator: " ")
                }
            }
        }
        let connection = try TestPostgres.connect(postgres!.url)
        defer { try? connection.close().wait() }
        return try connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test")).wait().map { row in
            try row.makeRandomAccess().map { cell -> String in
                guard cell.bytes != nil else { return "NULL" }
                switch cell.dataType {
                case .int8, .int4, .int2: return "\(try cell.decode(Int.self))"
                case .float8: return "\(try cell.decode(Double.self))"
                default: return try cell.decode(String.self)
                }
            }.joined(separator: " ")
        }
    }

    /// `device flight records first_stored_at` per counter row, in key order.
    func counters() throws -> [String] {
        try rows(
            "SELECT device, flight, records, first_stored_at FROM device_flights ORDER BY device, flight", columns: 4)
    }

    /// `device flight records` from the stored rows themselves.
    func recount() throws -> [String] {
        try rows(
            """
            SELECT device, flight, CAST(sum(n) AS BIGINT) FROM (
                SELECT device, flight, count(*) AS n FROM orders GROUP BY device, flight
                UNION ALL SELECT device, flight, count(*) AS n FROM scans GROUP BY device, flight
            ) AS stored GROUP BY device, flight ORDER BY device, flight
            """, columns: 3)
    }

    /// The counters without their times, to compare with ``recount()``.
    func counts() throws -> [String] {
        try counters().map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
    }

    func remove() {
        try? store.close()
        sqlite?.remove()
        postgres?.drop()
    }
}

/// Runs `body` on each enabled engine, on a thread of its own (the stores block), and returns what it saw per
/// engine, by name; the test compares on its own task.
func onEachEngine<T: Sendable>(_ body: @escaping @Sendable (EngineFixture) throws -> T) async throws -> [(String, T)] {
    var results: [(String, T)] = []
    for make in EngineFixture.enabled {
        let result = try await onOwnThread { () throws -> (String, T) in
            let engine = try make()
            defer { engine.remove() }
            return (engine.name, try body(engine))
        }
        results.append(result)
    }
    return results
}

/// One outcome as a line: `stored N+M` (new + duplicates), `rejected @index`, or `limited kind flight count+adding/limit
/// after S`.
func line(_ outcome: BatchOutcome) -> String {
    if let rejection = outcome.rejection { return "rejected @\(rejection.index)" }
    if let limit = outcome.limit {
        return
            "limited \(limit.kind.rawValue) \(limit.flight) \(limit.count)+\(limit.adding)/\(limit.limit) after \(Int(limit.retryAfter))"
    }
    return "stored \(outcome.new)+\(outcome.duplicates)"
}

func lines(_ outcomes: [BatchOutcome]) -> [String] { outcomes.map(line) }

let flightC = try! FlightID("ZA103/2026-11-21")
let flightD = try! FlightID("ZA104/2026-11-21")

/// `limits` for one device, none for the others.
func only(_ device: String, recordsPerFlight: Int = .max, flightsPerDay: Int = .max) -> StoreLimits {
    StoreLimits(
        default: .unlimited,
        devices: [device: DeviceFlightLimits(recordsPerFlight: recordsPerFlight, flightsPerDay: flightsPerDay)])
}

/// Orders `ids` (cart-1's, or the batch's device's) on `flight`.
func orderRange(_ ids: ClosedRange<Int>, flight: FlightID = flightA) -> [JetbridgeModel.Record] {
    ids.map { order($0, flight: flight) }
}

/// The per-device flight limits as a store rule (issue 23 items 5, 6 and 8; issue 24 item 3): checked inside `apply`
/// against the `device_flights` counters, in the same transaction, on both engines.
@Suite("Store rule: per-device flight limits")
struct FlightLimitTests {
    @Test func theLimitIsReachedExactlyAndNeverPassedWithinAGroupAndAcrossGroups() async throws {
        let limits = only("cart-1", recordsPerFlight: 10)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            var seen: [[String]] = []
            seen.append(
                lines(
                    try store.apply(
                        [
                            batch("cart-1", 1, orderRange(1...6)), batch("cart-2", 1, orderRange(100...120)),
                            batch("cart-1", 7, orderRange(7...10)), batch("cart-1", 11, orderRange(11...11)),
                        ], at: date(0), limits: limits)))
            seen.append(
                lines(
                    try store.apply(
                        [
                            batch("cart-1", 12, orderRange(12...12)),
                            batch("cart-1", 13, orderRange(13...13, flight: flightB)),
                        ],
                        at: date(1), limits: limits)))
            seen.append([
                "\(try store.orders(flight: flightA).filter { $0.device == "cart-1" }.count)",
                "\(try store.recordCount(device: "cart-1", flight: flightA.rawValue))",
            ])
            return seen
        }) {
            #expect(
                seen == [
                    [
                        "stored 6+0", "stored 21+0", "stored 4+0",
                        "limited recordsPerFlight ZA101/2026-11-21 10+1/10 after 300",
                    ],
                    ["limited recordsPerFlight ZA101/2026-11-21 10+1/10 after 300", "stored 1+0"],
                    ["10", "10"],
                ], "\(engine)")
        }
    }

    /// Issue 23 item 8: the network thread's limiter counted the store and what it had queued since, and let 100,700
    /// bags through against 100,000. In the store a group that would pass the limit is cut at the batch that passes
    /// it, and the batches after it that add to the flight are limited with it (in the same round).
    @Test func batchesArrivingTogetherCannotOverrunTheLimit() async throws {
        let limits = only("ramp-1", recordsPerFlight: 1_000)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            let first = (1...950).map { scan($0, tag: $0) }
            _ = try store.apply([batch("ramp-1", 1, first)], at: date(0), limits: limits)
            // Eight batches of ten new scans, as a device's window of batches in flight arrives in one group.
            let group = (0..<8).map { (b: Int) -> IncomingBatch in
                let first = 951 + 10 * b
                let scans: [JetbridgeModel.Record] = (first..<first + 10).map { scan($0, tag: $0) }
                return batch("ramp-1", UInt64(first), scans)
            }
            let outcomes = try store.apply(group, at: date(1), limits: limits)
            return (lines(outcomes), try store.bags(flight: flightA).count, try engine.counts())
        }) {
            #expect(
                seen.0
                    == ["stored 10+0", "stored 10+0", "stored 10+0", "stored 10+0", "stored 10+0"]
                    + Array(repeating: "limited recordsPerFlight ZA101/2026-11-21 1000+10/1000 after 300", count: 3),
                "\(engine)")
            #expect(seen.1 == 1_000, "\(engine)")
            #expect(seen.2 == ["ramp-1 ZA101/2026-11-21 1000"], "\(engine)")
        }
    }

    @Test func resendsNeverCount() async throws {
        let limits = only("cart-1", recordsPerFlight: 5)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            var seen: [String] = []
            // Within one group: the second batch resends the first's three and adds two.
            seen += lines(
                try store.apply(
                    [batch("cart-1", 1, orderRange(1...3)), batch("cart-1", 1, orderRange(1...5))], at: date(0),
                    limits: limits))
            // At the limit: a resend is stored (all duplicates), a new record is not.
            seen += lines(
                try store.apply(
                    [
                        batch("cart-1", 1, orderRange(1...5)), batch("cart-1", 6, orderRange(6...6)),
                        batch("cart-1", 3, orderRange(3...5)),
                    ], at: date(1), limits: limits))
            seen.append(contentsOf: try engine.counts())
            return seen
        }) {
            #expect(
                seen == [
                    "stored 3+0", "stored 2+3", "stored 0+5",
                    "limited recordsPerFlight ZA101/2026-11-21 5+1/5 after 300", "stored 0+3",
                    "cart-1 ZA101/2026-11-21 5",
                ], "\(engine)")
        }
    }

    @Test func revisionsAreNoNewRecords() async throws {
        let limits = only("cart-1", recordsPerFlight: 2)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            var seen: [String] = []
            seen += lines(try store.apply([batch("cart-1", 1, orderRange(1...2))], at: date(0), limits: limits))
            // A higher revision changes the store (new 1) but is no new record, also one moving to another flight.
            seen += lines(
                try store.apply(
                    [
                        batch("cart-1", 3, [order(1, revision: 2, lines: [(chips, 1)])]),
                        batch("cart-1", 4, [order(2, revision: 2, flight: flightB)]),
                        batch("cart-1", 5, orderRange(3...3)),
                    ], at: date(1), limits: limits))
            seen.append(contentsOf: try engine.counts())
            return seen
        }) {
            #expect(
                seen == [
                    "stored 2+0", "stored 1+0", "stored 1+0",
                    "limited recordsPerFlight ZA101/2026-11-21 2+1/2 after 300",
                    "cart-1 ZA101/2026-11-21 2",
                ], "\(engine)")
        }
    }

    @Test func aLimitedBatchStoresNothingAndTheRestOfTheGroupIsStored() async throws {
        let limits = only("cart-1", recordsPerFlight: 3)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            let outcomes = try store.apply(
                [
                    batch("cart-1", 1, orderRange(1...2)),
                    batch("cart-1", 3, [order(3, seat: "2A"), order(4), scan(40, tag: 4, device: "cart-1")]),
                    batch("ramp-1", 1, [scan(41, tag: 5)]),
                    batch("cart-1", 6, orderRange(5...5, flight: flightB)),
                ], at: date(0), limits: limits)
            guard let limited = outcomes[1].limit else { throw TestPostgresError("not limited: \(lines(outcomes))") }
            let devices = try store.deviceReport().devices
            return [
                lines(outcomes),
                [limited.reason],
                try store.orders().map { "\(Int($0.id.uuidString.suffix(4))!)" },
                try store.bags().map(\.flight.rawValue),
                devices.map { "\($0.device) \($0.batches) \($0.records) \($0.limited)" },
                try store.receipt(flight: flightA, seat: Seat("2A")) == nil ? [] : ["2A"],
                try engine.counts(),
                try engine.rows("SELECT last_limited_reason FROM devices WHERE limited > 0", columns: 1),
            ]
        }) {
            #expect(
                seen[0] == [
                    "stored 2+0", "limited recordsPerFlight ZA101/2026-11-21 2+3/3 after 300", "stored 1+0",
                    "stored 1+0",
                ], "\(engine)")
            #expect(
                seen[1] == [
                    "device cart-1 has 2 records on flight ZA101/2026-11-21 and this batch adds 3 new; its limit is 3 "
                        + "records per flight (raise recordsPerFlight in the allow list's limits)"
                ], "\(engine)")
            #expect(seen[2] == ["1", "2", "5"], "\(engine)")
            #expect(seen[3] == ["ZA101/2026-11-21"], "\(engine): only ramp-1's bag")
            #expect(seen[4] == ["cart-1 2 3 1", "ramp-1 1 1 0"], "\(engine)")
            #expect(seen[5] == [], "\(engine): the limited order marked no seat")
            #expect(
                seen[6] == ["cart-1 ZA101/2026-11-21 2", "cart-1 ZA102/2026-11-21 1", "ramp-1 ZA101/2026-11-21 1"],
                "\(engine)")
            #expect(seen[7] == [seen[1][0]], "\(engine)")
        }
    }

    @Test func flightsPerDayCountsTheFlightsFirstStoredInTheLast24Hours() async throws {
        let limits = only("cart-1", flightsPerDay: 2)
        let day = 86_400.0
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            var seen: [String] = []
            seen += lines(
                try store.apply([batch("cart-1", 1, orderRange(1...1, flight: flightA))], at: date(0), limits: limits))
            seen += lines(
                try store.apply([batch("cart-1", 2, orderRange(2...2, flight: flightB))], at: date(100), limits: limits)
            )
            // A third flight: the oldest leaves the window in 86,300 s, more than an hour: an hour.
            seen += lines(
                try store.apply([batch("cart-1", 3, orderRange(3...3, flight: flightC))], at: date(200), limits: limits)
            )
            // More records on a flight of the day, or from another device, are no new flight of this device's.
            seen += lines(
                try store.apply(
                    [
                        batch("cart-1", 4, orderRange(4...4, flight: flightA)),
                        batch("cart-2", 1, orderRange(5...5, flight: flightC)),
                    ],
                    at: date(300), limits: limits))
            // Ten seconds before the first flight leaves the window.
            seen += lines(
                try store.apply(
                    [batch("cart-1", 3, orderRange(3...3, flight: flightC))], at: date(day - 10), limits: limits))
            // It has left: one more flight fits, and in the same group a second is one too many.
            seen += lines(
                try store.apply(
                    [
                        batch("cart-1", 3, orderRange(3...3, flight: flightC)),
                        batch("cart-1", 6, orderRange(6...6, flight: flightD)),
                    ],
                    at: date(day + 1), limits: limits))
            seen.append(contentsOf: try engine.counters())
            return seen
        }) {
            let first = date(0).timeIntervalSince1970
            #expect(
                seen == [
                    "stored 1+0", "stored 1+0", "limited flightsPerDay ZA103/2026-11-21 2+1/2 after 3600",
                    "stored 1+0", "stored 1+0", "limited flightsPerDay ZA103/2026-11-21 2+1/2 after 10",
                    "stored 1+0", "limited flightsPerDay ZA104/2026-11-21 2+1/2 after 99",
                    "cart-1 ZA101/2026-11-21 2 \(first)", "cart-1 ZA102/2026-11-21 1 \(first + 100)",
                    "cart-1 ZA103/2026-11-21 1 \(first + day + 1)", "cart-2 ZA103/2026-11-21 1 \(first + 300)",
                ], "\(engine)")
        }
    }

    @Test func aBatchWithMoreNewFlightsThanTheLimitWaitsTheLongestRetry() async throws {
        for (engine, seen) in try await onEachEngine({ engine in
            lines(
                try engine.store.apply(
                    [
                        batch(
                            "ramp-1", 1,
                            [scan(1, tag: 1), scan(2, tag: 2, flight: flightB), scan(3, tag: 3, flight: flightC)])
                    ],
                    at: date(0), limits: only("ramp-1", flightsPerDay: 2)))
        }) {
            #expect(seen == ["limited flightsPerDay ZA101/2026-11-21 0+3/2 after 3600"], "\(engine)")
        }
    }

    /// A limited batch is the earliest verdict of its round like a refused one: a later batch is judged without it.
    /// cart-a's order would have fixed flight C's currency (USD); limited, it fixes nothing, and cart-b's order in
    /// EUR is C's first.
    @Test func aLimitedBatchDoesNotDecideForTheBatchesAfterIt() async throws {
        let limits = only("cart-a", flightsPerDay: 1)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            var seen = lines(try store.apply([batch("cart-a", 1, [order(1)])], at: date(0), limits: limits))
            seen += lines(
                try store.apply(
                    [
                        batch("cart-a", 2, [order(in: "USD", 2, flight: flightC)]),
                        batch("cart-b", 1, [order(in: "EUR", 3, flight: flightC)]),
                    ], at: date(1), limits: limits))
            seen += try store.flightReports(flight: flightC).flights.map(\.currency)
            return seen
        }) {
            #expect(
                seen == ["stored 1+0", "limited flightsPerDay ZA103/2026-11-21 1+1/1 after 3600", "stored 1+0", "EUR"],
                "\(engine)")
        }
    }

    /// Limits and refusals in one group: a batch past a limit is limited (also when one of its records would be
    /// refused: limits come first), a refused batch after a limited one gets its refusal in a later round, and the
    /// batch before them all is stored.
    @Test func refusalsAndLimitsInOneGroupEachGetTheirAnswer() async throws {
        let limits = only("cart-1", recordsPerFlight: 1)
        for (engine, seen) in try await onEachEngine({ engine in
            let store = engine.store
            _ = try store.apply([batch("cart-2", 1, [order(50)])], at: date(0), limits: limits)
            return lines(
                try store.apply(
                    [
                        batch("cart-1", 1, orderRange(1...1)),
                        batch("cart-1", 2, orderRange(2...2)),
                        batch("cart-3", 1, [order(50, revision: 2)]),
                        batch("cart-1", 3, [order(3, flight: flightB), order(in: "EUR", 4, flight: flightB)]),
                        batch("cart-4", 1, [order(6, flight: flightD), order(in: "EUR", 7, flight: flightD)]),
                    ], at: date(1), limits: limits))
        }) {
            #expect(
                seen == [
                    "stored 1+0", "limited recordsPerFlight ZA101/2026-11-21 1+1/1 after 300", "rejected @0",
                    "limited recordsPerFlight ZA102/2026-11-21 0+2/1 after 300", "rejected @1",
                ], "\(engine)")
        }
    }

    @Test func theCountersAreWhatIsStoredAfterRandomGroups() async throws {
        for (engine, seen) in try await onEachEngine({ engine in
            let records = randomRecords(seed: 23, count: 1_200)
            var batches: [IncomingBatch] = []
            for start in stride(from: 0, to: records.count, by: 40) {
                let slice = Array(records[start..<min(start + 40, records.count)])
                let device = slice.first.map {
                    if case .order = $0 { "cart-\(start % 3)" } else { "ramp-\(start % 3)" }
                }!
                batches.append(batch(device, UInt64(start + 1), slice))
            }
            for start in stride(from: 0, to: batches.count, by: 5) {
                _ = try engine.store.apply(Array(batches[start..<min(start + 5, batches.count)]), at: date(0))
            }
            // Resent, regrouped.
            _ = try engine.store.apply(Array(batches.reversed()), at: date(1))
            return (try engine.counts(), try engine.recount())
        }) {
            #expect(!seen.0.isEmpty)
            #expect(seen.0 == seen.1, "\(engine)")
        }
    }

    /// A group over hundreds of flights (the store numbers a group's flights in a table that grows past 32), one
    /// batch on every one of them: each (device, flight) counted once per new record, and flightsPerDay holds.
    @Test func aGroupOverHundredsOfFlightsIsCountedPerFlight() async throws {
        for (engine, seen) in try await onEachEngine({ engine in
            let flights = try (1...300).map { try FlightID("ZC\($0)/2026-11-21") }
            let spread = (0..<600).map { scan($0 + 1, tag: $0 + 1, flight: flights[$0 % flights.count]) }
            let outcomes = try engine.store.apply(
                [
                    batch("ramp-1", 1, spread), batch("ramp-2", 1, Array(spread.prefix(250))),
                    batch("ramp-2", 700, (0..<250).map { scan(5_000 + $0, tag: 5_000 + $0, flight: flights[$0]) }),
                ], at: date(0), limits: only("ramp-2", flightsPerDay: 250))
            return (lines(outcomes), try engine.counts(), try engine.recount())
        }) {
            // ramp-2's first batch is all resends (ramp-1's scans): no new flight; its second adds 250 new flights.
            #expect(seen.0 == ["stored 600+0", "stored 0+250", "stored 250+0"], "\(engine)")
            #expect(seen.1.count == 550, "\(engine)")
            #expect(seen.1.filter { $0.hasPrefix("ramp-1 ") }.allSatisfy { $0.hasSuffix(" 2") }, "\(engine)")
            #expect(seen.1 == seen.2, "\(engine)")
        }
    }

    /// A store from before the counters: the migration counts every stored order and scan per device and flight, as
    /// first stored long ago (0), and the limits hold from there.
    @Test func theMigrationFillsTheCountersFromTheStoredRows() async throws {
        for (engine, seen) in try await onEachEngine({ engine in
            let records = randomRecords(seed: 29, count: 600)
            _ = try engine.store.apply(
                stride(from: 0, to: records.count, by: 50).map {
                    batch("cart-\($0 % 2)", UInt64($0 + 1), Array(records[$0..<min($0 + 50, records.count)]))
                }, at: date(0))
            let kept = try engine.counts()
            // As an earlier version left it: without the counters, nor the kept digests that live in their rows.
            if engine.name == "SQLite" {
                try engine.execute(
                    """
                    DROP TRIGGER orders_digest_stale; DROP TRIGGER orders_digest_deleted;
                    DROP TRIGGER scans_digest_stale; DROP TRIGGER scans_digest_deleted;
                    DROP TABLE device_flights;
                    DELETE FROM grdb_migrations WHERE identifier IN ('device-flights', 'kept-digests')
                    """)
            } else {
                for table in ["orders", "scans"] {
                    try engine.execute("DROP TRIGGER \(table)_digest_stale ON \(table)")
                    try engine.execute("DROP TRIGGER \(table)_digests_truncated ON \(table)")
                }
                try engine.execute("DROP FUNCTION jetbridge_digest_stale(), jetbridge_digests_stale()")
                try engine.execute("DROP TABLE stale_digests")
                try engine.execute("DROP TABLE device_flights")
                try engine.execute("DELETE FROM schema_migrations WHERE version IN (4, 8)")
            }
            try engine.reopen()
            let counters = try engine.counters()
            let recount = try engine.recount()
            let count = try engine.store.recordCount(device: "cart-0", flight: flightA.rawValue)
            let outcomes = try engine.store.apply(
                [batch("cart-0", 9_000, [order(9_001)]), batch("cart-0", 9_001, [order(9_002, flight: flightC)])],
                at: date(10), limits: only("cart-0", recordsPerFlight: count + 1, flightsPerDay: 1))
            return (
                kept, counters, recount, try engine.store.schemaVersion(), lines(outcomes), try engine.counts(),
                try engine.recount()
            )
        }) {
            let (kept, counters, recount, version, outcomes, after, recountAfter) = seen
            #expect(!counters.isEmpty)
            #expect(counters.allSatisfy { $0.hasSuffix(" 0") || $0.hasSuffix(" 0.0") }, "\(engine): \(counters)")
            #expect(counters.map { $0.split(separator: " ").prefix(3).joined(separator: " ") } == kept, "\(engine)")
            #expect(kept == recount, "\(engine)")
            #expect(version == 12, "\(engine)")
            // One more record fits on flight A; flight C is a new flight of the day, and the day's first.
            #expect(outcomes == ["stored 1+0", "stored 1+0"], "\(engine)")
            #expect(after == recountAfter, "\(engine)")
        }
    }
}

@Suite(
    "Store rule: flight limits across aggregators sharing PostgreSQL",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct SharedFlightLimitTests {
    /// Another aggregator holds the counter row (its transaction added 95 records to cart-1's flight A and has not
    /// committed): this store's `apply` waits for it, then counts on top of it.
    @Test func aWriterOfTheSameCounterWaitsAndCountsOnTopOfTheOther() async throws {
        let (outcomes, waited) = try await onOwnThread { () throws -> ([String], Bool) in
            let engine = try EngineFixture.postgres()
            defer { engine.remove() }
            _ = try engine.store.apply([batch("cart-1", 1, orderRange(1...1))], at: date(0))
            let other = try TestPostgres.connect(engine.database!.url)
            defer { try? other.close().wait() }
            let logger = Logger(label: "test")
            _ = try other.query("BEGIN", logger: logger).wait()
            _ = try other.query(
                "UPDATE device_flights SET records = records + 95 WHERE device = 'cart-1' AND flight = \(flightA.rawValue)",
                logger: logger
            ).wait()
            let result = Locked2<Result<[BatchOutcome], any Error>?>(nil)
            let thread = Thread {
                let outcome = Result {
                    try engine.store.apply(
                        [batch("cart-1", 2, orderRange(2...11))], at: date(1),
                        limits: only("cart-1", recordsPerFlight: 100))
                }
                result.mutate { $0 = outcome }
            }
            thread.start()
            try waitUntilBlocking("the store waits for the counter row") {
                try TestPostgres.lockWaiters(engine.database!) > 0
            }
            let waited = result.value == nil
            _ = try other.query("COMMIT", logger: logger).wait()
            try waitUntilBlocking("apply returns") { result.value != nil }
            return (lines(try result.value!.get()), waited)
        }
        #expect(waited)
        #expect(outcomes == ["limited recordsPerFlight ZA101/2026-11-21 96+10/100 after 300"])
    }

    /// Two aggregators store one device's batches at once, on one flight and on new flights: together they never
    /// pass either limit, and the counters are what is stored.
    @Test func twoAggregatorsAtOnceNeverPassALimit() async throws {
        let (stored, flights, counters, recount) = try await onOwnThread {
            () throws -> (Int, Int, [String], [String]) in
            let engine = try EngineFixture.postgres()
            defer { engine.remove() }
            let stores = [engine.store, try engine.another()]
            defer { try? stores[1].close() }
            let limits = only("ramp-1", recordsPerFlight: 100, flightsPerDay: 5)
            let failures = Locked2<[String]>([])
            let stored = Locked2<Int>(0)
            // Each aggregator: 20 batches of 10 new scans on flight A (200 offered, 100 allowed), then 10 batches
            // each on a flight of its own (20 new flights offered, 4 more allowed).
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                do {
                    for b in 0..<20 {
                        let base = 10_000 * (i + 1) + 10 * b
                        let outcome = try stores[i].apply(
                            [batch("ramp-1", UInt64(base), (0..<10).map { scan(base + $0, tag: base + $0) })],
                            at: date(0), limits: limits)[0]
                        stored.mutate { $0 += outcome.new }
                    }
                    for f in 0..<10 {
                        let id = 50_000 + 100 * i + f
                        let flight = try FlightID("ZB\(100 * (i + 1) + f)/2026-11-21")
                        _ = try stores[i].apply(
                            [batch("ramp-1", UInt64(id), [scan(id, tag: id, flight: flight)])], at: date(1),
                            limits: limits)
                    }
                } catch {
                    failures.mutate { $0.append("\(error)") }
                }
            }
            guard failures.value.isEmpty else { throw TestPostgresError("apply failed: \(failures.value)") }
            let flights = try engine.rows("SELECT count(*) FROM device_flights WHERE device = 'ramp-1'", columns: 1)
            return (stored.value, Int(flights[0])!, try engine.counts(), try engine.recount())
        }
        #expect(stored == 100)
        #expect(flights == 5)
        #expect(counters == recount)
    }

    /// The same groups with limits through both engines: the same outcomes, counters and devices report.
    @Test func bothEnginesLimitTheSameBatches() async throws {
        let groups = Self.groups()
        let limits = StoreLimits(
            default: DeviceFlightLimits(recordsPerFlight: 40, flightsPerDay: 3),
            devices: ["cart-0": DeviceFlightLimits(recordsPerFlight: 25, flightsPerDay: 2)])
        let results = try await onEachEngine { engine in
            var outcomes: [[String]] = []
            for (n, group) in groups.enumerated() {
                outcomes.append(lines(try engine.store.apply(group, at: date(Double(n) * 3_600), limits: limits)))
            }
            return (outcomes, try engine.counters(), try engine.store.deviceReport(), try engine.recount())
        }
        try #require(results.count == 2)
        let (expected, actual) = (results[0].1, results[1].1)
        #expect(expected.0.joined().contains { $0.hasPrefix("limited recordsPerFlight") })
        #expect(expected.0.joined().contains { $0.hasPrefix("limited flightsPerDay") })
        #expect(expected.0.joined().contains { $0.hasPrefix("stored") })
        for (n, (a, e)) in zip(actual.0, expected.0).enumerated() { #expect(a == e, "group \(n)") }
        #expect(actual.1 == expected.1)
        #expect(actual.2 == expected.2)
        #expect(expected.1.map { $0.split(separator: " ").prefix(3).joined(separator: " ") } == expected.3)
    }

    /// Random orders and scans of three carts and three ramps over five flights, resends among them, in groups of
    /// one to six batches, an hour apart.
    static func groups() -> [[IncomingBatch]] {
        var rng = SplitMix(state: 31)
        let flights = [flightA, flightB, flightC, flightD, try! FlightID("ZA105/2026-11-21")]
        var batches: [IncomingBatch] = []
        var next = 1
        for n in 0..<60 {
            let device = n % 2 == 0 ? "cart-\(n % 3)" : "ramp-\(n % 3)"
            let flight = flights[Int.random(in: 0..<flights.count, using: &rng)]
            let count = Int.random(in: 1...12, using: &rng)
            let records = (0..<count).map { k -> JetbridgeModel.Record in
                let id = next + k
                return device.hasPrefix("cart") ? order(id, flight: flight) : scan(id, tag: id, flight: flight)
            }
            next += count
            batches.append(batch(device, UInt64(next), records))
            if Int.random(in: 0..<5, using: &rng) == 0 { batches.append(batches.randomElement(using: &rng)!) }
        }
        var groups: [[IncomingBatch]] = []
        var index = 0
        while index < batches.count {
            let size = Int.random(in: 1...6, using: &rng)
            groups.append(Array(batches[index..<min(index + size, batches.count)]))
            index += size
        }
        return groups
    }
}
