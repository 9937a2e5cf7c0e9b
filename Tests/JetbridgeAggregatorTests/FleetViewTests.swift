import Foundation
import GRDB
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import PostgresNIO
import Testing
import ZeroMQ

@testable import JetbridgeAggregator

#if canImport(Glibc)
    import Glibc
#endif

/// The ground's view of the fleet (issue 25 item 4) with real `serve` processes: every allowed device has its metric
/// series from the start, so the documented silent-cart alert (deploy/prometheus/alerts.yml) can fire for a cart that
/// has not synced since the aggregator restarted.
@Suite("Fleet view")
struct FleetViewTests {
    /// Writes an allow list naming `devices` (fresh keys) into the ground home `name` under `parent`.
    static func allow(_ devices: [String], home name: String, in parent: URL) throws {
        var list = DeviceAllowlist()
        for device in devices {
            try list.allow(device: device, publicKey: try Z85.encode(try CurveKeyPair.generate().publicKey))
        }
        let home = parent.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        try list.save(to: home.appendingPathComponent("devices.json"))
    }

    /// `/metrics` of `serve`.
    static func scrape(_ serve: ServeProcess) async throws -> String {
        let endpoint = try #require(serve.metricsEndpoint)
        let answer = try await ConsoleSignInTests.get(endpoint, "/metrics")
        #expect(answer.status == 200)
        return answer.body
    }

    /// cart-1 syncs, `serve` is killed with SIGKILL and started again; cart-9 (allowed, never synced) and cart-1 (not
    /// since the restart) both have their series on the first scrape of the new process: records and stored batches
    /// at 0, and the last-batch gauge at the start (cart-9) or at cart-1's last sync as the store holds it, not the
    /// restart (so `time() - last_batch` keeps growing across the restart and the alert fires on time).
    @Test func aRestartedServeHasTheSeriesOfEveryAllowedDeviceFromItsFirstScrape() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = fixture.directory.appendingPathComponent("store.sqlite").path
        try Self.allow(["cart-1", "cart-9"], home: "ground", in: fixture.directory)
        let first = try await ServeProcess(store: store, in: fixture.directory, name: "ground", metrics: true)
        defer { first.killNow() }
        let cart = try ProofOfDeliveryEndToEndTests.Agent(device: "cart-1", serve: first, in: fixture.directory)
        try await cart.capture(scans: 3)
        let beforeSync = Date().timeIntervalSince1970.rounded(.down)
        let (status, output) = try await cart.sync()
        #expect(status == 0, "\(output)")
        let afterSync = Date().timeIntervalSince1970 + 1
        first.killNow()
        let process = first.process
        try await waitUntil("serve dies") { !process.isRunning }

        let restart = Date().timeIntervalSince1970.rounded(.down)
        let second = try await ServeProcess(store: store, in: fixture.directory, name: "ground", metrics: true)
        defer { second.killNow() }
        let text = try await Self.scrape(second)
        for device in ["cart-1", "cart-9"] {
            #expect(MetricsTests.sample(text, "jetbridge_records_total", ["device": device, "outcome": "new"]) == 0, "\(text)")
            #expect(MetricsTests.sample(text, "jetbridge_batches_total", ["device": device, "status": "stored"]) == 0)
        }
        let never = MetricsTests.sample(text, "jetbridge_device_last_batch_timestamp_seconds", ["device": "cart-9"])
        #expect(never.map { $0 >= restart && $0 <= Date().timeIntervalSince1970 + 1 } == true, "\(text)")
        let synced = MetricsTests.sample(text, "jetbridge_device_last_batch_timestamp_seconds", ["device": "cart-1"])
        #expect(synced.map { $0 >= beforeSync && $0 <= afterSync } == true, "cart-1: \(String(describing: synced))")
        try await second.stop()
    }

    typealias Engine = ProofOfDeliveryServerTests.Engine

    /// One row of the store's `announcements` table.
    struct Announcement: Equatable, CustomStringConvertible {
        var announcedAt: Double
        var confirmedAt: Double?
        var description: String { "announced \(announcedAt), confirmed \(confirmedAt.map { "\($0)" } ?? "-")" }
    }

    /// The store's announcements, `device flight` → row, read behind the ground's back: the SQLite file of `home`, or
    /// the PostgreSQL database.
    static func announcements(sqlite path: String?, database: FreshDatabase?) throws -> [String: Announcement] {
        var rows: [String: Announcement] = [:]
        if let database {
            let connection = try TestPostgres.connect(database.url)
            defer { try? connection.close().wait() }
            for row in try connection.query(
                "SELECT device, flight, announced_at, confirmed_at FROM announcements", logger: Logger(label: "test")
            ).wait() {
                let (device, flight, announced, confirmed) = try row.decode((String, String, Double, Double?).self)
                rows["\(device) \(flight)"] = Announcement(announcedAt: announced, confirmedAt: confirmed)
            }
        } else if let path {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            try queue.read { db in
                for row in try Row.fetchAll(db, sql: "SELECT device, flight, announced_at, confirmed_at FROM announcements") {
                    rows["\(row["device"] as String) \(row["flight"] as String)"] = Announcement(
                        announcedAt: row["announced_at"], confirmedAt: row["confirmed_at"])
                }
            }
        }
        return rows
    }

    static func announcements(_ fixture: ServerFixture, _ database: FreshDatabase?) async throws -> [String: Announcement] {
        let path = fixture.home.directory.appendingPathComponent("jetbridge.sqlite").path
        return try await onOwnThread { try Self.announcements(sqlite: path, database: database) }
    }

    /// An announcement is recorded on both engines (answered `recorded`), a confirmed summary marks its flight
    /// confirmed, and announcing the flight again (more captured) clears the confirmation. Failed before the announce
    /// existed: the ground ignored the message and never answered.
    @Test(arguments: Engine.allCases)
    func anAnnounceIsRecordedAndAConfirmedSummaryMarksItsFlight(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let (fixture, database) = try ProofOfDeliveryServerTests.server(engine)
        defer { database?.drop() }
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        let before = Date().timeIntervalSince1970.rounded(.down)
        try device.announce(FlightAnnounce(device: "cart-1", flights: [flightA.rawValue, flightB.rawValue]))
        let recorded = try #require(try await device.announceAnswer())
        #expect(recorded == AnnounceAnswer(device: "cart-1", status: .recorded, flights: 2))
        var rows = try await Self.announcements(fixture, database)
        #expect(rows.count == 2, "\(rows)")
        #expect(rows["cart-1 \(flightA.rawValue)"].map { $0.announcedAt >= before && $0.confirmedAt == nil } == true)
        #expect(rows["cart-1 \(flightB.rawValue)"]?.confirmedAt == nil)

        let records = (0..<5).map { order($0, seat: "\($0 + 1)C") }
        try device.send(try outgoing("cart-1", 1, records))
        #expect(try await device.ack()?.status == .stored)
        try device.ask(ProofOfDeliveryServerTests.summary(of: records, device: "cart-1"))
        #expect(try await device.summaryAnswer()?.status == .confirmed)
        rows = try await Self.announcements(fixture, database)
        #expect(rows["cart-1 \(flightA.rawValue)"].map { $0.confirmedAt.map { $0 >= before } == true } == true, "\(rows)")
        #expect(rows["cart-1 \(flightB.rawValue)"]?.confirmedAt == nil, "\(rows)")

        // More captured for flight A: announced again, no longer confirmed until the next summary.
        try device.announce(FlightAnnounce(device: "cart-1", flights: [flightA.rawValue]))
        #expect(try await device.announceAnswer()?.status == .recorded)
        rows = try await Self.announcements(fixture, database)
        #expect(rows["cart-1 \(flightA.rawValue)"]?.confirmedAt == nil, "\(rows)")
        await fixture.stop()
    }

    /// Hostile announcements (CURVE, real keys): one naming another device is `forbidden` and records nothing for it;
    /// every malformed one is answered `rejected` with what and where; a flood is answered (`retry` past 5 a second);
    /// the server goes on storing. Failed before the announce existed: none of them was answered.
    @Test func everyMalformedAnnounceIsAnsweredAndADeviceAnnouncesOnlyForItself() async throws {
        let (fixture, _) = try ProofOfDeliveryServerTests.server(.sqlite)
        let device = try await fixture.device("cart-1")
        defer { device.close() }

        try device.announce(FlightAnnounce(device: "cart-2", flights: [flightA.rawValue]))
        let forbidden = try #require(try await device.announceAnswer())
        #expect(forbidden.status == .forbidden && forbidden.device == "cart-1")
        #expect(forbidden.reason?.contains("a device may only announce its own flights") == true, "\(forbidden)")

        func fields(flights: MessagePackValue = .array([.string("ZA101/2026-11-21")])) -> [(String, MessagePackValue)] {
            [("v", .int(1)), ("type", .string("announce")), ("device", .string("cart-1")), ("flights", flights)]
        }
        let many = MessagePackValue.array((0..<65).map { .string("ZA\($0 + 100)/2026-11-21") })
        // 3,000 entries (refused by the count in the array's header, before any entry is read).
        let hostileLength = try ProofOfDeliveryServerTests.map(fields(flights: .array(Array(repeating: .int(0), count: 3_000))))
        let malformed: [(Data, String)] = [
            (try ProofOfDeliveryServerTests.map([("type", .string("announce"))]), "announce: v: missing"),
            (try ProofOfDeliveryServerTests.map(fields(flights: .string("ZA101/2026-11-21"))), "announce: flights"),
            (try ProofOfDeliveryServerTests.map(fields(flights: .array([.string("nonsense")]))), "announce: flights[0]"),
            (
                try ProofOfDeliveryServerTests.map(
                    fields(flights: .array([.string("ZA101/2026-11-21"), .string("ZA101/2026-11-21")]))),
                "flights[1]: ZA101/2026-11-21 is listed twice"
            ),
            (try ProofOfDeliveryServerTests.map(fields(flights: many)), "65 entries; at most 64"),
            (hostileLength, "announce: flights: 3000 entries; at most 64"),
            (try ProofOfDeliveryServerTests.map(fields(flights: .array([.int(7)]))), "announce: flights"),
        ]
        for (frame, expected) in malformed {
            try device.dealer.send(frame)
            let answer = try #require(try await device.announceAnswer(), "no answer for \(expected)")
            #expect(answer.status == .rejected, "\(expected): \(answer)")
            #expect(answer.reason?.contains(expected) == true, "\(expected): \(answer.reason ?? "-")")
        }
        var future = fields()
        future[0] = ("v", .int(2))
        try device.dealer.send(try ProofOfDeliveryServerTests.map(future))
        #expect(try await device.announceAnswer()?.status == .unsupportedVersion)
        try device.dealer.send([try ProofOfDeliveryServerTests.map(fields()), Data([0x90])])
        #expect(try await device.announceAnswer()?.reason?.contains("an announce is one frame") == true)

        // A flood: every one answered, those past 5 in a second `retry`.
        for _ in 0..<30 { try device.announce(FlightAnnounce(device: "cart-1", flights: [flightA.rawValue])) }
        var statuses: [AnnounceAnswer.Status] = []
        for _ in 0..<30 { statuses.append(try #require(try await device.announceAnswer()).status) }
        #expect(statuses.count { $0 == .recorded } >= 5 && statuses.count { $0 == .retry } > 0, "\(statuses)")
        #expect(statuses.allSatisfy { $0 == .recorded || $0 == .retry })

        // Nothing recorded for cart-2, and the server still stores batches.
        let rows = try await Self.announcements(fixture, nil)
        #expect(rows.keys.sorted() == ["cart-1 \(flightA.rawValue)"], "\(rows)")
        try device.send(try outgoing("cart-1", 1, [order(1)]))
        #expect(try await device.ack()?.status == .stored)
        await fixture.stop()
    }

    /// A real agent announces on connect: after `sync` the store holds its flight announced and confirmed, on both
    /// engines; the agent's log shows the ground recorded it.
    @Test(arguments: Engine.allCases)
    func anAgentAnnouncesItsFlightsAndTheGroundRecordsTheConfirmation(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let path = fixture.directory.appendingPathComponent("store.sqlite").path
        let database = engine == .postgres ? try TestPostgres.freshDatabase() : nil
        defer { database?.drop() }
        let serve = try await ServeProcess(store: database?.url ?? path, in: fixture.directory, name: "ground")
        defer { serve.killNow() }
        let cart = try ProofOfDeliveryEndToEndTests.Agent(device: "cart-1", serve: serve, in: fixture.directory)
        try await cart.capture(scans: 20)
        let before = Date().timeIntervalSince1970.rounded(.down)
        let (status, output) = try await cart.sync()
        #expect(status == 0, "\(output)")
        let rows = try await onOwnThread { try Self.announcements(sqlite: path, database: database) }
        let row = try #require(rows["cart-1 \(ProofOfDeliveryEndToEndTests.flight)"], "\(rows)")
        #expect(row.announcedAt >= before && (row.confirmedAt ?? 0) >= row.announcedAt, "\(row)")
        #expect(rows.count == 1)

        // A confirmed flight is not announced again: the next sync leaves its announcement as it was.
        let (again, againOutput) = try await cart.sync()
        #expect(again == 0, "\(againOutput)")
        var next = try await onOwnThread { try Self.announcements(sqlite: path, database: database) }
        #expect(next["cart-1 \(ProofOfDeliveryEndToEndTests.flight)"]?.announcedAt == row.announcedAt, "\(next)")
        // More captured for it: announced again, then confirmed again.
        try await cart.capture(scans: 2)
        let (third, thirdOutput) = try await cart.sync()
        #expect(third == 0, "\(thirdOutput)")
        next = try await onOwnThread { try Self.announcements(sqlite: path, database: database) }
        let later = try #require(next["cart-1 \(ProofOfDeliveryEndToEndTests.flight)"])
        #expect(later.announcedAt > row.announcedAt && (later.confirmedAt ?? 0) >= later.announcedAt, "\(later)")
        try await serve.stop()
    }

    /// `report devices --flight F` (text and JSON), `status` and `/metrics` show each device that announced F, or
    /// stored records of it, as confirmed, sending or silent, on both engines with real processes: cart-1 syncs with
    /// the real agent (confirmed); cart-2 announces and stores a batch but asks nothing (sending); cart-3 announced two
    /// hours ago (the store's rows moved back behind the ground's back) and was never heard from again (silent).
    /// Failed before: `report devices --flight` was refused (64), and neither `status` nor `/metrics` had a fleet.
    @Test(arguments: Engine.allCases)
    func theReportStatusAndMetricsShowEachDeviceOfAFlight(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let path = fixture.directory.appendingPathComponent("store.sqlite").path
        let database = engine == .postgres ? try TestPostgres.freshDatabase() : nil
        defer { database?.drop() }
        let store = database?.url ?? path
        let serve = try await ServeProcess(store: store, in: fixture.directory, name: "ground", metrics: true)
        defer { serve.killNow() }
        let flight = ProofOfDeliveryEndToEndTests.flight
        let cart = try ProofOfDeliveryEndToEndTests.Agent(device: "cart-1", serve: serve, in: fixture.directory)
        try await cart.capture(scans: 20)
        let (synced, output) = try await cart.sync()
        #expect(synced == 0, "\(output)")

        try await onOwnThread {
            for id in ["cart-2", "cart-3"] {
                let device = try RawDevice(id: id, to: serve)
                defer { device.close() }
                try device.dealer.send(WireCoding.encode(FlightAnnounce(device: id, flights: [flight])))
                // Its answer first: recorded (an ack-channel frame that is not an ack).
                let ready = try poll([PollItem(device.dealer, .readable)], timeout: .seconds(20))
                #expect(ready[0].contains(.readable))
                let frame = try #require(try device.dealer.receive())
                #expect(try WireCoding.decode(AnnounceAnswer.self, from: frame).status == .recorded)
                if id == "cart-2" {
                    let records = (0..<3).map { scan($0, tag: $0, flight: flightA) }
                    #expect(try device.store(try outgoing(id, 1, records)).ack.status == .stored)
                }
            }
        }
        // cart-3's announcement two hours back: silent since then.
        let moveBack = "UPDATE announcements SET announced_at = announced_at - 7200 WHERE device = 'cart-3'"
        if let database {
            try TestPostgres.admin(database.url, moveBack)
        } else {
            try await onOwnThread {
                let queue = try DatabaseQueue(path: path)
                try queue.write { try $0.execute(sql: moveBack) }
                try queue.close()
            }
        }

        let json = try AggregatorCLITests.run(
            ["report", "devices", "--flight", flight, "--format", "json", "--store", store, "--home", serve.home.path],
            in: fixture.directory)
        #expect(json.status == 0, "\(json)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["flight"] as? String == flight)
        let rows = (object["devices"] as? [[String: Any]]) ?? []
        #expect(rows.map { $0["device"] as? String } == ["cart-1", "cart-2", "cart-3"], "\(json.stdout)")
        #expect(rows.map { $0["state"] as? String } == ["confirmed", "sending", "silent"], "\(json.stdout)")
        #expect(rows.map { $0["records"] as? Int } == [20, 3, 0], "\(json.stdout)")
        #expect(rows[0]["confirmedAt"] is String && rows[1]["confirmedAt"] is NSNull && rows[2]["lastSeen"] is String)
        let table = try AggregatorCLITests.run(
            ["report", "devices", "--flight", flight, "--store", store, "--home", serve.home.path], in: fixture.directory)
        #expect(table.status == 0 && table.stdout.contains("State") && table.stdout.contains("silent"), "\(table)")
        let none = try AggregatorCLITests.run(
            ["report", "devices", "--flight", "ZA999/2026-11-21", "--store", store, "--home", serve.home.path],
            in: fixture.directory)
        #expect(none.status == 0 && none.stdout.contains("(no devices)"), "\(none)")

        // /metrics and status, from the status thread's reading (every 2 s).
        var text = ""
        let deadline = ContinuousClock.now + .seconds(20)
        repeat {
            text = try await Self.scrape(serve)
            if MetricsTests.sample(text, "jetbridge_flight_devices", ["flight": flight, "state": "silent"]) == 1 { break }
            try await Task.sleep(for: .milliseconds(100))
        } while ContinuousClock.now < deadline
        for (state, count) in [("confirmed", 1.0), ("sending", 1.0), ("silent", 1.0)] {
            #expect(MetricsTests.sample(text, "jetbridge_flight_devices", ["flight": flight, "state": state]) == count)
        }
        let status = try AggregatorCLITests.run(["status", "--json", "--home", serve.home.path], in: fixture.directory)
        let statusObject = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        let fleet = (statusObject["fleet"] as? [[String: Any]]) ?? []
        #expect(fleet.count == 1 && fleet.first?["flight"] as? String == flight, "\(status.stdout)")
        #expect(fleet.first.map { [$0["confirmed"], $0["sending"], $0["silent"]].map { $0 as? Int } } == [1, 1, 1])
        let screen = try AggregatorCLITests.run(["status", "--home", serve.home.path], in: fixture.directory)
        #expect(screen.stdout.contains("CONFIRMED") && screen.stdout.contains(flight), "\(screen.stdout)")
        try await serve.stop()
    }
}

extension TestDevice {
    /// Sends an announcement on the ack channel.
    func announce(_ announce: FlightAnnounce) throws {
        try dealer.send(WireCoding.encode(announce))
    }

    /// The next answer to an announcement (other messages skipped), or nil after `within`.
    func announceAnswer(within: Duration = .seconds(20)) async throws -> AnnounceAnswer? {
        let deadline = ContinuousClock.now + within
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            guard let frame = try await firstValue(within: left, { try dealer.receive(options: .dontWait) }) else {
                return nil
            }
            if AckChannelType.of(frame) == AnnounceAnswer.messageType {
                return try WireCoding.decode(AnnounceAnswer.self, from: frame)
            }
        }
        return nil
    }
}
