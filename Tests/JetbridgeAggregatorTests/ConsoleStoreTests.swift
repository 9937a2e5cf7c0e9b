import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import Testing

/// The console's store reads (``ConsoleReading``) against the reports they must agree with, on the parity data set,
/// and their query plans: each read goes through an index, none sorts or scans the whole `scans` table.
@Suite("Console: store reads")
struct ConsoleStoreTests {
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

    /// The SQLite engine keeps each flight's bag counts and scans per device and catches up with the scans stored
    /// since: after every group of the parity data set they equal the luggage report's and the stored scans' counts.
    @Test func keptTalliesCatchUpWithNewScans() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        var stored: [UUID: String] = [:]
        for group in StoreParityTests.groups() {
            let outcomes = try store.apply(group)
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
        _ = try store.apply([Self.inAir()])
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

    /// EXPLAIN QUERY PLAN of every console query: `scans` and `orders` are only searched through an index, never
    /// scanned in full, and scans are never sorted in a temporary tree. Failed before `console-indexes` (every bag read was
    /// `SCAN scans` with `USE TEMP B-TREE FOR GROUP BY`).
    @Test func everyQueryUsesAnIndex() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        try Self.filled(store)
        for (name, plan) in try store.consoleQueryPlans() {
            for line in plan {
                let fullScan = (line.hasPrefix("SCAN scans") || line.hasPrefix("SCAN orders") || line.hasPrefix("SCAN s"))
                    && !line.contains("INDEX")
                #expect(!fullScan, "\(name): \(plan)")
                // A flight's orders may be grouped in a temporary tree (one flight's rows); scans never.
                let ordersOfOneFlight = plan.contains { $0.hasPrefix("SEARCH orders USING INDEX orders_flight") }
                #expect(!line.contains("TEMP B-TREE") || ordersOfOneFlight, "\(name): \(plan)")
            }
        }
    }
}
