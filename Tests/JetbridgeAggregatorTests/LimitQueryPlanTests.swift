import Foundation
import GRDB
import JetbridgeModel
@testable import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

/// Issue 23 item 5: no flight-limit check may scan a table (SQLite had no index on `scans.flight`, and the count per
/// new device and flight read all of `scans`). Each statement the limits add is planned here, on both engines, against
/// a `device_flights` of 200,000 rows: only index searches.
@Suite("Store rule: the flight limits' query plans")
struct LimitQueryPlanTests {
    /// 1,000 devices × 200 flights of counters.
    static let fill = """
        INSERT INTO device_flights (device, flight, records, first_stored_at)
        SELECT 'd-' || d, 'ZA' || f || '/2026-11-21', 10, d * 10.0 + f
        FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) SELECT i AS d FROM n) AS ds,
            (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200) SELECT i AS f FROM n) AS fs
        """

    @Test func sqliteSearchesTheCountersByIndex() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        try fixture.open().close()
        let queue = try DatabaseQueue(path: fixture.storePath)
        try queue.write { db in
            try db.execute(sql: Self.fill)
            try db.execute(sql: "ANALYZE")
        }
        let statements: [(String, StatementArguments)] = [
            (SQLiteStore.deviceFlightSQL, ["d-7", "ZA9/2026-11-21"]),
            (SQLiteStore.deviceWindowSQL, ["d-7", 0.0]),
            (SQLiteStore.addDeviceFlightSQL, ["d-7", "ZA9/2026-11-21", 1, 0.0, 0, 0]),
        ]
        for (sql, arguments) in statements {
            let plan = try queue.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0[3] as String }
            }
            print("SQLite: \(sql.split(separator: "\n").first!) → \(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN") }, "\(sql): \(plan)")
            if !sql.hasPrefix("INSERT") {
                #expect(plan.contains { $0.hasPrefix("SEARCH device_flights USING") }, "\(sql): \(plan)")
            }
        }
    }

    @Test(.enabled(if: TestPostgres.enabled, "JETBRIDGE_TEST_POSTGRES is not set"))
    func postgresSearchesTheCountersByIndex() async throws {
        try await onOwnThread {
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            try PostgresStore(url: database.url, logger: Logger(label: "test")).close()
            try TestPostgres.admin(database.url, Self.fill)
            try TestPostgres.admin(database.url, "ANALYZE device_flights")
            let connection = try TestPostgres.connect(database.url)
            defer { try? connection.close().wait() }
            let queries: [PostgresQuery] = [
                PostgresStore.deviceWindows(["d-7", "d-8"], after: 0),
                PostgresStore.addDeviceFlights(
                    [
                        FlightIncrement(pair: DeviceFlight(device: "d-7", flight: "ZA9/2026-11-21"), records: 1),
                        FlightIncrement(pair: DeviceFlight(device: "d-7", flight: "ZA999/2026-11-21"), records: 1),
                    ], at: 0),
            ]
            for query in queries {
                var explain = query
                explain.sql = "EXPLAIN " + query.sql
                let rows = try connection.query(explain, logger: Logger(label: "test")).wait()
                let plan = try rows.map { try $0.decode(String.self) }
                print("PostgreSQL: \(plan.joined(separator: " | "))")
                #expect(!plan.contains { $0.contains("Seq Scan on device_flights") }, "\(plan)")
                #expect(
                    plan.contains { $0.contains("Index") && $0.contains("device_flights") }
                        || plan.contains { $0.contains("Conflict Arbiter Indexes: device_flights_pkey") }, "\(plan)")
            }
        }
    }
}
