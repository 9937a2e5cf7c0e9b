import Foundation
import JetbridgeTestKit
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeProtocol
import MessagePack
import Testing
import ZeroMQ
import SystemSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `serve --metrics`: the Prometheus endpoint and the health probes of a real server, scraped over HTTP while real
/// devices sync.
@Suite("Metrics: /metrics, /healthz, /readyz")
struct MetricsTests {
    /// GETs `path` on the server's metrics endpoint: status and body.
    static func get(_ server: AggregatorServer, _ path: String) async throws -> (Int, String) {
        let endpoint = try #require(server.metricsEndpoint)
        let url = try #require(URL(string: "http://\(endpoint)\(path)"))
        let (data, response) = try await URLSession.shared.data(from: url)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    /// The value of the sample `name{labels}` in an exposition, nil when absent.
    static func sample(_ text: String, _ name: String, _ labels: [String: String] = [:]) -> Double? {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let series = line[..<space]
            let metric = series.split(separator: "{", maxSplits: 1)
            guard metric.first.map(String.init) == name else { continue }
            let present = metric.count > 1 ? String(metric[1].dropLast()) : ""
            let wanted = labels.allSatisfy { present.contains("\($0.key)=\"\($0.value)\"") }
            if wanted { return Double(line[line.index(after: space)...]) }
        }
        return nil
    }

    @Test func countersEqualWhatTheDevicesSentAndWhatTheStoreMadeOfIt() async throws {
        let fixture = try ServerFixture(devices: ["cart-1", "cart-2"]) { $0.metrics = "127.0.0.1:0" }
        let started = Date().timeIntervalSince1970
        let one = try await fixture.device("cart-1")
        let two = try await fixture.device("cart-2")
        defer {
            one.close()
            two.close()
        }
        let (health, _) = try await Self.get(fixture.server, "/healthz")
        #expect(health == 200)
        // Another method: 405, saying which ones the endpoint takes (RFC 9110).
        let metricsEndpoint = try #require(fixture.server.metricsEndpoint)
        var delete = URLRequest(url: try #require(URL(string: "http://\(metricsEndpoint)/metrics")))
        delete.httpMethod = "DELETE"
        let (_, deleted) = try await URLSession.shared.data(for: delete)
        let refused = try #require(deleted as? HTTPURLResponse)
        #expect(refused.statusCode == 405 && refused.value(forHTTPHeaderField: "Allow") == "GET, HEAD")

        // cart-1: 3 batches of 10 new orders, the second again (10 duplicates), then one rejected batch of 2.
        var acks: [Ack] = []
        for index in 0..<3 {
            let batch = try outgoing("cart-1", UInt64(index * 10 + 1), (0..<10).map { order(index * 10 + $0) })
            try one.send(batch)
            acks.append(try #require(try await one.ack()))
            if index == 1 {
                try one.send(batch)
                acks.append(try #require(try await one.ack()))
            }
            // Scraped mid-sync too: the endpoint answers while batches flow.
            let (status, _) = try await Self.get(fixture.server, "/metrics")
            #expect(status == 200)
        }
        let good = try MessagePackEncoder().encode(owned(order(99), by: "cart-1"))
        let hostile = try MessagePackEncoder().encode(["type": "order", "id": "not a uuid"])
        try one.send(
            OutgoingBatch(device: "cart-1", records: [(sequence: 31, payload: good), (sequence: 32, payload: hostile)]))
        acks.append(try #require(try await one.ack()))
        // cart-2: 5 orders of its own, and a header naming cart-1 (forbidden).
        try two.send(try outgoing("cart-2", 1, (0..<5).map { order(100 + $0) }))
        acks.append(try #require(try await two.ack()))
        try two.send(try outgoing("cart-1", 6, [order(200)]))
        acks.append(try #require(try await two.ack()))
        #expect(acks.map(\.status) == [.stored, .stored, .stored, .stored, .rejected, .stored, .forbidden])

        // The refusals' counts reach the store thread after their acks: scrape until the queue is empty.
        var (status, text) = try await Self.get(fixture.server, "/metrics")
        let deadline = ContinuousClock.now + .seconds(20)
        while Self.sample(text, "jetbridge_batch_queue_depth") != 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
            (status, text) = try await Self.get(fixture.server, "/metrics")
        }
        #expect(status == 200)
        func value(_ name: String, _ labels: [String: String]) -> Double? { Self.sample(text, name, labels) }
        let new = acks.compactMap(\.new).reduce(0, +)
        let duplicates = acks.compactMap(\.duplicates).reduce(0, +)
        #expect(new == 35 && duplicates == 10)
        #expect(value("jetbridge_records_total", ["device": "cart-1", "outcome": "new"]) == 30)
        #expect(value("jetbridge_records_total", ["device": "cart-1", "outcome": "duplicate"]) == 10)
        #expect(value("jetbridge_records_total", ["device": "cart-1", "outcome": "rejected"]) == 2)
        #expect(value("jetbridge_records_total", ["device": "cart-2", "outcome": "new"]) == 5)
        #expect(value("jetbridge_records_total", ["device": "cart-2", "outcome": "rejected"]) == 1)
        #expect(value("jetbridge_batches_total", ["device": "cart-1", "status": "stored"]) == 4)
        #expect(value("jetbridge_batches_total", ["device": "cart-1", "status": "rejected"]) == 1)
        #expect(value("jetbridge_batches_total", ["device": "cart-2", "status": "stored"]) == 1)
        #expect(value("jetbridge_batches_total", ["device": "cart-2", "status": "forbidden"]) == 1)
        #expect(value("jetbridge_handshakes_total", ["result": "accepted"]).map { $0 >= 4 } == true)
        #expect(value("jetbridge_handshakes_total", ["result": "refused-key"]) == 0)
        let last = try #require(value("jetbridge_device_last_batch_timestamp_seconds", ["device": "cart-1"]))
        #expect(last >= started.rounded(.down) && last <= Date().timeIntervalSince1970 + 1)
        #expect(value("jetbridge_store_commit_seconds_count", [:]).map { $0 >= 1 } == true)
        #expect(value("jetbridge_batch_queue_depth", [:]) == 0)
        #expect(value("jetbridge_acks_held", [:]) == 0)
        #expect(value("jetbridge_receipts_pending", [:]) != nil)
        #expect(value("jetbridge_receipts_refresh_seconds_count", [:]).map { $0 >= 1 } == true)
        #expect(value("process_resident_memory_bytes", [:]).map { $0 > 1_000_000 } == true)
        #expect(value("process_cpu_seconds_total", [:]).map { $0 > 0 } == true)
        #expect(value("process_open_fds", [:]).map { $0 > 3 } == true)
        let start = try #require(value("process_start_time_seconds", [:]))
        #expect(abs(start - Date().timeIntervalSince1970) < 3_600)
        await fixture.stop()
    }

    @Test func everyAllowedDeviceHasItsSeriesBeforeItsFirstBatch() async throws {
        // cart-3 never syncs: without its series an alert on `time() - last_batch > 3600` could never fire for it.
        let before = Date().timeIntervalSince1970
        let fixture = try ServerFixture(devices: ["cart-1", "cart-3"]) { $0.metrics = "127.0.0.1:0" }
        let (status, text) = try await Self.get(fixture.server, "/metrics")
        #expect(status == 200)
        for device in ["cart-1", "cart-3"] {
            let last = Self.sample(text, "jetbridge_device_last_batch_timestamp_seconds", ["device": device])
            #expect(last.map { $0 >= before.rounded(.down) && $0 <= Date().timeIntervalSince1970 + 1 } == true, "\(device): \(text)")
            #expect(Self.sample(text, "jetbridge_records_total", ["device": device, "outcome": "new"]) == 0)
            #expect(Self.sample(text, "jetbridge_batches_total", ["device": device, "status": "stored"]) == 0)
            // The limited-batches alert is an increase(): a series first seen at 1 would never show one.
            #expect(Self.sample(text, "jetbridge_batches_total", ["device": device, "status": "limited"]) == 0)
        }
        for result in ["accepted", "refused-key", "refused-mechanism", "refused-busy", "malformed", "failed"] {
            #expect(Self.sample(text, "jetbridge_handshakes_total", ["result": result]) == 0, "\(result): \(text)")
        }
        await fixture.stop()
    }

    @Test func readyzGoesUnreadyWhenTheStoreCannotCommitAndBackAfterACommit() async throws {
        let fixture = try ServerFixture { $0.metrics = "127.0.0.1:0" }
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        #expect(try await Self.get(fixture.server, "/readyz") == (200, "ready\n"))

        // The store refuses every order for seat 3C inside the transaction, and the idle write probe fails, as on a
        // full disk: /readyz stays unready for as long as the fault is held, however slowly this test runs.
        try fixture.fixture.failOrders(seat: "3C")
        try fixture.fixture.failWriteProbe()
        let batch = try outgoing("cart-1", 1, [order(1), order(2, seat: "3C")])
        try device.send(batch)
        #expect(try await device.ack()?.status == .retry)
        let (unready, reason) = try await Self.get(fixture.server, "/readyz")
        #expect(unready == 503)
        #expect(reason.contains("the last store transaction failed"), "\(reason)")
        #expect(try await Self.get(fixture.server, "/healthz").0 == 200)

        try await Task.sleep(for: .milliseconds(1_500))  // past an idle probe: it must not clear the fault
        #expect(try await Self.get(fixture.server, "/readyz").0 == 503)

        try fixture.fixture.healOrders()
        try fixture.fixture.healWriteProbe()
        try device.send(batch)
        #expect(try await device.ack()?.status == .stored)
        #expect(try await Self.get(fixture.server, "/readyz") == (200, "ready\n"))
        let (_, text) = try await Self.get(fixture.server, "/metrics")
        #expect(Self.sample(text, "jetbridge_batches_total", ["device": "cart-1", "status": "retry"]) == 1)
        #expect(Self.sample(text, "jetbridge_store_commit_seconds_count").map { $0 >= 2 } == true)

        fixture.server.stop()
        await fixture.server.finished()
        #expect(fixture.server.readiness()?.contains("stopping") == true)
        fixture.fixture.remove()
    }

    @Test func aBadOrBusyMetricsEndpointStopsTheStartWithAClearError() async throws {
        // The first server keeps its metrics port for the whole test: freeing it and binding it again let another
        // test's server take it in between (seen once in a full run).
        let blocker = try ServerFixture { $0.metrics = "127.0.0.1:0" }
        let busy = try #require(blocker.server.metricsEndpoint)
        var configuration = AggregatorConfiguration()
        configuration.dataEndpoint = "tcp://127.0.0.1:*"
        configuration.acksEndpoint = "tcp://127.0.0.1:*"
        configuration.metrics = "localhost"
        #expect(throws: AggregatorError.self) { try configuration.validate() }
        let other = try Fixture()
        defer { other.remove() }
        let home = AggregatorHome(directory: other.directory)
        _ = try ServerKeys.generate(in: home, force: false)
        configuration.metrics = busy
        let error = #expect(throws: AggregatorError.self) {
            _ = try AggregatorServer(home: home, configuration: configuration, logger: quietLogger)
        }
        #expect(error?.code == .unavailable)
        #expect(error?.message.contains("metrics endpoint \(busy)") == true, "\(String(describing: error))")
        // The reason as the operator knows it, not NIO's description of the call that failed.
        #expect(error?.message.hasSuffix("Address already in use") == true, "\(String(describing: error))")
        await blocker.stop()
    }
}
