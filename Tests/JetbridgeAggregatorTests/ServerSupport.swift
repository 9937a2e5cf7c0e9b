import Foundation
@testable import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import Logging
import MessagePack
import Testing
import ZeroMQ

let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

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
        ackBounds: AckRoutes.Bounds = AckRoutes.Bounds(),
        configure: (inout AggregatorConfiguration) -> Void = { _ in }
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
        server = try AggregatorServer(home: home, configuration: configuration, logger: logger, ackBounds: ackBounds)
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

/// A device written with the ZeroMQ library alone, as another team's agent would be: PUSH for batches, DEALER with
/// its routing id and a hello for acks.
final class TestDevice {
    let context: ZeroMQContext
    let push: Socket
    let dealer: Socket
    let id: String
    /// Events on the PUSH socket, when asked for before connecting.
    var pushEvents: AsyncStream<MonitorEvent>?

    init(
        id: String, keys: CurveKeyPair?, serverKey: Data?, server: AggregatorServer, monitorPush: Bool = false,
        onPushEvent: (@Sendable (MonitorEvent) -> Void)? = nil
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
        try dealer.set(.routingID, Data(id.utf8))
        try dealer.connect(server.acksEndpoint)
        try push.connect(server.dataEndpoint)
        try dealer.send(WireCoding.encode(Hello(device: id)))
    }

    func send(_ batch: OutgoingBatch) throws {
        try push.send(batch.frames())
    }

    func send(frames: [Data]) throws {
        try push.send(frames)
    }

    /// The next ack, or nil after 20 s (only a bound on a hang).
    func ack() throws -> Ack? {
        let ready = try poll([PollItem(dealer, .readable)], timeout: .seconds(20))
        guard ready[0].contains(.readable), let frame = try dealer.receive() else { return nil }
        return try WireCoding.decode(Ack.self, from: frame)
    }

    func close() {
        try? push.close(linger: .zero)
        try? dealer.close(linger: .zero)
        context.terminate()
    }
}

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
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        if ContinuousClock.now > deadline {
            Issue.record("timed out waiting until \(what)")
            throw CancellationError()
        }
        try await Task.sleep(for: .milliseconds(10))
    }
}

/// The first event of `stream` that `match` accepts, or nil after 20 s.
func firstEvent(
    _ stream: AsyncStream<MonitorEvent>, where match: @escaping @Sendable (MonitorEvent) -> Bool
) async -> MonitorEvent? {
    await withTaskGroup(of: MonitorEvent?.self) { group in
        group.addTask {
            for await event in stream where match(event) { return event }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: .seconds(20))
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
