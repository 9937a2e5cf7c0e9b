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

    static func day(_ back: Int) -> String { FlightBagsReader.day(Date() - Double(back) * 86_400) }

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
}
