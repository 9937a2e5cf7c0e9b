import Foundation
@testable import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `serve --console`: a real server in this process with its console on loopback, real devices syncing, its pages
/// and JSON read over HTTP. (The browser test, `Tests/console/browser_test.py`, drives the pages in Chromium.)
@Suite("Console: the HTTP side")
struct ConsoleServerTests {
    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:]
        }
    }

    /// The console's token in the server's home.
    static func token(_ server: AggregatorServer) throws -> String {
        try String(contentsOf: server.home.consoleTokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `path` with the token as `Authorization: Bearer` (or `bearer`, when given; none when empty).
    static func get(
        _ server: AggregatorServer, _ path: String, method: String = "GET", bearer: String? = nil
    ) async throws -> Answer {
        let endpoint = try #require(server.consoleEndpoint)
        var request = URLRequest(url: try #require(URL(string: "http://\(endpoint)\(path)")))
        request.httpMethod = method
        let bearer = try bearer ?? Self.token(server)
        if !bearer.isEmpty { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        let (data, response) = try await URLSession.shared.data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields { headers["\(name)".lowercased()] = "\(value)" }
        return Answer(status: http.statusCode, headers: headers, body: String(decoding: data, as: UTF8.self))
    }

    @Test func pagesAndNumbersFollowTheDevicesSyncs() async throws {
        let fixture = try ServerFixture(devices: ["cart-1", "ramp-1"]) { $0.console = "127.0.0.1:0" }
        let cart = try await fixture.device("cart-1")
        let ramp = try await fixture.device("ramp-1")
        defer {
            cart.close()
            ramp.close()
        }
        let flight = flightA.rawValue
        let quoted = flight.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!

        // The board's page: inline script and style under a nonce, a CSP that allows nothing else.
        let page = try await Self.get(fixture.server, "/")
        #expect(page.status == 200)
        let policy = try #require(page.headers["content-security-policy"])
        #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'nonce-"))
        let nonce = try #require(policy.split(separator: "'").first { $0.hasPrefix("nonce-") }?.dropFirst(6))
        #expect(page.body.contains("<script nonce=\"\(nonce)\">"))
        #expect(!page.body.contains("http://") && !page.body.contains("https://"), "no external asset")

        // Nothing yet.
        var flights = try await Self.get(fixture.server, "/api/flights")
        #expect(flights.status == 200)
        #expect((flights.json["flights"] as? [Any])?.isEmpty == true)

        // Orders of two seats and five bags, one of them scanned at the destination: four missing.
        try cart.send(try outgoing("cart-1", 1, [order(1, seat: "17B"), order(2, seat: "3A", lines: [(chips, 1)])]))
        #expect(try await cart.ack()?.status == .stored)
        try ramp.send(
            try outgoing("ramp-1", 1, (0..<5).map { scan($0, tag: $0) } + [scan(10, tag: 0, point: .destination)]))
        #expect(try await ramp.ack()?.status == .stored)

        flights = try await Self.get(fixture.server, "/api/flights")
        let line = try #require((flights.json["flights"] as? [[String: Any]])?.first)
        #expect(line["flight"] as? String == flight)
        #expect(line["orders"] as? Int == 2)
        #expect(line["revenue"] as? Int == 700)
        #expect(line["revenueText"] as? String == "7.00 USD")
        #expect(line["problem"] as? Bool == true)
        #expect(line["devices"] as? [String] == ["cart-1", "ramp-1"])
        let bags = try #require(line["bags"] as? [String: Int])
        #expect(bags == ["total": 5, "arrived": 1, "missing": 4, "inTransit": 0, "checked": 0])
        #expect(line["fleet"] as? [String: Int] == ["announced": 0, "confirmed": 0, "sending": 0, "silent": 0])

        // The fleet: both announce the flight, the cart's summary is confirmed, the ramp's never asked for. The board
        // counts one confirmed and one sending; the flight page gives each its state (failed before: no `fleet`,
        // no `fleetState`).
        for (device, name) in [(cart, "cart-1"), (ramp, "ramp-1")] {
            try device.announce(FlightAnnounce(device: name, flights: [flight]))
            #expect(try await device.announceAnswer()?.status == .recorded)
        }
        try cart.ask(
            ProofOfDeliveryServerTests.summary(
                of: [order(1, seat: "17B"), order(2, seat: "3A", lines: [(chips, 1)])], device: "cart-1"))
        #expect(try await cart.summaryAnswer()?.status == .confirmed)
        flights = try await Self.get(fixture.server, "/api/flights")
        let fleet = (flights.json["flights"] as? [[String: Any]])?.first?["fleet"] as? [String: Int]
        #expect(fleet == ["announced": 2, "confirmed": 1, "sending": 1, "silent": 0])

        // A flight's page: missing bags first, its devices with their last contact.
        var detail = try await Self.get(fixture.server, "/api/flight?flight=\(quoted)")
        #expect(detail.status == 200)
        #expect(detail.json["status"] as? String == "missing")
        let missing = try #require(detail.json["bags"] as? [[String: Any]])
        #expect(missing.count == 4)
        #expect(missing.allSatisfy { $0["status"] as? String == "missing" && $0["lastDevice"] as? String == "ramp-1" })
        let devices = try #require(detail.json["devices"] as? [[String: Any]])
        #expect(devices.map { $0["device"] as? String } == ["cart-1", "ramp-1"])
        #expect(devices.allSatisfy { $0["lastContact"] is String })
        #expect(devices.map { $0["fleetState"] as? String } == ["confirmed", "sending"])
        #expect(devices.allSatisfy { $0["announcedAt"] is String })
        #expect((detail.json["summary"] as? [String: Any])?["fleet"] as? [String: Int] == fleet)

        // The rest arrive: the same request now shows none missing.
        try ramp.send(try outgoing("ramp-1", 7, (1..<5).map { scan(20 + $0, tag: $0, point: .destination) }))
        #expect(try await ramp.ack()?.status == .stored)
        detail = try await Self.get(fixture.server, "/api/flight?flight=\(quoted)")
        let summary = try #require(detail.json["summary"] as? [String: Any])
        #expect((summary["bags"] as? [String: Int])?["arrived"] == 5)
        #expect(summary["problem"] as? Bool == false)
        #expect(detail.json["status"] as? String == "all")

        // Bag lookup, receipt, devices.
        let tag = uuid(1_000_000 + 3).uuidString
        let bag = try await Self.get(fixture.server, "/api/bag?tag=\(tag)")
        #expect((bag.json["bags"] as? [[String: Any]])?.first?["status"] as? String == "arrived")
        let receipt = try await Self.get(fixture.server, "/api/receipt?flight=\(quoted)&seat=17B")
        let expected = try #require(try fixture.server.store.receipt(flight: flightA, seat: try Seat("17B")))
        #expect(receipt.json["text"] as? String == expected.text)
        let all = try await Self.get(fixture.server, "/api/devices")
        let listed = try #require(all.json["devices"] as? [[String: Any]])
        #expect(listed.map { $0["device"] as? String } == ["cart-1", "ramp-1"])
        #expect(listed.allSatisfy { $0["allowed"] as? Bool == true })
        // An allow list that cannot be read: serve keeps the list it had, so the console says it does not know
        // (before, every device read as revoked).
        let allowList = try Data(contentsOf: fixture.home.devicesFile)
        try Data("not json".utf8).write(to: fixture.home.devicesFile)
        let unreadable = try await Self.get(fixture.server, "/api/devices")
        try allowList.write(to: fixture.home.devicesFile)
        #expect(unreadable.json["allowListError"] is String, "\(unreadable.json)")
        let unknown = try #require(unreadable.json["devices"] as? [[String: Any]])
        #expect(unknown.count == 2 && unknown.allSatisfy { $0["allowed"] == nil }, "\(unknown)")

        // Bad input: a clear 400 naming it; other methods 405; unknown paths 404.
        let bad = try await Self.get(fixture.server, "/api/flight?flight=nope")
        #expect(bad.status == 400)
        #expect((bad.json["error"] as? String)?.contains("'nope' is not a flight id") == true)
        #expect(try await Self.get(fixture.server, "/api/bag?tag=xyz").status == 400)
        #expect(try await Self.get(fixture.server, "/api/flights?date=tomorrow").status == 400)
        // Each parameter a script could get wrong is named, never read as a default.
        for (query, says) in [
            ("date=2026-02-30", "date must be YYYY-MM-DD, not '2026-02-30'"),
            ("date=2026-13-01", "date must be YYYY-MM-DD"),
            ("problems=yes", "problems must be 1 or 0, not 'yes'"),
            ("page=0", "page must be a whole number from 1 to 1000000, not '0'"),
            ("page=abc", "page must be a whole number from 1 to 1000000, not 'abc'"),
            // Past it, the page's offset overflowed and stopped the whole aggregator.
            ("page=999999999999999999", "page must be a whole number from 1 to 1000000"),
            ("page=99999999999999999999", "page must be a whole number from 1 to 1000000"),
        ] {
            let answer = try await Self.get(fixture.server, "/api/flights?\(query)")
            #expect(answer.status == 400, "\(query)")
            #expect((answer.json["error"] as? String)?.contains(says) == true, "\(query): \(answer.json)")
        }
        for query in ["date=2024-02-29", "problems=0", "page=", "page=2"] {
            #expect(try await Self.get(fixture.server, "/api/flights?\(query)").status == 200, "\(query)")
        }
        let checked = try await Self.get(fixture.server, "/api/flight?flight=\(quoted)&status=checked")
        #expect(checked.status == 400)
        #expect((checked.json["error"] as? String)?.contains("status must be missing, in-transit, arrived or all") == true)
        let post = try await Self.get(fixture.server, "/", method: "POST")
        #expect(post.status == 405 && post.headers["allow"] == "GET, HEAD", "\(post.headers)")
        #expect(try await Self.get(fixture.server, "/nothing-here").status == 404)
        await fixture.stop()
    }

    @Test func aMalformedConsoleSettingIsRefusedNamingIt() throws {
        var configuration = AggregatorConfiguration()
        configuration.console = "9570"
        try configuration.validate()
        #expect(try ConsoleServer.endpoint("9570") == "127.0.0.1:9570")
        #expect(try ConsoleServer.endpoint(":9570") == "127.0.0.1:9570")
        #expect(try ConsoleServer.endpoint("0.0.0.0:9570") == "0.0.0.0:9570")
        configuration.console = "localhost"
        #expect {
            try configuration.validate()
        } throws: { error in
            (error as? AggregatorError)?.message.contains("configuration key 'console': the console endpoint 'localhost'")
                == true
        }
    }
}
