import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import MessagePack
import PostgresNIO
import Testing
import ZeroMQ

/// The ground's side of proof of delivery (docs/PROTOCOL.md, "Proof of delivery"): a real aggregator with CURVE and
/// real keys, on SQLite and on PostgreSQL, asked by a device on raw ZeroMQ sockets.
@Suite("Proof of delivery: the ground answers summaries")
struct ProofOfDeliveryServerTests {
    enum Engine: String, CaseIterable, Sendable { case sqlite, postgres }

    /// A server on `engine` (a fresh PostgreSQL database, dropped by `cleanup`).
    static func server(_ engine: Engine, devices: [String] = ["cart-1", "cart-2"]) throws -> (
        ServerFixture, database: FreshDatabase?
    ) {
        var database: FreshDatabase?
        if engine == .postgres { database = try TestPostgres.freshDatabase() }
        let fixture = try ServerFixture(devices: devices) { configuration in
            if let database { configuration.store = database.url }
        }
        return (fixture, database)
    }

    /// Deletes the store's rows of `ids` directly, as an operator's mistaken `DELETE` or a stale standby would.
    static func deleteOrders(_ ids: [UUID], fixture: ServerFixture, database: FreshDatabase?) throws {
        if let database {
            let list = ids.map { "'\($0.uuidString)'" }.joined(separator: ",")
            try TestPostgres.admin(database.url, "DELETE FROM orders WHERE id IN (\(list))")
        } else {
            let queue = try DatabaseQueue(path: fixture.home.directory.appendingPathComponent("jetbridge.sqlite").path)
            try queue.write { db in
                for id in ids {
                    try db.execute(
                        sql: "DELETE FROM orders WHERE id = ?", arguments: [withUnsafeBytes(of: id.uuid) { Data($0) }])
                }
            }
            try queue.close()
        }
    }

    static func summary(of records: [JetbridgeModel.Record], device: String, flight: FlightID = flightA) -> FlightSummary {
        var summary = DeliverySummary()
        for record in records where record.flight == flight { summary.add(owned(record, by: device)) }
        return FlightSummary(device: device, flight: flight.rawValue, summary: summary)
    }

    @Test(arguments: Engine.allCases)
    func aSummaryIsConfirmedThenAMismatchAfterALossThenConfirmedAfterTheResend(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let (fixture, database) = try Self.server(engine)
        defer { database?.drop() }
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        // 100 orders and 50 scans on flight A, 10 orders on flight B; cart-2 has its own orders on flight A.
        var records = (0..<100).map { order($0) } + (0..<50).map { scan(500 + $0, tag: $0) }
        records += (0..<10).map { order(800 + $0, flight: flightB) }
        // Three orders revised: the summary counts each at its highest revision.
        records += [order(1, revision: 2), order(2, revision: 3), order(3, revision: 2)]
        try device.send(try outgoing("cart-1", 1, records))
        #expect(try await device.ack()?.status == .stored)
        let other = try await fixture.device("cart-2")
        defer { other.close() }
        try other.send(try outgoing("cart-2", 1, (900..<920).map { order($0) }))
        #expect(try await other.ack()?.status == .stored)

        let held = records.filter {
            if case .order(let order) = $0 { return ![uuid(1), uuid(2), uuid(3)].contains(order.id) || order.revision > 1 }
            return true
        }
        let asked = Self.summary(of: held, device: "cart-1")
        #expect(asked.count == 150)
        try device.ask(asked)
        let confirmed = try #require(try await device.summaryAnswer())
        #expect(confirmed.status == .confirmed && confirmed.count == 150 && confirmed.flight == flightA.rawValue)
        #expect(confirmed.held == asked.summary)

        // 1 % of the device's rows of the flight lost in the store.
        try Self.deleteOrders([uuid(10), uuid(20)], fixture: fixture, database: database)
        try device.ask(asked)
        let mismatch = try #require(try await device.summaryAnswer())
        #expect(mismatch.status == .mismatch && mismatch.count == 148)

        // The resend: deduplication absorbs the rest, the lost order comes back, the summary is confirmed again.
        try device.send(try outgoing("cart-1", 1, records))
        let ack = try #require(try await device.ack())
        #expect(ack.status == .stored && ack.new == 2)
        try device.ask(asked)
        #expect(try await device.summaryAnswer()?.status == .confirmed)

        // Flight B is summarised on its own.
        try device.ask(Self.summary(of: records, device: "cart-1", flight: flightB))
        let b = try #require(try await device.summaryAnswer())
        #expect(b.status == .confirmed && b.count == 10)
        // Counted in the totals once sent (AnswerLedger): the answer can come an instant before.
        try await waitUntil("the summaries are in the totals") {
            fixture.server.currentStatistics.summaries["confirmed"] == 3
        }
        #expect(fixture.server.currentStatistics.summaries["mismatch"] == 1)
        await fixture.stop()
    }

    @Test func aDeviceCanOnlyAskAboutItsOwnRecordsAndEveryMalformedSummaryIsAnswered() async throws {
        let (fixture, _) = try Self.server(.sqlite)
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        let other = try await fixture.device("cart-2")
        defer { other.close() }
        try other.send(try outgoing("cart-2", 1, (0..<5).map { order($0) }))
        #expect(try await other.ack()?.status == .stored)

        // cart-1 asks about cart-2's flight: forbidden, and the answer carries no count of cart-2's records.
        try device.ask(Self.summary(of: (0..<5).map { order($0) }, device: "cart-2"))
        let forbidden = try #require(try await device.summaryAnswer())
        #expect(forbidden.status == .forbidden && forbidden.count == nil && forbidden.device == "cart-1")
        #expect(forbidden.reason?.contains("a device may only ask about its own records") == true)
        // cart-2 received nothing for it.
        #expect(try await other.summaryAnswer(within: .milliseconds(300)) == nil)

        // Malformed summaries: each answered `rejected` with what and where, and the server goes on.
        let malformed: [(Data, String)] = [
            (try ProofOfDeliveryServerTests.map([("type", .string("summary"))]), "summary: v: missing"),
            (try Self.map(Self.fields(count: .int(-5))), "count -5 is not"),
            (try Self.map(Self.fields(digest: .binary(Data([1])))), "digest has 1 bytes"),
            (try Self.map(Self.fields(flight: .string("nonsense"))), "summary: flight"),
            (try Self.map(Self.fields(count: .float64(.nan))), "count"),
        ]
        for (frame, expected) in malformed {
            try device.dealer.send(frame)
            let answer = try #require(try await device.summaryAnswer(), "no answer for \(expected)")
            #expect(answer.status == .rejected, "\(expected): \(answer)")
            #expect(answer.reason?.contains(expected) == true, "\(expected): \(answer.reason ?? "-")")
        }
        // Two frames after the routing id: answered too.
        try device.dealer.send([try Self.map(Self.fields()), Data([0x90])])
        #expect(try await device.summaryAnswer()?.reason?.contains("a summary is one frame") == true)
        // A flood of summaries: every one answered, those past 20 in a second `retry`, the store thread not held up.
        for _ in 0..<60 { try device.ask(Self.summary(of: [], device: "cart-1")) }
        var statuses: [SummaryAnswer.Status] = []
        for _ in 0..<60 {
            statuses.append(try #require(try await device.summaryAnswer()).status)
        }
        #expect(statuses.count { $0 == .confirmed } >= 20 && statuses.count { $0 == .retry } > 0, "\(statuses)")
        #expect(statuses.allSatisfy { $0 == .confirmed || $0 == .retry })
        // The server still serves: asked again until the next second's allowance answers it (a bound, not a pause).
        var empty: SummaryAnswer?
        let deadline = ContinuousClock.now + .seconds(10)
        while empty?.status != .confirmed, ContinuousClock.now < deadline {
            try device.ask(Self.summary(of: [], device: "cart-1"))
            empty = try await device.summaryAnswer()
        }
        #expect(empty?.status == .confirmed && empty?.count == 0)
        await fixture.stop()
    }

    @Test(arguments: Engine.allCases)
    func theStoreReadsOnlyTheDevicesRowsOfTheFlightThroughAnIndex(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let plans: [String] = try await onOwnThread {
            switch engine {
            case .sqlite:
                let fixture = try Fixture()
                defer { fixture.remove() }
                let path = fixture.directory.appendingPathComponent("store.sqlite").path
                let store = try SQLiteStore(path: path, logger: Logger(label: "test"))
                _ = try store.apply([batch("cart-1", 1, [order(1), scan(2, tag: 1)])])
                try store.close()
                let queue = try DatabaseQueue(path: path)
                defer { try? queue.close() }
                return try queue.read { db in
                    try ["orders": "id, revision", "scans": "id"].map { table, columns in
                        try Row.fetchAll(
                            db,
                            sql: "EXPLAIN QUERY PLAN SELECT \(columns) FROM \(table) WHERE device = ? AND flight = ?",
                            arguments: ["cart-1", flightA.rawValue]
                        ).map { $0["detail"] as String }.joined(separator: "; ")
                    }
                }
            case .postgres:
                let database = try TestPostgres.freshDatabase()
                defer { database.drop() }
                let store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
                _ = try store.apply([batch("cart-1", 1, [order(1), scan(2, tag: 1)])])
                #expect(try store.schemaVersion() == 12)
                try store.close()
                let connection = try TestPostgres.connect(database.url)
                defer { try? connection.close().wait() }
                var plans: [String] = []
                for (table, columns) in [("orders", "id, revision"), ("scans", "id")] {
                    // Few rows: the planner would scan the table; as on a large store, it must be able to use the index.
                    _ = try connection.query("SET enable_seqscan = off", logger: Logger(label: "test")).wait()
                    let rows = try connection.query(
                        PostgresQuery(
                            unsafeSQL:
                                "EXPLAIN SELECT \(columns) FROM \(table) WHERE device = 'cart-1' AND flight = 'ZA101/2026-11-21'"
                        ), logger: Logger(label: "test")
                    ).wait()
                    plans.append(try rows.map { try $0.decode(String.self) }.joined(separator: "; "))
                }
                return plans
            }
        }
        for plan in plans {
            // Either (device, flight) index, or the console's scans (flight, device): each reads only that device's
            // rows of that flight.
            #expect(plan.contains("_device_flight") || plan.contains("scans_flight_device"), "\(engine): \(plan)")
            #expect(!plan.contains("SCAN orders") && !plan.contains("SCAN scans") && !plan.contains("Seq Scan"), "\(plan)")
        }
    }

    @Test(arguments: Engine.allCases)
    func theStoresSummaryIsTheDevicesOnBothEngines(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let records = randomRecords(seed: 25, count: 400)
        let held: DeliverySummary = try await onOwnThread {
            let fixture = try Fixture()
            defer { fixture.remove() }
            let store: any StoreWriter
            var database: FreshDatabase?
            if engine == .postgres {
                database = try TestPostgres.freshDatabase()
                store = try PostgresStore(url: database!.url, logger: Logger(label: "test"))
            } else {
                store = try SQLiteStore(path: fixture.directory.appendingPathComponent("s.sqlite").path, logger: Logger(label: "test"))
            }
            defer {
                try? store.close()
                database?.drop()
            }
            for (index, chunk) in stride(from: 0, to: records.count, by: 50).enumerated() {
                let outcomes = try store.apply([
                    batch("cart-1", UInt64(index * 50 + 1), Array(records[chunk..<min(chunk + 50, records.count)]))
                ])
                #expect(outcomes.allSatisfy { $0.rejection == nil })
            }
            return try store.deliverySummary(device: "cart-1", flight: flightA.rawValue)
        }
        // What the device would say: each order at its highest revision, on that revision's flight; every scan once.
        var latest: [UUID: Order] = [:]
        var firstScans: [UUID: Scan] = [:]
        var expected = DeliverySummary()
        for record in records.map({ owned($0, by: "cart-1") }) {
            switch record {
            case .order(let order):
                if (latest[order.id]?.revision ?? 0) < order.revision { latest[order.id] = order }
            case .scan(let scan):
                if firstScans[scan.id] == nil { firstScans[scan.id] = scan }
            }
        }
        for scan in firstScans.values where scan.flight == flightA { expected.add(scan: scan.id) }
        for order in latest.values where order.flight == flightA { expected.add(order: order.id, revision: order.revision) }
        #expect(expected.count > 50)
        #expect(held == expected)
    }

    static func map(_ pairs: [(String, MessagePackValue)]) throws -> Data {
        try MessagePackEncoder().encode(MessagePackValue.map(pairs.map { (.string($0.0), $0.1) }))
    }

    static func fields(
        count: MessagePackValue = .int(0), flight: MessagePackValue = .string("ZA101/2026-11-21"),
        digest: MessagePackValue = .binary(Data(count: 8))
    ) -> [(String, MessagePackValue)] {
        [
            ("v", .int(1)), ("type", .string("summary")), ("device", .string("cart-1")), ("flight", flight),
            ("count", count), ("digest", digest),
        ]
    }
}

extension TestDevice {
    /// Sends a summary on the ack channel.
    func ask(_ summary: FlightSummary) throws {
        try dealer.send(WireCoding.encode(summary))
    }

    /// The next answer to a summary (acks in between are skipped), or nil after `within`.
    func summaryAnswer(within: Duration = .seconds(20)) async throws -> SummaryAnswer? {
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            guard let frame = try await firstValue(within: left, { try dealer.receive(options: .dontWait) }) else {
                return nil
            }
            if AckChannelType.of(frame) == SummaryAnswer.messageType {
                return try WireCoding.decode(SummaryAnswer.self, from: frame)
            }
        }
        return nil
    }
}
