import Foundation
import JetbridgeTestKit
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
}
