import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Testing
import ZeroMQ

/// A batch from a revoked key is refused like every other refusal (docs/AGGREGATOR.md "serve", docs/PROTOCOL.md
/// "Every batch gets an answer"): counted once as `forbidden` in `/metrics`, once as rejected in `status` (totals,
/// the device's batches, recent rejections) and in the devices report, whether it was answered or not.
@Suite("Server: a revoked key's batch is counted")
struct RevokedCountTests {
    @Test func aRevokedKeysBatchesAreCountedInMetricsStatusAndTheDevicesReport() async throws {
        let fixture = try ServerFixture(devices: ["cart-1"]) { $0.metrics = "127.0.0.1:0" }
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        try device.send(try outgoing("cart-1", 1, [order(1)]))
        #expect(try await device.ack()?.status == .stored)

        try await RevocationTests.revoke("cart-1", in: fixture)

        // Two batches of 2 and 3 records on the still-open connection: both answered forbidden (the second within the
        // 30 s in which the log line is not repeated: counted all the same).
        try device.send(try outgoing("cart-1", 2, [order(2), order(3)]))
        #expect(try await device.ack()?.status == .forbidden)
        try device.send(try outgoing("cart-1", 4, [order(4), order(5), order(6)]))
        #expect(try await device.ack()?.status == .forbidden)

        let (_, metrics) = try await MetricsTests.get(fixture.server, "/metrics")
        let cart1 = { (labels: [String: String]) in labels.merging(["device": "cart-1"]) { $1 } }
        #expect(MetricsTests.sample(metrics, "jetbridge_batches_total", cart1(["status": "forbidden"])) == 2)
        #expect(MetricsTests.sample(metrics, "jetbridge_batches_total", cart1(["status": "stored"])) == 1)
        #expect(MetricsTests.sample(metrics, "jetbridge_records_total", cart1(["outcome": "rejected"])) == 5)
        #expect(MetricsTests.sample(metrics, "jetbridge_records_total", cart1(["outcome": "new"])) == 1)

        try await waitUntil("the statistics count both refusals") {
            fixture.server.currentStatistics.rejectedBatches == 2
        }
        let status = fixture.server.currentStatus()
        #expect(status.totals.rejectedBatches == 2)
        #expect(status.totals.storedBatches == 1)
        let seen = try #require(status.devices.first { $0.device == "cart-1" })
        #expect(seen.batches == ["stored": 1, "forbidden": 2])
        #expect(seen.records["rejected"] == 5)
        let rejections = status.recentRejections.filter { $0.device == "cart-1" }
        #expect(rejections.count == 2)
        #expect(rejections.allSatisfy { $0.status == "forbidden" && $0.reason.contains("no longer allowed") })

        // The devices report counts them too (on the store thread, after the answer).
        try await waitUntil("the devices report counts both refusals") {
            try fixture.server.store.deviceReport().devices.first { $0.device == "cart-1" }?.rejects == 2
        }
        let report = try #require(try fixture.server.store.deviceReport().devices.first { $0.device == "cart-1" })
        #expect(report.batches == 1 && report.records == 1)
        #expect(report.lastRejectReason?.contains("no longer allowed") == true, "\(report)")
        #expect(try fixture.server.store.orders().count == 1)
        await fixture.stop()
    }
}
