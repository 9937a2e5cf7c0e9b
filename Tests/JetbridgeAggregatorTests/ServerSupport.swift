import Foundation
@testable import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import SystemSupport
import Testing
import ZeroMQ

/// An aggregator served in this process on loopback ports chosen by the kernel, in a per-test home.
struct ServerFixture {
    let fixture: Fixture
    let home: AggregatorHome
    let server: AggregatorServer
    /// The server's public key; nil in insecure mode.
    let serverKey: Data?
    /// The allow-listed devices' key pairs.
    let deviceKeys: [String: CurveKeyPair]

    init(
        insecure: Bool = false, devices: [String] = ["cart-1"], logger: Logger = quietLogger,
        ackBounds: AckRoutes.Bounds = AckRoutes.Bounds(), flightBagsInterval: Duration = .seconds(30),
        connections: KeyConnections = KeyConnections(), configure: (inout AggregatorConfiguration) -> Void = { _ in }
    ) throws {
        fixture = try Fixture()
        home = AggregatorHome(directory: fixture.directory)
        var configuration = AggregatorConfiguration()
        configuration.dataEndpoint = "tcp://127.0.0.1:*"
        configuration.acksEndpoint = "tcp://127.0.0.1:*"
        configuration.insecure = insecure
        configure(&configuration)
        serverKey = insecure ? nil : try Z85.decode(ServerKeys.generate(in: home, force: false))
        var keys: [String: CurveKeyPair] = [:]
        var list = DeviceAllowlist()
        for device in devices {
            let pair = try CurveKeyPair.generate()
            keys[device] = pair
            try list.allow(device: device, publicKey: pair.publicKeyZ85)
        }
        try list.save(to: home.devicesFile)
        deviceKeys = keys
        server = try AggregatorServer(
            home: home, configuration: configuration, logger: logger, ackBounds: ackBounds,
            flightBagsInterval: flightBagsInterval, connections: connections)
        // Served as `serve` serves it: its services run until ``stop()``. Started on a thread of its own, as the
        // server runs its services: the tests beside it may hold the cooperative pool.
        let server = server
        let executor = ThreadTaskExecutor(name: "test-serve")
        Task(executorPreference: executor) {
            try? await server.run()
            executor.finish()
        }
    }

    /// A device connected with its allow-listed key (or plaintext in insecure mode), its hello seen by the server.
    func device(_ id: String) async throws -> TestDevice {
        let before = server.currentStatistics.hellos
        let device = try TestDevice(id: id, keys: deviceKeys[id], serverKey: serverKey, server: server)
        try await waitUntil("the server saw the hello of \(id)") { server.currentStatistics.hellos > before }
        return device
    }

    func stop() async {
        server.stop()
        await server.finished()
        fixture.remove()
    }
}

/// A device written with the ZeroMQ library alone, as another team's agent would be: PUSH for batches, DEALER for
/// acks. The old way (``init(id:keys:serverKey:server:monitorPush:onPushEvent:)``): its device id as routing id and a
/// hello at once. The rule's way (``init(id:fixture:routingID:monitorDealer:)``): a secret routing id, hello when the
/// test says. On a `serve` process (``init(id:keys:serverKey:data:acks:routingID:sendHighWaterMark:)``): its
/// endpoints, hello at once.
final class TestDevice {
    let context: ZeroMQContext
    let push: Socket
    let dealer: Socket
    let id: String
    /// Events on the PUSH socket, when asked for before connecting.
    var pushEvents: AsyncStream<MonitorEvent>?
    /// Events on the DEALER, when asked for.
    var dealerEvents: AsyncStream<MonitorEvent>?

    private init(
        id: String, keys: CurveKeyPair?, serverKey: Data?, data: String, acks: String, routingID: Data,
        monitorPush: Bool, onPushEvent: (@Sendable (MonitorEvent) -> Void)?, monitorDealer: Bool,
        sendHighWaterMark: Int? = nil
    ) throws {
        self.id = id
        context = try ZeroMQContext()
        push = try context.socket(.push)
        dealer = try context.socket(.dealer)
        for socket in [push, dealer] {
            try socket.set(.linger, .zero)
            if let keys, let serverKey { try socket.makeCurveClient(keys: keys, serverPublicKey: serverKey) }
        }
        if monitorPush {
            pushEvents = try push.monitor(events: [.handshakeFailed, .handshakeSucceeded, .disconnected])
        }
        if let onPushEvent {
            // Called on the monitor's own thread: events are seen even while the cooperative pool is busy.
            try push.monitor(events: [.handshakeFailed, .handshakeSucceeded], onEvent: onPushEvent)
        }
        if let sendHighWaterMark { try push.set(.sendHighWaterMark, sendHighWaterMark) }
        try dealer.set(.routingID, routingID)
        if monitorDealer { dealerEvents = try dealer.monitor(events: [.handshakeSucceeded]) }
        try dealer.connect(acks)
        try push.connect(data)
    }

    /// A device whose routing id is its device id (an agent before secret routing ids), hello sent at once.
    convenience init(
        id: String, keys: CurveKeyPair?, serverKey: Data?, server: AggregatorServer, monitorPush: Bool = false,
        onPushEvent: (@Sendable (MonitorEvent) -> Void)? = nil
    ) throws {
        try self.init(
            id: id, keys: keys, serverKey: serverKey, data: server.dataEndpoint, acks: server.acksEndpoint,
            routingID: Data(id.utf8), monitorPush: monitorPush, onPushEvent: onPushEvent, monitorDealer: false)
        try hello()
    }

    /// A device on a `serve` process of its own, at the endpoints it logged: its device id as routing id unless
    /// `routingID` says otherwise, hello sent at once.
    /// - Parameter sendHighWaterMark: The PUSH socket's, when a test wants sends to fail fast (`dontWait`).
    convenience init(
        id: String, keys: CurveKeyPair, serverKey: Data, data: String, acks: String, routingID: Data? = nil,
        sendHighWaterMark: Int? = nil
    ) throws {
        try self.init(
            id: id, keys: keys, serverKey: serverKey, data: data, acks: acks, routingID: routingID ?? Data(id.utf8),
            monitorPush: false, onPushEvent: nil, monitorDealer: false, sendHighWaterMark: sendHighWaterMark)
        try hello()
    }

    /// A device that follows the rule: a secret routing id (or `routingID`), with the fixture's key for `id`; no hello
    /// until ``hello()``.
    convenience init(id: String, fixture: ServerFixture, routingID: Data? = nil, monitorDealer: Bool = false) throws {
        var generator = SystemRandomNumberGenerator()
        let secret = Data([UInt8(ascii: "t")] + (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
        var keys: CurveKeyPair?
        if fixture.serverKey != nil {
            let pair: CurveKeyPair = try #require(fixture.deviceKeys[id])
            keys = pair
        }
        try self.init(
            id: id, keys: keys, serverKey: fixture.serverKey, data: fixture.server.dataEndpoint,
            acks: fixture.server.acksEndpoint, routingID: routingID ?? secret, monitorPush: false, onPushEvent: nil,
            monitorDealer: monitorDealer)
    }

    func hello() throws {
        try dealer.send(WireCoding.encode(Hello(device: id)))
    }

    func send(_ batch: OutgoingBatch) throws {
        try push.send(batch.frames())
    }

    func send(frames: [Data]) throws {
        try push.send(frames)
    }

    /// The next ack, or nil after `within` (only a bound on a hang). Polls without blocking, so a test waiting for an
    /// ack leaves the cooperative pool's threads to the server and the other tests.
    func ack(within: Duration = .seconds(20)) async throws -> Ack? {
        guard let frame = try await firstValue(within: within, { try dealer.receive(options: .dontWait) }) else {
            return nil
        }
        return try WireCoding.decode(Ack.self, from: frame)
    }

    /// The next ack, or nil after `within`, blocking the calling thread: only for code on a thread of its own.
    @available(*, noasync, message: "blocks a thread of the cooperative pool; use `await ack()`")
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

/// The device type ``AckRoutingTests`` named for devices with a secret routing id: now one type.
typealias SecretDevice = TestDevice

/// A batch from `device` of `records` (rewritten as the device's own), sequence numbers from `first`.
func outgoing(_ device: String, _ first: UInt64, _ records: [Record]) throws -> OutgoingBatch {
    let encoder = MessagePackEncoder()
    return OutgoingBatch(
        device: device,
        records: try records.enumerated().map { offset, record in
            (sequence: first + UInt64(offset), payload: try encoder.encode(owned(record, by: device)))
        })
}

/// Polls `condition` until it holds; fails the test after `timeout` (a bound on a hang, not a timing assertion).
func waitUntil(_ what: String, timeout: Duration = .seconds(20), _ condition: () throws -> Bool) async throws {
    do {
        try await JetbridgeTestKit.waitUntil(what, timeout: timeout, condition)
    } catch is TimedOut {
        Issue.record("timed out waiting until \(what)")
        throw CancellationError()
    }
}

/// The first event of `stream` that `match` accepts, or nil after 20 s.
func firstEvent(
    _ stream: AsyncStream<MonitorEvent>, where match: @escaping @Sendable (MonitorEvent) -> Bool
) async -> MonitorEvent? {
    await JetbridgeTestKit.firstEvent(stream, where: match)
}
