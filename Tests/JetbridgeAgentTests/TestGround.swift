import FileQueue
import Foundation
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import Synchronization
import Testing
import ZeroMQ

import SystemSupport
@testable import JetbridgeAgent

/// A ground written in the test with the ZeroMQ library: PULL + ROUTER with CURVE and a ZAP handler, decoding with
/// `IncomingBatch.decode` and answering as docs/PROTOCOL.md says, with a behaviour chosen by the test.
final class TestGround: Sendable {
    /// What to do with one delivery of a valid batch.
    enum Answer: Sendable {
        case store
        /// Store nothing, answer nothing (a lost message).
        case drop
        /// Refuse the record at this index.
        case reject(index: Int)
        case ack(Ack.Status)
        /// Answer with this frame as the ack, whatever it holds (a hostile ground). Without a route yet (the batch came
        /// before the hello) the delivery is not counted, so the next one is answered with the same frame.
        case frame(Data)
        /// Answer with a message of these frames (as ``frame(_:)``).
        case frames([Data])
    }

    struct Delivered: Sendable {
        /// Every record ever stored, by record id (a set: duplicates collapse, as in a real store).
        var records: [UUID: Data] = [:]
        /// How often each batch name arrived.
        var deliveries: [String: Int] = [:]
        /// How many times a record was offered in a stored batch (duplicates included).
        var storedOffers = 0
        var hellos = 0
        /// Summaries answered.
        var summaries = 0
        /// Summaries received and left unanswered (``init(device:allowed:replacing:holding:answersSummaries:decide:)``).
        var ignoredSummaries = 0
    }

    let context: ZeroMQContext
    let serverKeys: CurveKeyPair
    let deviceKeys: CurveKeyPair
    let dataEndpoint: String
    let ackEndpoint: String
    let delivered = Mutex(Delivered())
    /// Handshakes the ZAP handler refused, on either socket.
    let refusals = Counter()
    private let stopFlag = Atomic<Bool>(false)
    private let finished = Mutex(false)
    private let zap: ZAPHandler
    /// Decides per delivery; the count starts at 1.
    let decide: @Sendable (_ batch: IncomingBatch, _ delivery: Int) -> Answer

    let device: String
    /// Whether summaries are answered; when not, they are counted and ignored (a ground that predates them).
    let answersSummaries: Bool

    /// - Parameters:
    ///   - device: The device id the device key is allowed as.
    ///   - allowed: Whether the device key is on the allow list from the start (see ``allowDevice()``).
    ///   - decide: What to answer per delivery.
    ///   - replacing: A ground stopped earlier whose place (endpoints and keys) this one takes: a ground restarted.
    ///   - holding: The records this ground stores from the start (a restarted ground keeps its store).
    ///   - answersSummaries: Whether summaries are answered (else counted in `ignoredSummaries`).
    init(
        device: String = "cart-1", allowed: Bool = true, replacing previous: TestGround? = nil,
        holding records: [UUID: Data] = [:], answersSummaries: Bool = true,
        decide: @escaping @Sendable (IncomingBatch, Int) -> Answer = { _, _ in .store }
    ) throws {
        self.decide = decide
        self.device = device
        self.answersSummaries = answersSummaries
        context = try ZeroMQContext()
        serverKeys = try previous?.serverKeys ?? CurveKeyPair.generate()
        deviceKeys = try previous?.deviceKeys ?? CurveKeyPair.generate()
        zap = try ZAPHandler(context: context, allowlist: allowed ? [deviceKeys.publicKeyZ85: device] : [:])
        let pull = try context.socket(.pull)
        let router = try context.socket(.router)
        for socket in [pull, router] {
            try socket.monitor(events: .handshakeFailed) { [refusals] event in
                if case .handshakeFailed(_, .authentication) = event { refusals.add() }
            }
            try socket.set(.linger, .zero)
            try socket.set(.zapDomain, "jetbridge")
            try socket.makeCurveServer(keys: serverKeys)
        }
        try router.set(.routerMandatory, true)
        try router.set(.routerHandover, true)
        try pull.bind(previous?.dataEndpoint ?? "tcp://127.0.0.1:*")
        try router.bind(previous?.ackEndpoint ?? "tcp://127.0.0.1:*")
        dataEndpoint = try pull.lastEndpoint
        ackEndpoint = try router.lastEndpoint
        delivered.withLock { $0.records = records }
        let thread = Thread { [self] in
            serve(pull: pull, router: router)
        }
        thread.name = "test-ground"
        thread.start()
    }

    /// Puts the device key on the allow list (new handshakes only, as the aggregator's reload does).
    func allowDevice() {
        zap.allow(publicKeyZ85: deviceKeys.publicKeyZ85, identity: device)
    }

    func stop() {
        stopFlag.store(true, ordering: .relaxed)
        while !finished.withLock({ $0 }) { usleep(1000) }
        zap.stop()
        context.terminate()
    }

    private func serve(pull: Socket, router: Socket) {
        defer {
            try? pull.close(linger: .zero)
            try? router.close(linger: .zero)
            finished.withLock { $0 = true }
        }
        var routes: [String: Data] = [:]
        while !stopFlag.load(ordering: .relaxed) {
            guard
                let ready = try? poll(
                    [PollItem(pull, .readable), PollItem(router, .readable)], timeout: .milliseconds(20))
            else { return }
            if !ready[1].isEmpty {
                // [routing id, hello]. The ack route is the routing id of a hello from the device's own key
                // (docs/PROTOCOL.md, Acks).
                while let message = try? router.receiveWithMetadata(options: .dontWait) {
                    if message.frames.count == 2, AckChannelType.of(message.frames[1]) == FlightSummary.messageType {
                        answerSummary(message, router: router)
                        continue
                    }
                    guard message.frames.count == 2,
                        let hello = try? WireCoding.decode(Hello.self, from: message.frames[1]),
                        hello.type == Hello.messageType, hello.device == message.userID
                    else { continue }
                    routes[hello.device] = message.frames[0]
                    delivered.withLock { $0.hellos += 1 }
                }
            }
            guard !ready[0].isEmpty else { continue }
            while let message = try? pull.receiveWithMetadata(options: .dontWait) {
                answer(message, routes: routes, router: router)
            }
        }
    }

    private func answer(_ message: ReceivedMessage, routes: [String: Data], router: Socket) {
        let ack: Ack?
        switch IncomingBatch.decode(frames: message.frames, authenticatedDevice: message.userID) {
        case .failure(let rejection):
            ack = rejection.ack
        case .success(let batch):
            let name = batch.header.label
            let delivery = delivered.withLock { state in
                state.deliveries[name, default: 0] += 1
                return state.deliveries[name]!
            }
            switch decide(batch, delivery) {
            case .drop:
                ack = nil
            case .store:
                let new = delivered.withLock { state in
                    state.storedOffers += batch.records.count
                    var new = 0
                    for element in batch.records
                    where state.records.updateValue(element.bytes, forKey: element.record.id) == nil {
                        new += 1
                    }
                    return new
                }
                ack = .stored(batch.header, new: new, duplicates: batch.records.count - new)
            case .reject(let index):
                ack = Ack(
                    device: batch.header.device, first: batch.header.first, last: batch.header.last, status: .rejected,
                    index: index, reason: "record \(index): refused by the test")
            case .ack(let status):
                ack = Ack(
                    device: batch.header.device, first: batch.header.first, last: batch.header.last, status: status,
                    reason: "\(status.rawValue) by the test", supported: status == .unsupportedVersion ? [1] : nil)
            case .frame(let frame):
                answer(with: [frame], batch: batch, routes: routes, router: router)
                return
            case .frames(let frames):
                answer(with: frames, batch: batch, routes: routes, router: router)
                return
            }
        }
        guard let ack, let route = routes[ack.device], let frame = try? WireCoding.encode(ack) else { return }
        // No route yet, or unroutable (the device is not connected): the device resends and the resend is deduplicated.
        try? router.send([route, frame], options: .dontWait)
    }

    /// Answers a summary (docs/PROTOCOL.md, "Proof of delivery") from the records stored, on the connection it came on.
    private func answerSummary(_ message: ReceivedMessage, router: Socket) {
        guard case .success(let summary) = FlightSummary.decode(message.frames[1]), summary.device == message.userID
        else { return }
        guard answersSummaries else {
            delivered.withLock { $0.ignoredSummaries += 1 }
            return
        }
        delivered.withLock { $0.summaries += 1 }
        var held = DeliverySummary()
        for bytes in delivered.withLock({ Array($0.records.values) }) {
            guard let record = try? RecordCoding.decode(bytes), record.flight.rawValue == summary.flight,
                record.device == summary.device
            else { continue }
            held.add(record)
        }
        guard let frame = try? WireCoding.encode(SummaryAnswer.comparing(summary, with: held)) else { return }
        try? router.send([message.frames[0], frame], options: .dontWait)
    }

    /// Sends `frames` as the answer to `batch`; without a route the delivery is not counted.
    private func answer(with frames: [Data], batch: IncomingBatch, routes: [String: Data], router: Socket) {
        if let route = routes[batch.header.device] {
            try? router.send([route] + frames, options: .dontWait)
        } else {
            delivered.withLock { $0.deliveries[batch.header.label]! -= 1 }
        }
    }
}

/// A count shared between threads.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// A temporary agent home with a queue of real scan records.
struct SyncSandbox {
    let directory: URL
    let home: AgentHome
    let device: String

    init(device: String = "cart-1") throws {
        self.device = device
        directory = try TemporaryDirectory.create(prefix: "jetbridge-sync")
        home = AgentHome(url: directory.appendingPathComponent("home"))
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }

    func configuration(batchRecords: Int = 10, window: Int = 4, ackTimeout: Double = 0.3) throws -> AgentConfiguration {
        var configuration = try AgentConfiguration.resolve(
            home: home, configFile: nil, overrides: .init(device: device), currentDirectory: directory)
        configuration.sync = AgentConfiguration.Sync(
            batchRecords: batchRecords, batchBytes: 1 << 20, window: window, ackTimeoutSeconds: ackTimeout)
        return configuration
    }

    /// Appends `count` scans and returns their ids in queue order.
    @discardableResult
    func capture(_ count: Int, segmentSize: Int = 4096) throws -> [UUID] {
        let queue = try FileQueue(
            directory: home.defaultQueueDirectory,
            configuration: FileQueue.Configuration(segmentSize: segmentSize, syncPolicy: .none))
        var ids: [UUID] = []
        var payloads: [Data] = []
        for index in 0..<count {
            let scan = Scan(
                tag: .example, point: .origin,
                scannedAt: Date(timeIntervalSince1970: 1_795_246_400 + Double(index)), flight: .example, device: device)
            ids.append(scan.id)
            payloads.append(try MessagePackEncoder().encode(Record.scan(scan)))
        }
        if !payloads.isEmpty { try queue.append(contentsOf: payloads) }
        return ids
    }

    func queueStatus() throws -> FileQueueStatus {
        try FileQueue(directory: home.defaultQueueDirectory).status()
    }

    func segmentCount() throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: home.defaultQueueDirectory.path).count {
            $0.hasSuffix(".seg")
        }
    }

    /// Runs a sync against `ground` in this process, on real sockets.
    func sync(
        _ ground: TestGround, configuration: AgentConfiguration? = nil, untilDrained: Bool = true,
        timeout: Double? = 20, confirmLimits: DeliveryConfirmer.Limits = DeliveryConfirmer.Limits()
    ) async throws -> SyncOutcome {
        var options = SyncOptions(
            dataEndpoint: ground.dataEndpoint, ackEndpoint: ground.ackEndpoint,
            security: .curve(ground.deviceKeys, serverPublicKey: ground.serverKeys.publicKey),
            untilDrained: untilDrained,
            timeout: timeout, stopGrace: 0.5, helloInterval: 0.2)
        options.confirmLimits = confirmLimits
        let service = SyncService(
            configuration: try configuration ?? self.configuration(), options: options,
            logger: Logger(label: "test.sync"))
        try await service.run()
        return try #require(service.outcome)
    }
}

extension SyncSandbox {
    /// Starts the built `jetbridge-agent sync --until-drained` as a process against `ground`, with this sandbox's home.
    /// - Parameters:
    ///   - ground: The ground to sync with: its endpoints, its server key and the device key pair it allows.
    ///   - arguments: More arguments after `sync --until-drained`.
    func startAgent(against ground: TestGround, arguments: [String] = []) throws -> ExecutableRun {
        try startAgent(
            data: ground.dataEndpoint, acks: ground.ackEndpoint, serverPublicKeyZ85: ground.serverKeys.publicKeyZ85,
            deviceKeys: ground.deviceKeys, arguments: arguments)
    }

    /// Starts the built `jetbridge-agent sync --until-drained` as a process: the device key pair in `keys/`, the
    /// endpoints and server key in `agent.json` (batches of 10 records, a window of 4, an ack timeout of 0.3 s).
    /// - Parameters:
    ///   - data: The ground's data endpoint.
    ///   - acks: The ground's ack endpoint.
    ///   - serverPublicKeyZ85: The ground's public key.
    ///   - deviceKeys: This device's key pair.
    ///   - arguments: More arguments after `sync --until-drained`.
    func startAgent(
        data: String, acks: String, serverPublicKeyZ85: String, deviceKeys: CurveKeyPair, arguments: [String] = []
    ) throws -> ExecutableRun {
        let keys = home.url.appendingPathComponent("keys")
        try FileManager.default.createDirectory(at: keys, withIntermediateDirectories: true)
        let secret = keys.appendingPathComponent("device.key")
        try Data((deviceKeys.secretKeyZ85 + "\n").utf8).write(to: secret)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: secret.path)
        try Data((deviceKeys.publicKeyZ85 + "\n").utf8).write(to: keys.appendingPathComponent("device.pub"))
        let configuration: [String: Any] = [
            "device": device,
            "ground": ["data": data, "acks": acks, "serverPublicKey": serverPublicKeyZ85],
            "sync": ["batchRecords": 10, "window": 4, "ackTimeoutSeconds": 0.3],
        ]
        try JSONSerialization.data(withJSONObject: configuration).write(
            to: home.url.appendingPathComponent("agent.json"))
        return try ExecutableRun(
            "jetbridge-agent", ["--home", home.url.path, "sync", "--until-drained"] + arguments, in: directory)
    }
}
