import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Testing
import ZeroMQ

/// Per-device limits (issue 14): past one, a batch is answered `limited` with a `retryAfter`, stored nowhere, counted
/// in `report devices`; never rejected.
@Suite("Server: per-device limits")
struct LimitTests {
    /// Sets `limits` in the fixture's allow list and waits for the server to reload it.
    func setLimits(_ limits: [String: DeviceLimits.Override], in fixture: ServerFixture) async throws {
        var list = try DeviceAllowlist.load(from: fixture.home.devicesFile)
        list.limits = limits
        try list.save(to: fixture.home.devicesFile)
        let reloads = fixture.server.currentStatistics.allowlistReloads
        fixture.server.requestReload()
        try await waitUntil("the allow list is reloaded") { fixture.server.currentStatistics.allowlistReloads > reloads }
    }

    @Test func pastItsRecordsPerFlightADeviceIsLimitedOnThatFlightOnly() async throws {
        let fixture = try ServerFixture(devices: ["cart-1", "cart-2"]) { $0.metrics = "127.0.0.1:0" }
        try await setLimits(["cart-1": .init(recordsPerFlight: 3)], in: fixture)
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        try device.send(try outgoing("cart-1", 1, [order(1), order(2), order(3)]))
        #expect(try await device.ack()?.status == .stored)
        // A resend of the same records is no new record: still stored.
        try device.send(try outgoing("cart-1", 1, [order(1), order(2), order(3)]))
        #expect(try await device.ack()?.status == .stored)
        try device.send(try outgoing("cart-1", 4, [order(4)]))
        let ack = try #require(try await device.ack())
        #expect(ack.status == .limited)
        #expect(ack.first == 4 && ack.last == 4)
        #expect((ack.retryAfter ?? 0) >= 60)
        #expect(ack.reason?.contains("records per flight") == true, "\(ack.reason ?? "no reason")")
        #expect(ack.index == nil)
        // Another flight, and another device on this flight, are not held back.
        try device.send(try outgoing("cart-1", 5, [order(5, flight: flightB)]))
        #expect(try await device.ack()?.status == .stored)
        let other = try await fixture.device("cart-2")
        defer { other.close() }
        try other.send(try outgoing("cart-2", 1, [order(6)]))
        #expect(try await other.ack()?.status == .stored)

        #expect(try fixture.server.store.orders().count == 5)
        try await waitUntil("the limited batch is counted") {
            try fixture.server.store.deviceReport().devices.first { $0.device == "cart-1" }?.limited == 1
        }
        let cart1 = try #require(try fixture.server.store.deviceReport().devices.first { $0.device == "cart-1" })
        #expect(cart1.rejects == 0)
        // Counted in the metrics where the answer is decided, like every other status.
        let (_, metrics) = try await MetricsTests.get(fixture.server, "/metrics")
        #expect(
            MetricsTests.sample(metrics, "jetbridge_batches_total", ["device": "cart-1", "status": "limited"]) == 1,
            "\(metrics)")
        await fixture.stop()
    }

    /// In insecure mode there is no ZAP handler, but the allow list's limits still apply and are reloaded like in
    /// CURVE mode (before, the reload stopped at the missing handler: the limits stayed what they were at start).
    @Test func inInsecureModeLimitsAreReloadedToo() async throws {
        let fixture = try ServerFixture(insecure: true, devices: [])
        try await setLimits(["cart-1": .init(recordsPerFlight: 2)], in: fixture)
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        try device.send(try outgoing("cart-1", 1, [order(1), order(2)]))
        #expect(try await device.ack()?.status == .stored)
        try device.send(try outgoing("cart-1", 3, [order(3)]))
        let ack = try #require(try await device.ack())
        #expect(ack.status == .limited, "\(ack)")
        #expect(ack.reason?.contains("records per flight") == true, "\(ack.reason ?? "no reason")")
        #expect(try fixture.server.store.orders().count == 2)
        await fixture.stop()
    }

    @Test func pastItsRateADeviceIsLimitedWithAWaitThatFitsTheRate() async throws {
        let fixture = try ServerFixture()
        // 1 record/s: a burst of 10, then one a second.
        try await setLimits(["*": .init(recordsPerSecond: 1)], in: fixture)
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        // The second batch, 100 records, needs 100 records' worth of refill (a single batch always fits a full
        // bucket, so the bucket holds up to 100 for it): it is limited unless 100 s pass between the two. With 9
        // records (9 s) a full local run once took 13.5 s between the sends, and 5 records was not enough in CI.
        let started = ContinuousClock.now
        try device.send(try outgoing("cart-1", 1, (1...10).map { order($0) }))
        #expect(try await device.ack()?.status == .stored)
        try device.send(try outgoing("cart-1", 11, (11...110).map { order($0) }))
        let ack = try #require(try await device.ack())
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        #expect(ack.status == .limited, "\(seconds) s between the batches")
        #expect(ack.reason?.contains("1 records per second") == true, "\(ack.reason ?? "no reason")")
        // The wait is what the bucket still lacks: 100 records less what refilled since the first batch.
        #expect(((99.5 - seconds)...100.1).contains(ack.retryAfter ?? 0), "\(ack.retryAfter ?? -1) after \(seconds) s")
        #expect(try fixture.server.store.orders().count == 10)
        // Counted in the totals once sent (AnswerLedger): the ack can come an instant before.
        try await waitUntil("the limited batch is in the totals") { fixture.server.currentStatistics.limitedBatches == 1 }
        await fixture.stop()
    }

    @Test func limitsInTheAllowListAreCheckedAndKept() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let file = fixture.directory.appendingPathComponent("devices.json")
        var list = DeviceAllowlist()
        list.limits = ["*": .init(recordsPerSecond: 50), "cart-1": .init(recordsPerFlight: 7)]
        try list.save(to: file)
        let loaded = try DeviceAllowlist.load(from: file)
        #expect(loaded.limits(for: "cart-1") == DeviceLimits(recordsPerFlight: 7, recordsPerSecond: 50))
        #expect(loaded.limits(for: "cart-2") == DeviceLimits(recordsPerFlight: 100_000, recordsPerSecond: 50))
        try Data(#"{"devices":{},"limits":{"cart-1":{"recordsPerSecond":0}}}"#.utf8).write(to: file)
        #expect(throws: AggregatorError.self) { try DeviceAllowlist.load(from: file) }
    }
}
