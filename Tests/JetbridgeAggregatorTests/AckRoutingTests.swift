import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import Synchronization
import Testing
import ZeroMQ

/// Acks reach only a connection authenticated as their device (docs/PROTOCOL.md, Acks: routes). Real aggregator in
/// this process, CURVE with real keys, the real `jetbridge-agent` as a separate process, hand-written peers.
@Suite("Ack routing: acks go only to the device's own key")
struct AckRoutingTests {
    @Test func anotherDeviceClaimingTheRoutingIdGetsNoAckAndTheDeviceFinishes() async throws {
        let log = UUID().uuidString
        let fixture = try ServerFixture(devices: ["cart-a", "cart-b"], logger: Self.capturing(log))
        let agent = try AgentHomeForTest(device: "cart-a", fixture: fixture)
        try await agent.capture(scans: 300)
        // cart-b, with its own allowed key, claims cart-a's device id as routing id and says hello for cart-a, again
        // and again with fresh connections (each one a ROUTER_HANDOVER of the routing id "cart-a").
        let hijacker = try Hijacker(claiming: "cart-a", keys: try #require(fixture.deviceKeys["cart-b"]), fixture: fixture)
        try await waitUntil("the server read the hijacker's hello") {
            Self.logged(log, "ignored a hello for another device than the connection's key")
        }

        let sync = try agent.sync()
        let status = await sync.exit(within: .seconds(90))
        // A held ack would leave after its route came back: let the hijacker read its sockets ten more times (polls of
        // up to 50 ms: the 500 ms this waited for on a quiet machine, and longer when its thread gets less CPU).
        let cycles = hijacker.cycles
        try await waitUntil("the hijacker read its sockets ten more times") { hijacker.cycles >= cycles + 10 }
        let stolen = hijacker.stop()

        #expect(status == 0, "the agent did not finish: \(sync.output)")
        #expect(sync.output.contains("drained"), "\(sync.output)")
        #expect(stolen.isEmpty, "cart-b received \(stolen.count) messages on cart-a's routing id: \(stolen.prefix(3))")
        #expect(hijacker.connections >= 3)
        #expect(fixture.server.currentStatistics.newRecords == 300)
        await fixture.stop()
    }

    @Test func aDeviceThatReconnectsWithTheSameKeyGetsItsAcks() async throws {
        let fixture = try ServerFixture(devices: ["cart-a"])
        let agent = try AgentHomeForTest(device: "cart-a", fixture: fixture)
        try await agent.capture(scans: 50)
        let first = try agent.sync()
        #expect(await first.exit(within: .seconds(60)) == 0, "\(first.output)")
        // A new process: a new connection and a new routing id, the same key.
        try await agent.capture(scans: 50)
        let second = try agent.sync()
        #expect(await second.exit(within: .seconds(60)) == 0, "\(second.output)")
        #expect(second.output.contains("drained"), "\(second.output)")
        #expect(fixture.server.currentStatistics.newRecords == 100)

        // The same socket reconnecting (same routing id, new connection) gets acks without a new hello.
        let device = try SecretDevice(id: "cart-a", fixture: fixture)
        defer { device.close() }
        try device.hello()
        try await waitUntil("the hello arrived") { fixture.server.currentStatistics.hellos >= 3 }
        let batch = try outgoing("cart-a", 1_001, [order(1)])
        try device.push.send(batch.frames())
        #expect(try await device.ack()?.first == 1_001)
        try device.dealer.disconnect(fixture.server.acksEndpoint)
        try device.dealer.connect(fixture.server.acksEndpoint)
        // An ack the ground sends before it has seen the old connection go can die with it; a device resends after
        // its ack timeout, as agents do, and the resend is acked as a duplicate. Without a route none would arrive.
        let later = try outgoing("cart-a", 1_002, [order(2)])
        var acked: Ack?
        for _ in 0..<10 where acked == nil {
            try device.push.send(later.frames())
            acked = try await device.ack(within: .seconds(3))
        }
        #expect(acked?.first == 1_002)
        await fixture.stop()
    }

    @Test func anAckThatArrivesBeforeTheHelloWaitsForIt() async throws {
        let fixture = try ServerFixture(devices: ["cart-a"])
        let device = try SecretDevice(id: "cart-a", fixture: fixture, monitorDealer: true)
        defer { device.close() }
        // Connected first, so the hello below leaves at once: what is tested is the order commit, then hello.
        let connected = await firstEvent(try #require(device.dealerEvents)) {
            if case .handshakeSucceeded = $0 { true } else { false }
        }
        #expect(connected != nil)
        let batch = try outgoing("cart-a", 1, [order(1)])
        try device.push.send(batch.frames())
        try await waitUntil("the batch is stored") { fixture.server.currentStatistics.storedBatches == 1 }
        try await waitUntil("its ack waits for a route") { fixture.server.currentStatistics.acksHeld == 1 }
        try device.hello()
        #expect(try await device.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))
        #expect(fixture.server.currentStatistics.unroutableAcks == 0)
        await fixture.stop()
    }

    @Test func aHelloWithARoutingIdThatIsNoSecretIsIgnored() async throws {
        let fixture = try ServerFixture(devices: ["cart-a"])
        let device = try SecretDevice(id: "cart-a", fixture: fixture, routingID: Data("cart-a-acks".utf8))
        defer { device.close() }
        try device.hello()
        let batch = try outgoing("cart-a", 1, [order(1)])
        try device.push.send(batch.frames())
        try await waitUntil("the batch is stored") { fixture.server.currentStatistics.storedBatches == 1 }
        #expect(try await device.ack(within: .seconds(1)) == nil)
        #expect(fixture.server.currentStatistics.hellos == 0)
        await fixture.stop()
    }

    @Test func anOldAgentsDeviceIdRoutingIdStillWorksAndATakeoverThatSpeaksDropsIt() async throws {
        let log = UUID().uuidString
        let fixture = try ServerFixture(devices: ["cart-a", "cart-b"], logger: Self.capturing(log))
        // An agent before secret routing ids: its routing id is its device id.
        let old = try await fixture.device("cart-a")
        defer { old.close() }
        let batch = try outgoing("cart-a", 1, [order(1)])
        try old.send(batch)
        #expect(try await old.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))

        // cart-b takes the routing id over and says anything: the ground sees another key on that route.
        let hijacker = try Hijacker(claiming: "cart-a", keys: try #require(fixture.deviceKeys["cart-b"]), fixture: fixture)
        try await waitUntil("the server saw the takeover") {
            Self.logged(log, "another key took over the ack route of cart-a")
        }
        let before = fixture.server.currentStatistics.storedBatches
        try old.send(try outgoing("cart-a", 2, [order(2)]))
        try await waitUntil("the batch is stored") { fixture.server.currentStatistics.storedBatches > before }
        // Held until cart-a's route is back (or its 60 s lifetime ends): never sent to cart-b.
        try await waitUntil("the ack is held") { fixture.server.currentStatistics.acksHeld > 0 }
        let stolen = hijacker.stop()
        #expect(stolen.isEmpty, "cart-b received \(stolen.count) messages on cart-a's routing id")
        await fixture.stop()
    }

    @Test func inInsecureModeASecretRoutingIdIsTakenOnTrust() async throws {
        let fixture = try ServerFixture(insecure: true, devices: [])
        let device = try SecretDevice(id: "anyone-9", fixture: fixture)
        defer { device.close() }
        try device.hello()
        let batch = try outgoing("anyone-9", 1, [order(1)])
        try device.push.send(batch.frames())
        #expect(try await device.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))
        await fixture.stop()
    }

    /// A server logger whose lines the test can read (``CapturingLogHandler``, under `key`).
    static func capturing(_ key: String) -> Logger { CapturingLogHandler.logger(key) }

    /// Whether the server logged a line containing `text`.
    static func logged(_ key: String, _ text: String) -> Bool { CapturingLogHandler.logged(key, text) }
}

/// An allowed device that claims another device's id as its ack routing id, on its own thread: keeps one
/// connection, opens a fresh one every 200 ms (each a handover of that routing id), says hello for the victim on all
/// of them every 50 ms, and keeps whatever arrives.
final class Hijacker: Sendable {
    private let stopFlag = Atomic<Bool>(false)
    private let received = Mutex<[Data]>([])
    private let count = Atomic<Int>(0)
    private let polls = Atomic<Int>(0)
    private let done = Mutex(false)

    /// How many connections it made.
    var connections: Int { count.load(ordering: .relaxed) }
    /// How many times it has read its sockets.
    var cycles: Int { polls.load(ordering: .relaxed) }

    init(claiming victim: String, keys: CurveKeyPair, fixture: ServerFixture) throws {
        let context = try ZeroMQContext()
        let endpoint = fixture.server.acksEndpoint
        let serverKey = try #require(fixture.serverKey)
        let hello = try WireCoding.encode(Hello(device: victim))
        let open: @Sendable () throws -> Socket = {
            let dealer = try context.socket(.dealer)
            try dealer.set(.linger, .zero)
            try dealer.makeCurveClient(keys: keys, serverPublicKey: serverKey)
            try dealer.set(.routingID, Data(victim.utf8))
            try dealer.connect(endpoint)
            return dealer
        }
        let first = try open()
        let thread = Thread { [self] in
            var sockets = [first]
            count.store(1, ordering: .relaxed)
            var lastOpen = ContinuousClock.now
            while !stopFlag.load(ordering: .relaxed) {
                if ContinuousClock.now - lastOpen >= .milliseconds(200), let fresh = try? open() {
                    sockets.append(fresh)
                    count.add(1, ordering: .relaxed)
                    lastOpen = .now
                }
                for socket in sockets { try? socket.send(hello, options: .dontWait) }
                let ready = (try? poll(sockets.map { PollItem($0, .readable) }, timeout: .milliseconds(50))) ?? []
                for (socket, events) in zip(sockets, ready) where events.contains(.readable) {
                    while let frames = try? socket.receiveMultipart(options: .dontWait) {
                        received.withLock { $0.append(contentsOf: frames) }
                    }
                }
                polls.add(1, ordering: .relaxed)
            }
            for socket in sockets { try? socket.close(linger: .zero) }
            context.terminate()
            done.withLock { $0 = true }
        }
        thread.start()
    }

    /// Stops it and returns every frame it received.
    func stop() -> [Data] {
        stopFlag.store(true, ordering: .relaxed)
        while !done.withLock({ $0 }) { usleep(1000) }
        return received.withLock { $0 }
    }
}

/// An agent home for the real `jetbridge-agent`, configured for the fixture's server with the fixture's key for the
/// device.
struct AgentHomeForTest {
    let device: String
    let home: URL

    init(device: String, fixture: ServerFixture) throws {
        self.device = device
        home = fixture.fixture.directory.appendingPathComponent("agent-\(device)")
        let keys = try #require(fixture.deviceKeys[device])
        let serverKey = try Z85.encode(try #require(fixture.serverKey))
        let keysDirectory = home.appendingPathComponent("keys")
        try FileManager.default.createDirectory(at: keysDirectory, withIntermediateDirectories: true)
        let secret = keysDirectory.appendingPathComponent("device.key")
        try Data((keys.secretKeyZ85 + "\n").utf8).write(to: secret)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        try Data((keys.publicKeyZ85 + "\n").utf8).write(to: keysDirectory.appendingPathComponent("device.pub"))
        let escapedKey = serverKey.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        let configuration = """
            {"device": "\(device)",
             "ground": {"data": "\(fixture.server.dataEndpoint)", "acks": "\(fixture.server.acksEndpoint)", "serverPublicKey": "\(escapedKey)"},
             "sync": {"batchRecords": 10, "window": 2, "ackTimeoutSeconds": 0.5}}
            """
        try Data(configuration.utf8).write(to: home.appendingPathComponent("agent.json"))
    }

    /// Captures `scans` origin scans of distinct bags with `jetbridge-agent scan`.
    func capture(scans: Int) async throws {
        let tags = (0..<scans).map { _ in #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": 42.0}"# }
        let run = try ExecutableRun(
            "jetbridge-agent", ["--home", home.path, "scan", "--at", "origin"], in: home,
            stdin: tags.joined(separator: "\n"))
        // Waited for without blocking a thread of the cooperative pool.
        let status = await run.exit(within: .seconds(120))
        #expect(status == 0, "\(run.output)")
    }

    /// Starts `jetbridge-agent sync --until-drained`.
    func sync() throws -> ExecutableRun {
        try ExecutableRun(
            "jetbridge-agent", ["--home", home.path, "sync", "--until-drained", "--timeout", "80"], in: home)
    }
}
