import Foundation
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Testing

@testable import JetbridgeAggregator

/// `jetbridge_flight_bags{flight, status}` (issue 26's leftover: the "missing bags after arrival" alert's input): a real
/// aggregator with CURVE on SQLite and on PostgreSQL, ramp devices storing scans on raw ZeroMQ sockets, `/metrics`
/// scraped over HTTP. Each flight dated today or yesterday has its bags by status as the console's board counts them;
/// an older flight is not exported. Failed before: there was no such family.
@Suite("Flight bags metric (both engines)")
struct FlightBagsMetricTests {
    typealias Engine = ProofOfDeliveryServerTests.Engine

    static func day(_ back: Int) -> String { ConsoleAPI.day(Date() - Double(back) * 86_400) }

    /// The bag series of `flight` in a scrape, by status.
    static func bags(_ text: String, _ flight: String) -> [String: Double] {
        var result: [String: Double] = [:]
        for status in ["checked", "in-transit", "arrived", "missing"] {
            result[status] = MetricsTests.sample(text, "jetbridge_flight_bags", ["flight": flight, "status": status])
        }
        return result
    }

    @Test(arguments: Engine.allCases)
    func eachRecentFlightsBagsByStatusAreInTheMetrics(_ engine: Engine) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let database = engine == .postgres ? try TestPostgres.freshDatabase() : nil
        defer { database?.drop() }
        let fixture = try ServerFixture(devices: ["ramp-1", "ramp-2"], flightBagsInterval: .milliseconds(200)) {
            $0.metrics = "127.0.0.1:0"
            if let database { $0.store = database.url }
        }
        let today = try FlightID("ZA7/\(Self.day(0))")
        let yesterday = try FlightID("ZA8/\(Self.day(1))")
        let old = try FlightID("ZA9/\(Self.day(5))")
        // At the origin: 10 bags of today's flight, 4 of yesterday's, 3 of one five days old.
        let origin = try await fixture.device("ramp-1")
        var records = (0..<10).map { scan($0, tag: $0, flight: today, device: "ramp-1") }
        records += (0..<4).map { scan(100 + $0, tag: 100 + $0, flight: yesterday, device: "ramp-1") }
        records += (0..<3).map { scan(200 + $0, tag: 200 + $0, flight: old, device: "ramp-1") }
        try origin.send(try outgoing("ramp-1", 1, records))
        #expect(try await origin.ack()?.status == .stored)
        origin.close()

        func scrapeUntil(_ what: String, _ condition: (String) -> Bool) async throws -> String {
            let deadline = ContinuousClock.now + .seconds(20)
            while true {
                let text = try await MetricsTests.get(fixture.server, "/metrics").1
                if condition(text) || ContinuousClock.now > deadline { return text }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        var text = try await scrapeUntil("today's bags in transit") { Self.bags($0, today.rawValue)["in-transit"] == 10 }
        #expect(Self.bags(text, today.rawValue) == ["checked": 0, "in-transit": 10, "arrived": 0, "missing": 0])
        #expect(Self.bags(text, yesterday.rawValue) == ["checked": 0, "in-transit": 4, "arrived": 0, "missing": 0])
        #expect(!text.contains(old.rawValue), "a flight five days old is not exported")
        #expect(text.contains("# HELP jetbridge_flight_bags ") && text.contains("# TYPE jetbridge_flight_bags gauge"))

        // At the destination: 7 of today's 10 arrive; the other 3 are missing (the board's rule).
        let destination = try await fixture.device("ramp-2")
        let arrivals = (0..<7).map { scan(300 + $0, tag: $0, point: .destination, flight: today, device: "ramp-2") }
        try destination.send(try outgoing("ramp-2", 1, arrivals))
        #expect(try await destination.ack()?.status == .stored)
        destination.close()
        text = try await scrapeUntil("today's arrivals") { Self.bags($0, today.rawValue)["arrived"] == 7 }
        #expect(Self.bags(text, today.rawValue) == ["checked": 0, "in-transit": 0, "arrived": 7, "missing": 3])
        #expect(Self.bags(text, yesterday.rawValue)["in-transit"] == 4)
        // The same numbers as the console's board reads.
        let board = try fixture.server.flightBags.map { try $0.store.consoleBagCounts(flight: today) }
        #expect(board?.missing == 3 && board?.arrived == 7)
        await fixture.stop()
    }

    /// The reading is bounded: of 450 flights today with bags, the first 400 (in flight id order) are read, and 200
    /// exported, those with missing bags first; a flight three days old is not read.
    @Test func aReadingReadsAtMost400FlightsAndExports200MissingFirst() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let reader = FlightBagsReader(store: store, logger: quietLogger)
        defer { reader.close() }
        let flights = try (0..<450).map { try FlightID("ZA\(1_000 + $0)/\(Self.day(0))") }
        var n = 0
        for chunk in stride(from: 0, to: flights.count, by: 50) {
            var records: [Record] = []
            for index in chunk..<chunk + 50 {
                for tag in 0..<2 {
                    n += 1
                    records.append(scan(n, tag: index * 2 + tag, flight: flights[index]))
                }
                // One of the two bags of ZA1350…ZA1359 (past the first 200) and of ZA1420 (past the first 400)
                // arrives: the other is missing.
                if (350..<360).contains(index) || index == 420 {
                    n += 1
                    records.append(scan(n, tag: index * 2, point: .destination, flight: flights[index]))
                }
            }
            _ = try store.apply([batch("ramp-\(chunk / 50)", 1, records)])
        }
        _ = try store.apply([batch("ramp-old", 1, [scan(100_000, tag: 100_000, flight: try FlightID("ZA1/\(Self.day(3))"))])])
        let lines = try reader.read(now: Date())
        #expect(lines.count == FlightBagsReader.maxFlights)
        let names = Set(lines.map(\.flight))
        for index in 350..<360 {
            #expect(names.contains(flights[index].rawValue), "\(flights[index]) has a missing bag and is exported")
        }
        #expect(!names.contains(flights[420].rawValue), "past the 400 flights read")
        #expect(names.contains(flights[0].rawValue) && !names.contains(flights[199].rawValue))
        #expect(lines.map(\.flight) == lines.map(\.flight).sorted())
        #expect(lines.first { $0.flight == flights[355].rawValue }?.bags.missing == 1)
        #expect(lines.first { $0.flight == flights[0].rawValue }?.bags.inTransit == 2)
        #expect(!names.contains { $0.hasPrefix("ZA1/") })
    }
}
