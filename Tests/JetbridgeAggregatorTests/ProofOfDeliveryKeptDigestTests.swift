import Foundation
import GRDB
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

/// The kept digests (docs/STORE.md, "Kept digests"): a summary the device agrees with is answered from one row of
/// `device_flights`, so the digest kept there must be exactly what the rows hold whenever it is marked valid, after
/// `apply` (new rows, resends, amendments that move an order to another flight) and after anything that changes or
/// deletes rows behind the store's back. Both engines; the rows and the kept digests are read with plain SQL.
@Suite("Proof of delivery: kept digests")
struct ProofOfDeliveryKeptDigestTests {
    typealias Engine = ProofOfDeliveryServerTests.Engine

    /// A store on `engine` and plain SQL on the same database.
    final class Subject: @unchecked Sendable {
        let store: any StoreWriter
        let fixture: Fixture
        let database: FreshDatabase?
        private let sqlite: DatabaseQueue?
        private let postgres: PostgresConnection?

        init(_ engine: Engine) throws {
            fixture = try Fixture()
            if engine == .postgres {
                let database = try TestPostgres.freshDatabase()
                self.database = database
                store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
                postgres = try TestPostgres.connect(database.url)
                sqlite = nil
            } else {
                database = nil
                store = try fixture.open()
                sqlite = try DatabaseQueue(path: fixture.storePath)
                postgres = nil
            }
        }

        func close() {
            try? store.close()
            try? sqlite?.close()
            try? postgres?.close().wait()
            database?.drop()
            fixture.remove()
        }

        /// Runs a statement as an operator would, outside the store.
        func execute(_ sql: String) throws {
            if let sqlite {
                try sqlite.write { try $0.execute(sql: sql) }
            } else if let postgres {
                _ = try postgres.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test")).wait()
            }
        }

        /// Every pair's kept digest and whether it is valid (on PostgreSQL: marked valid and with no stale mark).
        func kept() throws -> [String: (valid: Bool, summary: DeliverySummary)] {
            let valid =
                sqlite != nil
                ? "digest_valid"
                : "digest_valid AND NOT EXISTS (SELECT 1 FROM stale_digests AS s WHERE s.device = d.device AND s.flight = d.flight)"
            let sql = "SELECT device, flight, held, digest_hi, digest_lo, \(valid) FROM device_flights AS d"
            var result: [String: (Bool, DeliverySummary)] = [:]
            func add(_ device: String, _ flight: String, _ held: Int, _ high: Int64, _ low: Int64, _ valid: Bool) {
                let digest = (UInt64(bitPattern: high) << 32) &+ UInt64(bitPattern: low)
                result["\(device) \(flight)"] = (valid, DeliverySummary(count: held, digest: digest))
            }
            if let sqlite {
                try sqlite.read { db in
                    for row in try Row.fetchAll(db, sql: sql) {
                        add(row[0], row[1], row[2], row[3], row[4], (row[5] as Int) != 0)
                    }
                }
            } else if let postgres {
                for row in try postgres.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test")).wait() {
                    let (device, flight, held, high, low, valid) = try row.decode(
                        (String, String, Int, Int64, Int64, Bool).self)
                    add(device, flight, held, high, low, valid)
                }
            }
            return result
        }

        /// PostgreSQL's stale marks.
        func marks() throws -> Int {
            guard let postgres else { return 0 }
            let rows = try postgres.query("SELECT count(*) FROM stale_digests", logger: Logger(label: "test")).wait()
            return try rows.first?.decode(Int.self) ?? 0
        }

        /// What the rows hold for a device and flight, read by the store from the rows.
        func rows(_ device: String, _ flight: FlightID) throws -> DeliverySummary {
            try store.deliverySummary(device: device, flight: flight.rawValue, expected: nil)
        }

        /// Every valid kept digest is the rows' summary; answers how many pairs are valid.
        @discardableResult
        func checkValidDigestsAreTheRows(_ context: String) throws -> Int {
            var valid = 0
            for (key, entry) in try kept() where entry.valid {
                let parts = key.split(separator: " ")
                let rows = try rows(String(parts[0]), try FlightID(String(parts[1])))
                #expect(entry.summary == rows, "\(context): \(key) keeps \(entry.summary), its rows hold \(rows)")
                valid += 1
            }
            return valid
        }
    }

    static func run<T: Sendable>(_ engine: Engine, _ body: @escaping @Sendable (Subject) throws -> T) async throws -> T {
        try await onOwnThread {
            let subject = try Subject(engine)
            defer { subject.close() }
            return try body(subject)
        }
    }

    @Test(arguments: Engine.allCases)
    func applyKeepsEachPairsDigestExactThroughResendsAndAmendments(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let records = randomRecords(seed: 81, count: 600).map { owned($0, by: "cart-1") }
        try await Self.run(engine) { subject in
            // New pairs start valid and stay exact as groups add to them, resends included.
            for (index, start) in stride(from: 0, to: 300, by: 50).enumerated() {
                let chunk = Array(records[start..<start + 50])
                _ = try subject.store.apply([batch("cart-1", UInt64(index * 50 + 1), chunk)])
                _ = try subject.store.apply([batch("cart-1", UInt64(index * 50 + 1), chunk)])
            }
            // Amendments (higher revisions of stored orders) leave the pair to be read again, never wrong.
            _ = try subject.store.apply([batch("cart-1", 301, Array(records[300...]))])
            // An order moved to another flight by its next revision.
            _ = try subject.store.apply([batch("cart-1", 1_001, [order(5_000, revision: 1, flight: flightA)])])
            _ = try subject.store.apply([batch("cart-1", 1_002, [order(5_000, revision: 2, flight: flightB)])])
            try subject.checkValidDigestsAreTheRows("after apply")
            // Read from the rows once, every pair is valid; later groups keep them so.
            for flight in [flightA, flightB] { _ = try subject.rows("cart-1", flight) }
            #expect(try subject.kept().values.allSatisfy(\.valid))
            _ = try subject.store.apply([
                batch("cart-1", 2_001, (0..<40).map { scan(9_000 + $0, tag: $0, flight: $0 % 2 == 0 ? flightA : flightB, device: "cart-1") })
            ])
            #expect(try subject.checkValidDigestsAreTheRows("after more scans") == 2)
            #expect(try subject.kept().values.allSatisfy(\.valid))
        }
    }

    /// Corrections stored by `apply` (higher revisions, one of them moving its order to another flight) keep the
    /// pairs' digests valid and exact: a sync with corrections confirms from one row, where it read every row of
    /// each corrected pair (sync-benchmark's mix has one correction every 50 orders). A pair made stale by hand stays
    /// stale through them. On SQLite also a group of corrections alone; on PostgreSQL a group that stores new records
    /// of the pair too (it then holds the pair's row locked; a pair it does not lock is marked). Failed before: every
    /// corrected pair was stale.
    @Test(arguments: Engine.allCases)
    func correctionsStoredByApplyKeepThePairsValid(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        try await Self.run(engine) { subject in
            _ = try subject.store.apply([
                batch("cart-1", 1, (0..<20).map { order($0, flight: $0 % 2 == 0 ? flightA : flightB) }),
                batch("cart-2", 1, (100..<110).map { order($0, device: "cart-2") }),
            ])
            #expect(try subject.kept().values.allSatisfy(\.valid))
            // Corrections in the same flight, one moving from A to B, one resent, with new orders of both pairs.
            _ = try subject.store.apply([
                batch("cart-1", 21, [
                    order(0, revision: 2, flight: flightA, lines: [(chips, 1)]),
                    order(2, revision: 3, flight: flightB),
                    order(4, revision: 2, flight: flightA, lines: [(popcorn, 2)]),
                    order(4, revision: 2, flight: flightA, lines: [(popcorn, 2)]),
                    order(1, revision: 2, flight: flightB),
                    order(30, flight: flightA),
                    order(31, flight: flightB),
                ])
            ])
            // An older revision again: no change.
            _ = try subject.store.apply([batch("cart-1", 28, [order(0, revision: 1, flight: flightA)])])
            #expect(try subject.checkValidDigestsAreTheRows("after corrections") == 3)
            #expect(try subject.kept().values.allSatisfy(\.valid))
            #expect(try subject.marks() == 0)
            #expect(try subject.store.deliverySummary(device: "cart-1", flight: flightB.rawValue, expected: nil).count == 12)
            if engine == .sqlite {
                _ = try subject.store.apply([batch("cart-1", 29, [order(6, revision: 2, flight: flightA)])])
                #expect(try subject.checkValidDigestsAreTheRows("after a correction alone") == 3)
                #expect(try subject.kept().values.allSatisfy(\.valid))
            }
            // By hand: cart-2's pair goes stale, and a correction by apply leaves it so.
            try subject.execute("UPDATE orders SET revision = revision + 5 WHERE id = (SELECT id FROM orders WHERE device = 'cart-2' ORDER BY id LIMIT 1)")
            _ = try subject.store.apply([batch("cart-2", 11, [order(101, revision: 2, device: "cart-2"), order(120, device: "cart-2")])])
            let kept = try subject.kept()
            #expect(kept["cart-2 \(flightA.rawValue)"]?.valid == false)
            #expect(kept["cart-1 \(flightA.rawValue)"]?.valid == true)
            try subject.checkValidDigestsAreTheRows("after a hand edit")
        }
    }

    /// A summary that differs from a valid kept digest reads the rows once; asked again while the kept digest stays
    /// as that read left it, it is answered from the digest (one stolen key asking 20 mismatching summaries a second
    /// of a big flight made the store thread read its rows 20 times a second). Shown by a row deleted with the
    /// triggers off, which the first answer counts and the second does not see; a change through `apply` moves the
    /// kept digest, and the rows are read again.
    @Test(arguments: Engine.allCases)
    func aMismatchReadsTheRowsOnceUntilTheKeptDigestChanges(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let scans = (0..<30).map { scan(100 + $0, tag: $0, device: "cart-1") }
        let (first, second, third) = try await Self.run(engine) { subject in
            let store = subject.store
            _ = try store.apply([batch("cart-1", 1, scans)])
            let wrong = DeliverySummary()
            func held() throws -> DeliverySummary {
                try store.deliverySummary(device: "cart-1", flight: flightA.rawValue, expected: wrong)
            }
            let first = try held()
            let id = scans[3].id.uuidString
            if engine == .sqlite {
                try subject.execute(
                    "DROP TRIGGER scans_digest_deleted; DELETE FROM scans WHERE id = x'\(id.replacingOccurrences(of: "-", with: ""))'")
            } else {
                try subject.execute("ALTER TABLE scans DISABLE TRIGGER USER")
                try subject.execute("DELETE FROM scans WHERE id = '\(id)'")
            }
            let second = try held()
            _ = try store.apply([batch("cart-1", 31, [scan(500, tag: 99, device: "cart-1")])])
            return (first, second, try held())
        }
        #expect(first.count == 30)
        #expect(second == first)
        #expect(third.count == 30)
        #expect(third != first)
    }

    /// A device's summary equal to a kept digest that no longer describes the rows would be `confirmed` although the
    /// ground lost records: each change behind the store's back must make the next summary a mismatch. Without the
    /// triggers every `#expect(… != mine)` below fails.
    @Test(arguments: Engine.allCases)
    func rowsChangedOrDeletedBehindTheStoresBackAreAMismatch(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        try await Self.run(engine) { subject in
            let store = subject.store
            let scans = (0..<30).map { scan(100 + $0, tag: $0, device: "cart-1") }
            let orders = (0..<10).map { order(200 + $0, device: "cart-1") }
            _ = try store.apply([batch("cart-1", 1, scans + orders)])
            var mine = DeliverySummary()
            for record in scans + orders { mine.add(record) }
            func held() throws -> DeliverySummary {
                try store.deliverySummary(device: "cart-1", flight: flightA.rawValue, expected: mine)
            }
            #expect(try held() == mine)
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == true)

            // An operator's DELETE of one scan.
            let scanID = { (n: Int) in scans[n].id.uuidString }
            let literal = { (id: String) in engine == .sqlite ? "x'\(id.replacingOccurrences(of: "-", with: ""))'" : "'\(id)'" }
            try subject.execute("DELETE FROM scans WHERE id = \(literal(scanID(3)))")
            #expect(try held() != mine)
            #expect(try held().count == mine.count - 1)
            // The device resends it: stored again, the pair is exact and confirmed from its kept digest.
            _ = try store.apply([batch("cart-1", 1, [scans[3]])])
            #expect(try held() == mine)
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == true)

            // A revision changed by hand.
            let orderID = orders[2].id.uuidString
            try subject.execute("UPDATE orders SET revision = revision + 1 WHERE id = \(literal(orderID))")
            #expect(try held() != mine)
            try subject.execute("UPDATE orders SET revision = revision - 1 WHERE id = \(literal(orderID))")
            #expect(try held() == mine)

            // A scan moved to another flight by hand.
            try subject.execute("UPDATE scans SET flight = '\(flightB.rawValue)' WHERE id = \(literal(scanID(4)))")
            #expect(try held() != mine)
            try subject.execute("UPDATE scans SET flight = '\(flightA.rawValue)' WHERE id = \(literal(scanID(4)))")
            #expect(try held() == mine)

            // A whole table emptied (TRUNCATE on PostgreSQL, which fires no row trigger; DELETE on SQLite).
            try subject.execute(engine == .postgres ? "TRUNCATE scans" : "DELETE FROM scans")
            #expect(try held().count == orders.count)
            try subject.checkValidDigestsAreTheRows("after the scans were emptied")
        }
    }

    /// PostgreSQL's stale marks do not pile up: the idle maintenance folds them into their pairs, which stay stale and
    /// are read from their rows at their next summary.
    @Test func idleMaintenanceFoldsThePostgreSQLStaleMarks() async throws {
        guard TestPostgres.enabled else { return }
        try await Self.run(.postgres) { subject in
            let store = subject.store
            _ = try store.apply([batch("cart-1", 1, (0..<5).map { order(400 + $0, device: "cart-1") })])
            // An operator's hand edit marks each row's pair; corrections that `apply` stores alone (no new record of
            // the pair in the group) mark the pair once.
            try subject.execute("UPDATE orders SET revision = 2 WHERE device = 'cart-1'")
            _ = try store.apply([batch("cart-1", 6, (0..<5).map { order(400 + $0, revision: 3, device: "cart-1") })])
            var mine = DeliverySummary()
            for n in 0..<5 { mine.add(order(400 + n, revision: 3, device: "cart-1")) }
            #expect(try subject.marks() == 6)
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == false)
            try store.idleMaintenance()
            #expect(try subject.marks() == 0)
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == false)
            #expect(try store.deliverySummary(device: "cart-1", flight: flightA.rawValue, expected: mine) == mine)
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == true)
            // Nothing marked: the fold changes nothing.
            try store.idleMaintenance()
            #expect(try subject.kept()["cart-1 \(flightA.rawValue)"]?.valid == true)
        }
    }

    /// A store from before the kept digests (its pairs marked stale, as the migration leaves them, with no sums) is
    /// answered from its rows at each pair's first summary, and kept from then on.
    @Test(arguments: Engine.allCases)
    func aStalePairIsReadFromItsRowsOnceAndKeptAfter(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        try await Self.run(engine) { subject in
            let records = (0..<20).map { scan(300 + $0, tag: $0, device: "cart-1") }
            _ = try subject.store.apply([batch("cart-1", 1, records)])
            try subject.execute(
                "UPDATE device_flights SET held = 0, digest_hi = 0, digest_lo = 0, digest_valid = \(engine == .sqlite ? "0" : "false")")
            var mine = DeliverySummary()
            for record in records { mine.add(record) }
            #expect(try subject.store.deliverySummary(device: "cart-1", flight: flightA.rawValue, expected: mine) == mine)
            let kept = try subject.kept()["cart-1 \(flightA.rawValue)"]
            #expect(kept?.valid == true)
            #expect(kept?.summary == mine)
        }
    }
}
