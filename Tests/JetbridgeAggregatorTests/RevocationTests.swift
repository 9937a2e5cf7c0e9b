import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Testing
import ZeroMQ

/// Revocation is immediate (issue 14): a connection admitted before `devices revoke` gets nothing stored after it.
@Suite("Server: revocation")
struct RevocationTests {
    @Test func aDeviceThatStaysConnectedAcrossARevokeIsAnsweredForbiddenAndNothingIsStored() async throws {
        let fixture = try ServerFixture(devices: ["cart-1", "cart-2"]) { $0.metrics = "127.0.0.1:0" }
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        let other = try await fixture.device("cart-2")
        defer { other.close() }
        let first = try outgoing("cart-1", 1, [order(1)])
        try device.send(first)
        #expect(try await device.ack()?.status == .stored)

        try await Self.revoke("cart-1", in: fixture)

        // The same connection, still up: answered forbidden, stored nowhere.
        let second = try outgoing("cart-1", 2, [order(2)])
        try device.send(second)
        let ack = try #require(try await device.ack())
        #expect(ack.status == .forbidden)
        #expect(ack.first == 2 && ack.last == 2)
        #expect(ack.reason?.contains("no longer allowed") == true, "\(ack.reason ?? "no reason")")
        // A hello on it is refused too, and answered.
        try device.dealer.send(WireCoding.encode(Hello(device: "cart-1")))
        let helloAnswer = try #require(try await device.ack())
        #expect(helloAnswer.status == .forbidden)
        #expect(helloAnswer.first == 0 && helloAnswer.last == 0)

        // Another device is served throughout.
        try other.send(try outgoing("cart-2", 1, [order(3)]))
        #expect(try await other.ack()?.status == .stored)
        let orders = try fixture.server.store.orders()
        #expect(orders.count == 2)
        #expect(!orders.contains { $0.id == uuid(2) })
        // Counted as the forbidden batch it is (the hello is no batch).
        let (_, metrics) = try await MetricsTests.get(fixture.server, "/metrics")
        #expect(
            MetricsTests.sample(metrics, "jetbridge_batches_total", ["device": "cart-1", "status": "forbidden"]) == 1,
            "\(metrics)")
        await fixture.stop()
    }

    /// A device configured with another device's id (its key belongs to `cart-1`, its hello says `cart-2`, from a
    /// secret routing id) is told so on its own connection: before, the hello was ignored, the batches' `forbidden` answers were addressed to
    /// `cart-1`'s route, which it never had, and it resent for ever without a word.
    @Test func aHelloNamingAnotherDeviceThanItsKeyIsAnsweredForbiddenOnItsConnection() async throws {
        let fixture = try ServerFixture(devices: ["cart-1", "cart-2"])
        let secret = Data([UInt8(ascii: "t")] + (0..<16).map { _ in UInt8.random(in: 0...255) })
        let device = try TestDevice(
            id: "cart-2", keys: try #require(fixture.deviceKeys["cart-1"]), serverKey: try #require(fixture.serverKey),
            data: fixture.server.dataEndpoint, acks: fixture.server.acksEndpoint, routingID: secret)
        defer { device.close() }
        let answer = try #require(try await device.ack())
        #expect(answer.status == .forbidden, "\(answer)")
        #expect(answer.device == "cart-2" && answer.first == 0 && answer.last == 0)
        #expect(answer.reason?.contains("belongs to 'cart-1'") == true, "\(answer.reason ?? "no reason")")
        #expect(try fixture.server.store.orders().isEmpty)
        await fixture.stop()
    }

    /// The allow list fails closed (docs/SECURITY.md): a reload that finds a file it cannot read keeps the list it had,
    /// so a hand edit meant to revoke that does not parse revokes nothing and admits nobody new; `serve` does not start
    /// on such a file (exit 65, naming it).
    @Test func anAllowListThatDoesNotParseKeepsThePreviousOneAndStopsAStart() async throws {
        let log = UUID().uuidString
        let fixture = try ServerFixture(devices: ["cart-1"], logger: AckRoutingTests.capturing(log))
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        try Data(#"{"devices": {"cart-1": "#.utf8).write(to: fixture.home.devicesFile)
        fixture.server.requestReload()
        try await waitUntil("the bad file was read") {
            AckRoutingTests.logged(log, "allow list not reloaded; keeping the previous one")
        }
        try device.send(try outgoing("cart-1", 1, [order(1)]))
        #expect(try await device.ack()?.status == .stored)
        await fixture.stop()

        let home = try Fixture()
        defer { home.remove() }
        let ground = home.directory.appendingPathComponent("ground")
        let keys = try AggregatorCLITests.run(["--home", ground.path, "keys", "generate"], in: home.directory)
        #expect(keys.status == 0, "\(keys.stderr)")
        try Data("not json".utf8).write(to: ground.appendingPathComponent("devices.json"))
        // Bounded: a serve that started on the bad file would run until killed (exit(within:) kills it).
        let serve = try ExecutableRun(
            "jetbridge-aggregator",
            ["--home", ground.path, "serve", "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"],
            in: home.directory)
        let status = await serve.exit(within: .seconds(30))
        #expect(status == 65, "\(serve.output)")
        #expect(serve.output.contains("devices.json"), "\(serve.output)")
    }

    /// `devices revoke DEVICE`, then the reload the file watch (or SIGHUP) triggers.
    static func revoke(_ device: String, in fixture: ServerFixture) async throws {
        var list = try DeviceAllowlist.load(from: fixture.home.devicesFile)
        let revoked = list.revoke(device: device)
        #expect(revoked)
        try list.save(to: fixture.home.devicesFile)
        let reloads = fixture.server.currentStatistics.allowlistReloads
        fixture.server.requestReload()
        try await waitUntil("the allow list is reloaded") {
            fixture.server.currentStatistics.allowlistReloads > reloads
        }
    }
}
