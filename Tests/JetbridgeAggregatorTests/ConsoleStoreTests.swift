import Foundation
@testable import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import NIOHTTP1
import Testing

/// The console's store reads (``ConsoleReading``) against the reports they must agree with, on the parity data set,
/// and their query plans: each read goes through an index, none sorts or scans the whole `scans` table.
@Suite("Console: store reads")
struct ConsoleStoreTests {
    typealias Engine = ProofOfDeliveryServerTests.Engine

    /// Applies the parity data set and a flight whose bags are all still in the air.
    static func filled(_ store: any StoreWriter) throws {
        for group in StoreParityTests.groups() { _ = try store.apply(group) }
        _ = try store.apply([inAir()])
    }

    /// Twelve scans at the origin of seven bags of a flight none of whose bags arrived yet.
    static func inAir() throws -> IncomingBatch {
        let flight = try FlightID("ZA300/2026-11-21")
        return batch("ramp-9", 1, (0..<12).map { scan(50_000 + $0, tag: 9_000 + $0 % 7, flight: flight, device: "ramp-9") })
    }

    /// Every console read equals what the reports (and ``StoreReader``'s whole-flight reads) say.
    static func checkAgreement(_ store: any ConsoleReading) throws {
        let flights = try store.consoleFlights()
        let luggage = try store.luggageReport(flight: nil, status: [])
        #expect(flights == Set(try store.flightsWithOrders() + luggage.bags.map(\.bag.flight)).sorted())
        #expect(flights.count == 3)
        let reports = Dictionary(uniqueKeysWithValues: try store.flightReports(flight: nil).flights.map { ($0.flight, $0) })
        for flight in flights {
            let summary = try store.consoleSummary(flight: flight)
            let rows = luggage.bags.filter { $0.bag.flight == flight }
            func count(_ status: BagStatus) -> Int { rows.count { $0.status == status } }
            #expect(summary.bags.total == rows.count)
            #expect(summary.bags.arrived == count(.arrived))
            #expect(summary.bags.missing == count(.missing))
            #expect(summary.bags.inTransit == count(.inTransit))
            #expect(summary.bags.checked == count(.checked))
            if let report = reports[flight] {
                #expect(summary.orders == report.orders)
                #expect(summary.currency == report.currency)
                #expect(summary.revenue == report.revenue)
                #expect(summary.items == report.items)
                #expect(summary.error == report.error)
            } else {
                #expect(summary.orders == 0)
            }
            let orders = try store.orders(flight: flight)
            let devices = try store.consoleDevices(flight: flight)
            #expect(devices.map(\.orders).reduce(0, +) == orders.count)
            #expect(Set(devices.filter { $0.orders > 0 }.map(\.device)) == Set(orders.map(\.device)))
            // Paging: every status, pages of 7, in tag order, equal the luggage report's rows.
            for status in [nil] + BagStatus.allCases {
                var paged: [ConsoleBag] = []
                var after: UUID?
                repeat {
                    let page = try store.consoleBags(flight: flight, status: status, after: after, limit: 7)
                    #expect(page.bags.count <= 7)
                    paged += page.bags
                    after = page.next
                } while after != nil
                let expected = rows.filter { status == nil || $0.status == status }.sorted {
                    $0.bag.tagID.uuidString < $1.bag.tagID.uuidString
                }
                #expect(paged.map(\.bag) == expected.map(\.bag), "\(flight) \(String(describing: status))")
                #expect(paged.map(\.status) == expected.map(\.status))
            }
        }
        // One tag on every flight it is on.
        for row in luggage.bags.prefix(20) {
            let found = try store.consoleBag(tag: row.bag.tagID)
            let expected = luggage.bags.filter { $0.bag.tagID == row.bag.tagID }.sorted { $0.bag.flight < $1.bag.flight }
            #expect(found.map(\.bag) == expected.map(\.bag))
            #expect(found.map(\.status) == expected.map(\.status))
        }
        #expect(try store.consoleBag(tag: uuid(424_242)).isEmpty)
    }

    @Test func sqliteReadsAgreeWithTheReports() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        try Self.filled(store)
        try Self.checkAgreement(store)
        // The newest scan's device and point come with each bag.
        let bag = try #require(try store.consoleBags(flight: flightA, status: nil, after: nil, limit: 1).bags.first)
        #expect(bag.lastDevice?.hasPrefix("ramp-") == true)
        #expect(bag.lastPoint != nil)
    }

    /// The SQLite engine keeps a flight's decoded sales while its orders are unchanged: a new order, a correction
    /// (a higher revision) and an order moved to another flight must each show at once.
    @Test func keptSalesFollowEveryChangeOfTheOrders() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        _ = try store.apply([batch("cart-1", 1, [order(1), order(2)])])
        #expect(try store.consoleSummary(flight: flightA).revenue == 800)
        #expect(try store.consoleSummary(flight: flightA).revenue == 800)
        _ = try store.apply([batch("cart-1", 3, [order(3, lines: [(chips, 1)])])])
        #expect(try store.consoleSummary(flight: flightA).revenue == 1_100)
        _ = try store.apply([batch("cart-1", 4, [order(1, revision: 2, lines: [(popcorn, 1)])])])
        let corrected = try store.consoleSummary(flight: flightA)
        #expect(corrected.revenue == 1_100 - 400 + 400 && corrected.items.map(\.name) == ["Chips", "Peanuts", "Popcorn"])
        _ = try store.apply([batch("cart-1", 5, [order(2, revision: 2, flight: flightB)])])
        #expect(try store.consoleSummary(flight: flightA).revenue == 700)
        #expect(try store.consoleSummary(flight: flightA).orders == 2)
        #expect(try store.consoleSummary(flight: flightB).revenue == 400)
    }

    /// One commit moves an order of revision 2 away from flight A and brings another in at revision 2, neither the
    /// newest row of A: the count, the newest row and the sum of revisions stay. The board kept A's old totals until
    /// the sum of the rows' ids joined the version its kept sales are checked against.
    @Test(arguments: Engine.allCases)
    func keptSalesFollowASwapOfOrdersBetweenFlights(_ engine: Engine) throws {
        try Self.withStore(engine) { store throws in
            _ = try store.apply([batch("cart-1", 1, [order(1, flight: flightA), order(2, flight: flightB), order(3, flight: flightA)])])
            _ = try store.apply([batch("cart-1", 2, [order(1, revision: 2, flight: flightA, lines: [(chips, 1)])])])
            let before = try store.consoleSummary(flight: flightA)
            #expect(before.orders == 2 && before.items.map(\.name) == ["Chips", "Peanuts"], "\(before)")
            _ = try store.apply([
                batch("cart-1", 3, [
                    order(1, revision: 3, flight: flightB, lines: [(chips, 1)]),
                    order(2, revision: 2, flight: flightA, lines: [(popcorn, 1)]),
                ])
            ])
            let after = try store.consoleSummary(flight: flightA)
            #expect(after.orders == 2 && after.items.map(\.name) == ["Peanuts", "Popcorn"], "\(after)")
            #expect(after.revenue == (try store.flightReports(flight: flightA).flights.first?.revenue))
        }
    }

    /// Runs `body` with a fresh store on `engine` (a fresh PostgreSQL database, dropped after), or does nothing when
    /// PostgreSQL is not there (`TestPostgres.enabled`).
    static func withStore(_ engine: Engine, _ body: (any ConsoleReading & StoreWriter) throws -> Void) throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let database = engine == .postgres ? try TestPostgres.freshDatabase() : nil
        defer { database?.drop() }
        let store: any ConsoleReading & StoreWriter =
            if let database { try PostgresStore(url: database.url, logger: Logger(label: "test")) } else { try fixture.open() }
        defer { try? store.close() }
        try body(store)
    }

    /// A flight whose only order moved to another flight has no orders: the board does not list it, as `report
    /// flights` does not. Before, the board read the `flights` table, whose row stays.
    @Test(arguments: Engine.allCases)
    func aFlightWhoseOrdersAllMovedAwayIsNotListed(_ engine: Engine) throws {
        try Self.withStore(engine) { store throws in
            _ = try store.apply([batch("cart-1", 1, [order(1, flight: flightA)])])
            #expect(try store.consoleFlights() == [flightA])
            _ = try store.apply([batch("cart-1", 2, [order(1, revision: 2, flight: flightB)])])
            #expect(try store.consoleFlights() == [flightB])
            #expect(try store.flightsWithOrders() == [flightB])
        }
    }

    /// A device announces new flights only up to its flights per day: one stolen key announcing 64 fresh flights 5
    /// times a second added about 27 million rows a day, which every `status` read of the last 24 hours loaded.
    /// Flights it announced before are always recorded again; a day later it has room again.
    @Test(arguments: Engine.allCases)
    func aDeviceAnnouncesNewFlightsOnlyUpToItsFlightsPerDay(_ engine: Engine) throws {
        try Self.withStore(engine) { store throws in
            let flights = (0..<6).map { "ZA\(200 + $0)/2026-11-21" }
            let now = Date()
            #expect(try store.recordAnnouncement(device: "cart-1", flights: Array(flights[0..<2]), at: now, newFlightsPerDay: 3) == 2)
            // Two announced before, always recorded; of the four new ones, room for one (in text order).
            #expect(try store.recordAnnouncement(device: "cart-1", flights: flights.reversed(), at: now, newFlightsPerDay: 3) == 3)
            #expect(try store.fleetReport(flight: try FlightID(flights[2]), now: now).devices.map(\.device) == ["cart-1"])
            #expect(try store.fleetReport(flight: try FlightID(flights[3]), now: now).devices.isEmpty)
            // Another device has its own room.
            #expect(try store.recordAnnouncement(device: "cart-2", flights: [flights[5]], at: now, newFlightsPerDay: 3) == 1)
            // A day later the window holds none of cart-1's announcements.
            #expect(try store.recordAnnouncement(device: "cart-1", flights: [flights[3], flights[4]], at: now + 86_401, newFlightsPerDay: 3) == 2)
            // Flights announced again (as the agent does at each connection) are not new: with its three old flights
            // announced again, cart-1 still has room for one more new one.
            let later = now + 2 * 86_401
            #expect(try store.recordAnnouncement(device: "cart-1", flights: Array(flights[0..<3]), at: later, newFlightsPerDay: 1) == 3)
            #expect(try store.recordAnnouncement(device: "cart-1", flights: [flights[5]], at: later, newFlightsPerDay: 1) == 1)
        }
    }

    /// A group's refused and limited batches are counted per device in one write each (`serve` sums them): the
    /// counts add up and the last reason stays.
    @Test(arguments: Engine.allCases)
    func refusalsCountedTogetherAddUp(_ engine: Engine) throws {
        try Self.withStore(engine) { store throws in
            try store.recordRejection(device: "cart-1", reason: "first", at: date(1))
            try store.recordRejection(device: "cart-1", reason: "last", at: date(2), times: 3)
            try store.recordLimited(device: "cart-1", reason: "past 10 records/s", at: date(3), times: 5)
            let row = try #require(try store.deviceReport().devices.first { $0.device == "cart-1" })
            #expect(row.rejects == 4 && row.lastRejectReason == "last")
            #expect(row.limited == 5)
        }
    }

    /// Both engines keep each flight's bag counts and scans per device (SQLite catches up with the scans stored since,
    /// PostgreSQL counts again when the number of the flight's scans changed): after every group of the parity data
    /// set, written by another connection (an aggregator beside the console), they equal the luggage report's and the
    /// stored scans' counts. On PostgreSQL this failed with the kept tally answered whatever the number of scans.
    @Test(arguments: Engine.allCases)
    func keptTalliesCatchUpWithNewScans(_ engine: Engine) throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let database = engine == .postgres ? try TestPostgres.freshDatabase() : nil
        defer { database?.drop() }
        let store: any ConsoleReading & StoreWriter
        let writer: any StoreWriter
        if let database {
            store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
            writer = try PostgresStore(url: database.url, logger: Logger(label: "test"))
        } else {
            store = try fixture.open()
            writer = store
        }
        defer {
            try? store.close()
            if database != nil { try? writer.close() }
        }
        var stored: [UUID: String] = [:]
        for group in StoreParityTests.groups() {
            let outcomes = try writer.apply(group)
            for (batch, outcome) in zip(group, outcomes) where outcome.rejection == nil {
                for element in batch.records {
                    if case .scan(let scan) = element.record, stored[scan.id] == nil {
                        stored[scan.id] = scan.flight.rawValue + " " + scan.device
                    }
                }
            }
            let luggage = try store.luggageReport(flight: nil, status: [])
            for flight in try store.consoleFlights() {
                let rows = luggage.bags.filter { $0.bag.flight == flight }
                let summary = try store.consoleSummary(flight: flight)
                #expect(summary.bags.total == rows.count)
                #expect(summary.bags.arrived == rows.count { $0.status == .arrived })
                #expect(summary.bags.missing == rows.count { $0.status == .missing })
                #expect(summary.bags.inTransit == rows.count { $0.status == .inTransit })
                for device in try store.consoleDevices(flight: flight) {
                    #expect(device.scans == stored.values.count { $0 == flight.rawValue + " " + device.device })
                }
            }
        }
        _ = try writer.apply([Self.inAir()])
        try Self.checkAgreement(store)
    }

    @Test(
        .enabled(
            if: TestPostgres.enabled,
            "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")"))
    func postgresReadsAgreeWithTheReports() throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
        defer { try? store.close() }
        try Self.filled(store)
        try Self.checkAgreement(store)
    }

    /// The fleet on the console (issue 26 item 2), through the API's JSON as the page reads it: cart-1 announced
    /// flight A and was confirmed, cart-2 announced it only, cart-3 announced it two hours ago and was not heard from
    /// since, ramp-1 only stored scans; cart-1 also announced flight B. The board counts the announcing devices by the
    /// fleet report's state next to the devices seen; the flight page gives each device its state and announcement.
    /// Failed before: the JSON had no `fleet` and no `fleetState`.
    static func checkFleet(_ store: any ConsoleReading & StoreWriter, devicesFile: URL) throws {
        _ = try store.apply([
            batch("cart-1", 1, [order(1), order(2, flight: flightB)]),
            batch("ramp-1", 1, (0..<3).map { scan(10 + $0, tag: $0) }),
        ])
        let now = Date()
        try store.recordAnnouncement(device: "cart-1", flights: [flightA.rawValue, flightB.rawValue], at: now - 60)
        try store.recordConfirmation(device: "cart-1", flight: flightA.rawValue, at: now - 50)
        try store.recordAnnouncement(device: "cart-2", flights: [flightA.rawValue], at: now - 40)
        try store.recordAnnouncement(device: "cart-3", flights: [flightA.rawValue], at: now - 7_200)
        let api = ConsoleAPI(store: store, devicesFile: devicesFile, insecure: true, now: { now })
        func json(_ uri: String) throws -> [String: Any] {
            let answer = api.answer(MetricsServer.Request(method: .GET, uri: uri))
            #expect(answer.status == .ok, "\(uri): \(answer.body)")
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        }
        let lines = try #require(try json("/api/flights")["flights"] as? [[String: Any]])
        let byFlight = Dictionary(uniqueKeysWithValues: lines.map { ($0["flight"] as? String ?? "", $0) })
        let a = try #require(byFlight[flightA.rawValue])
        #expect(a["devices"] as? [String] == ["cart-1", "ramp-1"])
        #expect(a["fleet"] as? [String: Int] == ["announced": 3, "confirmed": 1, "sending": 1, "silent": 1], "\(a)")
        #expect(
            byFlight[flightB.rawValue]?["fleet"] as? [String: Int]
                == ["announced": 1, "confirmed": 0, "sending": 1, "silent": 0])

        let quoted = flightA.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let page = try json("/api/flight?flight=\(quoted)")
        #expect((page["summary"] as? [String: Any])?["fleet"] as? [String: Int] == a["fleet"] as? [String: Int])
        let devices = try #require(page["devices"] as? [[String: Any]])
        let states = Dictionary(uniqueKeysWithValues: devices.map { ($0["device"] as? String ?? "", $0["fleetState"] as? String ?? "") })
        #expect(states == ["cart-1": "confirmed", "cart-2": "sending", "cart-3": "silent", "ramp-1": "not-announced"])
        // The same states as `report devices --flight`.
        let report = try store.fleetReport(flight: flightA, now: now)
        for row in report.devices where row.announcedAt != nil { #expect(states[row.device] == row.state.rawValue) }
        let cart2 = try #require(devices.first { $0["device"] as? String == "cart-2" })
        #expect(cart2["announcedAt"] is String && cart2["orders"] as? Int == 0 && cart2["scans"] as? Int == 0)
        #expect(devices.first { $0["device"] as? String == "ramp-1" }?["announcedAt"] == nil)
    }

    /// The problems filter lists the day's flights with missing bags; an answer that would read flights for longer
    /// than ``ConsoleAPI/problemReadBudget`` (a first answer after a start) lists the problems among those it read and
    /// says how many it has not read (`unread`, and a note); once they are read (the console's warm-up), the list is
    /// whole. Failed before: there was no budget, and no `unread`.
    @Test func problemFlightsAnswerWithinTheirBudgetAndSayWhatIsUnread() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        let now = Date()
        let today = ConsoleAPI.day(now)
        let yesterday = ConsoleAPI.day(now - 86_400)
        // Six flights today, ZA2 and ZA5 each with a bag that departed and did not arrive; one of yesterday with one.
        var records: [Record] = []
        var n = 0
        for (number, day, missing) in [
            (1, today, false), (2, today, true), (3, today, false), (4, today, false), (5, today, true),
            (6, today, false), (7, yesterday, true),
        ] {
            let flight = try FlightID("ZA\(number)/\(day)")
            for bag in 0..<3 {
                n += 1
                records.append(scan(n, tag: number * 10 + bag, flight: flight))
                if !(missing && bag == 0) {
                    n += 1
                    records.append(scan(n, tag: number * 10 + bag, point: .destination, flight: flight))
                }
            }
        }
        _ = try store.apply([batch("ramp-1", 1, records)])
        func problems(_ api: ConsoleAPI) throws -> [String: Any] {
            let answer = api.answer(MetricsServer.Request(method: .GET, uri: "/api/flights?problems=1"))
            #expect(answer.status == .ok, "\(answer.body)")
            return try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        }
        func flights(_ page: [String: Any]) -> [String] {
            (page["flights"] as? [[String: Any]] ?? []).compactMap { $0["flight"] as? String }
        }
        let devicesFile = fixture.directory.appendingPathComponent("devices.json")
        var api = ConsoleAPI(store: store, devicesFile: devicesFile, insecure: true, now: { now })
        api.problemReadBudget = .zero
        // No time to read more than one flight: ZA1, no problem.
        let first = try problems(api)
        #expect(flights(first).isEmpty)
        #expect(first["unread"] as? Int == 5)
        #expect((first["note"] as? String)?.contains("5 of 6 flights not read yet") == true, "\(first)")
        // The reader knows which flights it has read (a later answer reads those cheaply, the others only early on).
        #expect(store.consoleSummaryIsKept(flight: try FlightID("ZA1/\(today)")))
        #expect(!store.consoleSummaryIsKept(flight: try FlightID("ZA2/\(today)")))
        api.problemReadBudget = .seconds(30)
        let whole = try problems(api)
        #expect(flights(whole) == ["ZA2/\(today)", "ZA5/\(today)"])
        #expect(whole["matching"] as? Int == 2)
        #expect(whole["unread"] == nil)
        #expect(whole["note"] == nil)
        #expect(try (1...6).allSatisfy { store.consoleSummaryIsKept(flight: try FlightID("ZA\($0)/\(today)")) })
    }

    /// `serve --console --metrics` on PostgreSQL, as deployed: the console has a reader for its answers and one for
    /// its start-up read, sharing their kept totals, beside the metrics' flight-bags reader. A device syncs; the
    /// board, the flight's page and a scrape all show its bags, and the board follows a second sync.
    @Test func postgresServeWithConsoleAndMetricsShowsASync() async throws {
        guard TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let serve = try await ServeProcess(
            store: database.url, in: fixture.directory, name: "ground", metrics: true, console: true)
        let console = try #require(serve.consoleEndpoint)
        let metrics = try #require(serve.metricsEndpoint)
        let bearer = ["Authorization: Bearer \(try ConsoleSignInTests.token(in: serve))"]
        let ramp = try ProofOfDeliveryEndToEndTests.Agent(device: "ramp-1", serve: serve, in: fixture.directory)
        func board() async throws -> [String: Any]? {
            let answer = try await ConsoleSignInTests.get(console, "/api/flights", bearer)
            #expect(answer.status == 200, "\(answer.body)")
            let page = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
            return (page?["flights"] as? [[String: Any]])?.first {
                $0["flight"] as? String == ProofOfDeliveryEndToEndTests.flight
            }
        }
        for (round, total) in [(1, 30), (2, 50)] {
            try await ramp.capture(scans: total == 30 ? 30 : 20)
            let (status, output) = try await ramp.sync()
            #expect(status == 0, "round \(round): \(output)")
            let line = try #require(try await board(), "round \(round)")
            #expect((line["bags"] as? [String: Int])?["total"] == total, "round \(round): \(line)")
            #expect((line["bags"] as? [String: Int])?["inTransit"] == total, "round \(round): \(line)")
        }
        let quoted = ProofOfDeliveryEndToEndTests.flight.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let page = try await ConsoleSignInTests.get(console, "/api/flight?flight=\(quoted)&status=in-transit", bearer)
        #expect(page.status == 200 && page.body.contains("\"scans\":50"), "\(page.body)")
        let scrape = try await ConsoleSignInTests.get(metrics, "/metrics")
        #expect(scrape.status == 200 && scrape.body.contains("jetbridge_store_commit_seconds"), "\(scrape.body.prefix(500))")
        #expect(!serve.logText.contains(#""level":"error""#), "\(serve.logText)")
    }

    @Test func sqliteBoardAndFlightPageShowTheFleet() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        try Self.checkFleet(store, devicesFile: fixture.directory.appendingPathComponent("devices.json"))
    }

    @Test(
        .enabled(
            if: TestPostgres.enabled,
            "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")"))
    func postgresBoardAndFlightPageShowTheFleet() throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
        defer { try? store.close() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        try Self.checkFleet(store, devicesFile: fixture.directory.appendingPathComponent("devices.json"))
    }

    /// EXPLAIN QUERY PLAN of every console query: `scans`, `orders`, `announcements` and `device_flights` are only
    /// searched through an index, never scanned in full, and scans are never sorted in a temporary tree. Failed before
    /// `console-indexes` (every bag read was `SCAN scans` with `USE TEMP B-TREE FOR GROUP BY`), and before
    /// `device-flights-flight` (the devices of a flight were `SCAN device_flights USING COVERING INDEX
    /// device_flights_window`: every device's every flight).
    @Test func everyQueryUsesAnIndex() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        try Self.filled(store)
        for (name, plan) in try store.consoleQueryPlans() {
            for line in plan {
                let fullScan =
                    ((line.hasPrefix("SCAN scans") || line.hasPrefix("SCAN orders") || line.hasPrefix("SCAN s")
                        || line.hasPrefix("SCAN announcements") || line == "SCAN a")
                        && !line.contains("INDEX")) || line.hasPrefix("SCAN device_flights")
                #expect(!fullScan, "\(name): \(plan)")
                // A flight's orders may be grouped in a temporary tree (one flight's rows), and so may the devices of
                // one flight (the fleet query's union and order); scans never.
                let ordersOfOneFlight = plan.contains { $0.hasPrefix("SEARCH orders USING INDEX orders_flight") }
                let devicesOfOneFlight = plan.contains { $0.contains("USING COVERING INDEX device_flights_flight (flight=?)") }
                #expect(!line.contains("TEMP B-TREE") || ordersOfOneFlight || devicesOfOneFlight, "\(name): \(plan)")
            }
        }
    }
}
