import Foundation
import JetbridgeAggregator
import JetbridgeProtocol
import Synchronization
import Testing
import ZeroMQ

/// Acks reach only a connection authenticated as their device (docs/PROTOCOL.md, Acks: routes). Real aggregator in
/// this process, CURVE with real keys, the real `jetbridge-agent` as a separate process, hand-written peers.
@Suite("Ack routing: acks go only to the device's own key")
struct AckRoutingTests {
    @Test func anotherDeviceClaimingTheRoutingIdGetsNoAckAndTheDeviceFinishes() async throws {
        let fixture = try ServerFixture(devices: ["cart-a", "cart-b"])
        let agent = try AgentHomeForTest(device: "cart-a", fixture: fixture)
        try agent.capture(scans: 300)
        // cart-b, with its own allowed key, claims cart-a's device id as routing id and says hello for cart-a, again
        // and again with fresh connections (each one a ROUTER_HANDOVER of the routing id "cart-a").
        let hijacker = try Hijacker(claiming: "cart-a", keys: try #require(fixture.deviceKeys["cart-b"]), fixture: fixture)
        try await Task.sleep(for: .milliseconds(300))

        let sync = try agent.sync()
        let status = await sync.exit(within: .seconds(90))
        // A held ack would leave after its route came back: give it the time it could wait.
        try await Task.sleep(for: .milliseconds(500))
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
        try agent.capture(scans: 50)
        let first = try agent.sync()
        #expect(await first.exit(within: .seconds(60)) == 0, "\(first.output)")
        // A new process: a new connection and a new routing id, the same key.
        try agent.capture(scans: 50)
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
        #expect(try device.ack()?.first == 1_001)
        try device.dealer.disconnect(fixture.server.acksEndpoint)
        try device.dealer.connect(fixture.server.acksEndpoint)
        // An ack the ground sends before it has seen the old connection go can die with it; a device resends after
        // its ack timeout, as agents do, and the resend is acked as a duplicate. Without a route none would arrive.
        let later = try outgoing("cart-a", 1_002, [order(2)])
        var acked: Ack?
        for _ in 0..<10 where acked == nil {
            try device.push.send(later.frames())
            acked = try device.ack(within: .seconds(3))
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
        try await Task.sleep(for: .milliseconds(300))
        try device.hello()
        #expect(try device.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))
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
        #expect(try device.ack(within: .seconds(1)) == nil)
        #expect(fixture.server.currentStatistics.hellos == 0)
        await fixture.stop()
    }

    @Test func anOldAgentsDeviceIdRoutingIdStillWorksAndATakeoverThatSpeaksDropsIt() async throws {
        let fixture = try ServerFixture(devices: ["cart-a", "cart-b"])
        // An agent before secret routing ids: its routing id is its device id.
        let old = try await fixture.device("cart-a")
        defer { old.close() }
        let batch = try outgoing("cart-a", 1, [order(1)])
        try old.send(batch)
        #expect(try old.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))

        // cart-b takes the routing id over and says anything: the ground sees another key on that route.
        let hijacker = try Hijacker(claiming: "cart-a", keys: try #require(fixture.deviceKeys["cart-b"]), fixture: fixture)
        try await Task.sleep(for: .milliseconds(500))
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
        #expect(try device.ack() == Ack.stored(batch.header, new: 1, duplicates: 0))
        await fixture.stop()
    }
}

/// A device written with the ZeroMQ library that follows the rule: a secret routing id, then a hello.
final class SecretDevice {
    let context: ZeroMQContext
    let push: Socket
    let dealer: Socket

    /// Events on the DEALER, when asked for.
    var dealerEvents: AsyncStream<MonitorEvent>?

    init(id: String, fixture: ServerFixture, routingID: Data? = nil, monitorDealer: Bool = false) throws {
        context = try ZeroMQContext()
        push = try context.socket(.push)
        dealer = try context.socket(.dealer)
        for socket in [push, dealer] {
            try socket.set(.linger, .zero)
            if let serverKey = fixture.serverKey {
                try socket.makeCurveClient(keys: try #require(fixture.deviceKeys[id]), serverPublicKey: serverKey)
            }
        }
        var generator = SystemRandomNumberGenerator()
        let secret = Data([UInt8(ascii: "t")] + (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try dealer.set(.routingID, routingID ?? secret)
        if monitorDealer { dealerEvents = try dealer.monitor(events: [.handshakeSucceeded]) }
        try dealer.connect(fixture.server.acksEndpoint)
        try push.connect(fixture.server.dataEndpoint)
        self.id = id
    }

    let id: String

    func hello() throws {
        try dealer.send(WireCoding.encode(Hello(device: id)))
    }

    /// The next ack, or nil after `within`.
    func ack(within: Duration = .seconds(20)) throws -> Ack? {
        let ready = try poll([PollItem(dealer, .readable)], timeout: within)
        guard ready[0].contains(.readable), let frame = try dealer.receive() else { return nil }
        return try WireCoding.decode(Ack.self, from: frame)
    }

    func close() {
        try? push.close(linger: .zero)
        try? dealer.close(linger: .zero)
        context.terminate()
    }
}

/// An allowed device that claims another device's id as its ack routing id, on its own thread: keeps one
/// connection, opens a fresh one every 200 ms (each a handover of that routing id), says hello for the victim on all
/// of them every 50 ms, and keeps whatever arrives.
final class Hijacker: Sendable {
    private let stopFlag = Atomic<Bool>(false)
    private let received = Mutex<[Data]>([])
    private let count = Atomic<Int>(0)
    private let done = Mutex(false)

    /// How many connections it made.
    var connections: Int { count.load(ordering: .relaxed) }

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

    static var binary: URL {
        AggregatorCLITests.binary.deletingLastPathComponent().appendingPathComponent("jetbridge-agent")
    }

    /// Captures `scans` origin scans of distinct bags with `jetbridge-agent scan`.
    func capture(scans: Int) throws {
        let tags = (0..<scans).map { _ in #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": 42.0}"# }
        let run = try AgentRun(["--home", home.path, "scan", "--at", "origin"], in: home, stdin: tags.joined(separator: "\n"))
        run.process.waitUntilExit()
        #expect(run.process.terminationStatus == 0, "\(run.output)")
    }

    /// Starts `jetbridge-agent sync --until-drained`.
    func sync() throws -> AgentRun {
        try AgentRun(["--home", home.path, "sync", "--until-drained", "--timeout", "80"], in: home)
    }
}

/// One `jetbridge-agent` process, output to a file.
struct AgentRun {
    let process: Process
    let log: URL

    init(_ arguments: [String], in directory: URL, stdin: String? = nil) throws {
        log = directory.appendingPathComponent("run-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process = Process()
        process.executableURL = AgentHomeForTest.binary
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["JETBRIDGE_HOME"] = nil
        process.environment = environment
        process.currentDirectoryURL = directory
        let output = try FileHandle(forWritingTo: log)
        process.standardOutput = output
        process.standardError = output
        if let stdin {
            let input = directory.appendingPathComponent("stdin-\(UUID().uuidString)")
            try Data(stdin.utf8).write(to: input)
            process.standardInput = try FileHandle(forReadingFrom: input)
        }
        try process.run()
    }

    var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    /// The exit status, or nil when it is still running after `within` (then it is killed).
    func exit(within: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + within
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.terminate()
                process.waitUntilExit()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }
}
