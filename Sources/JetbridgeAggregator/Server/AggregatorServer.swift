import Foundation
internal import GRDB
import JetbridgeProtocol
public import Logging
public import ServiceLifecycle
import ZeroMQ
import SystemSupport

/// `jetbridge-aggregator serve`: receives batches on the data socket, stores them, acks them on the ack socket.
///
/// The `Service` that builds the threads and starts them. Threads, not the cooperative pool, because every ZeroMQ
/// and SQLite call here blocks; each is a type that owns its sockets and state, and gets what it shares passed in:
/// - the **network thread** (``NetworkLoop``) owns the data `PULL`, the ack `ROUTER`, an inproc `PULL` from the store
///   thread and the ack routes (``AckRoutes``): it checks and decodes batches, answers refused ones at once, queues
///   good ones in a bounded ``BatchQueue`` and sends the acks the store thread passes back;
/// - the **store thread** (``StoreLoop``) groups what is waiting into one `apply` transaction, then passes one ack
///   per batch back: `stored` after the commit, `retry` for every batch of a failed transaction;
/// - a refused batch takes one path on either thread (``BatchRefusals``);
/// - the **receipts thread** (``ReceiptWorker``) rewrites receipts after commits, off the ack path;
/// - a **lifecycle thread** joins them in order at shutdown, then closes the store and the ZeroMQ context.
///
/// Created with ``init(home:configuration:logger:)``, which binds (so a busy endpoint fails there, with a clear
/// error) and starts the threads. ``run()`` (the `Service`) waits until graceful shutdown, then stops: no new batches
/// are read, the batches in hand are committed and acked, sockets close after at most one second of linger, the store
/// closes. Nothing is acked that was not committed.
public final class AggregatorServer: Service, Sendable {
    /// The data endpoint actually bound (a `*` port resolved).
    public let dataEndpoint: String
    /// The ack endpoint actually bound.
    public let acksEndpoint: String
    /// The store, for reads while the server runs (tests, reports).
    public let store: any StoreEngine
    /// Where the store is (``StoreLocation``: the SQLite file, or the PostgreSQL URL shown without its password).
    public let storeLocation: StoreLocation
    /// The receipts thread's store: ``store`` itself for SQLite (a pool of readers), a connection of its own for
    /// PostgreSQL (whose receipt walk holds a transaction while it writes files).
    let receiptStore: any StoreEngine
    /// Whether CURVE is off.
    public let insecure: Bool
    /// The metrics endpoint actually bound (`HOST:PORT`), when `metrics` is configured.
    public let metricsEndpoint: String?

    let configuration: AggregatorConfiguration
    let home: AggregatorHome
    let logger: Logger
    let context: ZeroMQContext
    let zap: ZAPHandler?
    let queue: BatchQueue
    let receipts: ReceiptWorker
    let homeLock: HomeLock
    /// ZAP decisions: counts, the last refusals, rate-limited warnings.
    let handshakes: HandshakeMonitor
    /// Counters and gauges for `/metrics`, kept also when no endpoint serves them.
    let metrics: AggregatorMetrics
    let metricsServer: MetricsServer?
    /// Why the store is not usable now (the last transaction failed), for `/readyz`; nil after a commit. Written by
    /// the store thread.
    let storeProblem = Locked<String?>(nil)
    /// Acks the network thread holds for want of a route.
    let acksHeld = Locked(0)
    /// Seats whose receipts are behind, as the status thread last read them from the store (nil until it could):
    /// `/metrics` and `status` show this value. Nothing on the metrics server's event loop may call the store:
    /// PostgreSQL's calls wait on a future, which SwiftNIO forbids on an event loop (a scrape crashed `serve`).
    let receiptsPending = Locked<Int?>(nil)
    /// The bounds on ack routes and held acks (``AckRoutes``).
    let ackBounds: AckRoutes.Bounds
    let startedAt = Date()
    /// Stop, reload, failure: shared with the loops.
    let control: RunControl
    let statistics = Locked(ServerStatistics())
    static let zapDomain = "jetbridge"
    static let ackLinger: Duration = .seconds(1)
    /// The kernel send buffer of each ack connection, in bytes (`ZMQ_SNDBUF`).
    static let ackSendBuffer = 128 << 10

    /// Opens the store, binds both endpoints and starts serving.
    ///
    /// - Parameters:
    ///   - home: The aggregator's home (keys, allow list, default store and receipts).
    ///   - configuration: Settings after flags were applied.
    ///   - logger: Where the server logs.
    /// - Throws: ``AggregatorError``: `.unavailable` for a missing key pair or an endpoint in use (naming it),
    ///   `.badConfiguration` for a bad allow list or endpoint, `.temporary` for a busy store or a full disk,
    ///   `.unavailable` when another `serve` holds the home's lock (``HomeLock``).
    public convenience init(home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger) throws {
        try self.init(home: home, configuration: configuration, logger: logger, ackBounds: AckRoutes.Bounds())
    }

    /// As ``init(home:configuration:logger:)``, with other bounds on ack routes and held acks (tests, which flood
    /// past them).
    init(
        home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger, ackBounds: AckRoutes.Bounds
    ) throws {
        try configuration.validate()
        self.ackBounds = ackBounds
        self.home = home
        self.configuration = configuration
        self.logger = logger
        self.control = RunControl(logger: logger)
        self.insecure = configuration.insecure
        let keys = configuration.insecure ? nil : try ServerKeys.load(from: home)
        let allowlist = try DeviceAllowlist.load(from: home.devicesFile)
        // Before the store opens: two `serve`s on one home would share its store and receipts.
        homeLock = try HomeLock(home: home)
        let storeLocation = try StoreLocation(configuration.store, home: home)
        self.storeLocation = storeLocation
        store = try storeLocation.open(create: true, logger: logger)
        do {
            receiptStore = storeLocation.isShared ? try storeLocation.open(create: true, logger: logger) : store
        } catch {
            try? store.close()
            throw error
        }
        let metrics = AggregatorMetrics()
        self.metrics = metrics
        let handshakes = HandshakeMonitor(
            logger: logger, onDecision: { metrics.handshake(result: $0.result.rawValue) },
            onFailure: { metrics.handshake(result: "failed") })
        self.handshakes = handshakes
        queue = BatchQueue(maxBatches: configuration.queueMaxBatches, maxBytes: configuration.queueMaxBytes)
        receipts = ReceiptWorker(
            store: receiptStore, writer: ReceiptWriter(directory: home.resolve(configuration.receipts), logger: logger),
            interval: configuration.receiptsIntervalSeconds, logger: logger,
            refreshed: { metrics.refreshedReceipts(in: $0) })

        var opened: [Socket] = []
        var zapHandler: ZAPHandler?
        var contextOrNil: ZeroMQContext?
        var metricsServerOrNil: MetricsServer?
        do {
            let context = try ZeroMQContext(ioThreads: 1)
            contextOrNil = context
            // The handler must exist before the CURVE servers bind, or CURVE admits anyone who knows the server key.
            if keys != nil {
                zapHandler = try ZAPHandler(context: context, allowlist: allowlist.byPublicKey) { handshakes.record($0) }
            }
            let pull = try context.socket(.pull)
            opened.append(pull)
            let router = try context.socket(.router)
            opened.append(router)
            for socket in [pull, router] {
                try socket.set(.maxMessageSize, 16 << 20)
                try socket.set(.heartbeatInterval, .seconds(5))
                try socket.set(.heartbeatTimeout, .seconds(15))
                try socket.set(.linger, Self.ackLinger)
                if let keys {
                    try socket.makeCurveServer(keys: keys)
                    try socket.set(.zapDomain, Self.zapDomain)
                }
            }
            if keys != nil {
                // Handshakes that fail before ZAP (a wrong server key, a plaintext client) reach no handler: the
                // monitors (started before bind, as libzmq asks) tell the operator. Their streams end at close.
                for (socket, name) in [(pull, "data"), (router, "acks")] {
                    let events = try socket.monitor(events: .handshakeFailed)
                    Task.detached {
                        for await case .handshakeFailed(let endpoint, let reason) in events {
                            handshakes.recordFailure(socket: name, endpoint: endpoint, failure: reason)
                        }
                    }
                }
            }
            // A few batches per device: beyond that TCP pushes back on the devices' PUSH sockets.
            try pull.set(.receiveHighWaterMark, configuration.receiveHighWaterMark)
            try router.set(.routerMandatory, true)
            // Acks are small: 128 kB of kernel buffer per connection is plenty even on a slow link, and bounds what a
            // peer that never reads its acks pins in the kernel (the default grows to tcp_wmem's maximum, 4 MB).
            try router.set(.sendBuffer, Self.ackSendBuffer)
            try router.set(.routerHandover, true)
            try Self.bind(pull, configuration.dataEndpoint, name: "data")
            try Self.bind(router, configuration.acksEndpoint, name: "acks")
            dataEndpoint = try pull.lastEndpoint
            acksEndpoint = try router.lastEndpoint

            let inproc = "inproc://jetbridge-acks-\(UUID().uuidString)"
            let ackIn = try context.socket(.pull)
            opened.append(ackIn)
            try ackIn.set(.linger, .zero)
            try ackIn.bind(inproc)
            let ackOut = try context.socket(.push)
            opened.append(ackOut)
            try ackOut.set(.linger, Self.ackLinger)
            try ackOut.connect(inproc)
            if let endpoint = configuration.metrics { metricsServerOrNil = try MetricsServer(endpoint: endpoint) }
            self.metricsServer = metricsServerOrNil
            self.metricsEndpoint = metricsServerOrNil?.endpoint
            self.context = context
            self.zap = zapHandler
            let refusals = BatchRefusals(statistics: statistics, metrics: metrics, logger: logger)
            let network = NetworkLoop(
                sockets: .init(pull: pull, router: router, acks: ackIn), allowlist: allowlist,
                devicesFile: home.devicesFile, zap: zapHandler, insecure: insecure, ackBounds: ackBounds, queue: queue,
                store: store, refusals: refusals, control: control, acksHeld: acksHeld, logger: logger)
            let storeLoop = StoreLoop(
                acks: ackOut, store: store, storeLocation: storeLocation, queue: queue, receipts: receipts,
                configuration: configuration, refusals: refusals, storeProblem: storeProblem, handshakes: handshakes,
                logger: logger)
            startThreads(network: network, store: storeLoop)
        } catch {
            for socket in opened { try? socket.close(linger: .zero) }
            metricsServerOrNil?.shutdown()
            zapHandler?.stop()
            contextOrNil?.terminate()
            try? store.close()
            if storeLocation.isShared { try? receiptStore.close() }
            if let error = error as? AggregatorError { throw error }
            throw AggregatorError(.other, "cannot start: \(error)")
        }
        logger.info(
            "aggregator serving",
            metadata: [
                "data": "\(dataEndpoint)", "acks": "\(acksEndpoint)",
                "mode": "\(insecure ? "INSECURE (no CURVE, device ids taken on trust)" : "CURVE")",
                "store": "\(storeLocation)", "receipts": "\(home.resolve(configuration.receipts).path)",
                "allowedDevices": .stringConvertible(allowlist.devices.count),
                "metrics": "\(metricsEndpoint.map { "http://\($0)/metrics" } ?? "off")",
            ])
        metricsServer?.start { [self] method, path in answer(method, path) }
        if insecure { StoreLoop.warnInsecure(logger) }
    }

    private static func bind(_ socket: Socket, _ endpoint: String, name: String) throws {
        do {
            try socket.bind(endpoint)
        } catch {
            if error.code == .addressInUse {
                throw AggregatorError(
                    .unavailable, "the \(name) endpoint \(endpoint) is in use (is another aggregator running?)")
            }
            throw AggregatorError(.badConfiguration, "cannot bind the \(name) endpoint \(endpoint): \(error.text)")
        }
    }

    /// Turns a failure to open the store into the operator's error: `.temporary` for a full disk or a busy store
    /// (``FailureClass``), else `.unavailable`.
    static func storeError(_ error: any Error, path: String) -> AggregatorError {
        let context = "cannot open the store \(path)"
        return AggregatorError(temporary: error, context: context)
            ?? AggregatorError(.unavailable, "\(context): \(error)")
    }

    // MARK: Lifecycle

    private func startThreads(network: NetworkLoop, store storeLoop: StoreLoop) {
        let networkDone = DispatchSemaphore(value: 0)
        let storeDone = DispatchSemaphore(value: 0)
        let statusDone = DispatchSemaphore(value: 0)
        receipts.start()
        startThread("jb-status") { [self] in
            runStatusWriter()
            statusDone.signal()
        }
        startThread("jb-network") {
            network.run()
            networkDone.signal()
        }
        startThread("jb-store") {
            storeLoop.run()
            storeDone.signal()
        }
        startThread("jb-lifecycle") { [self] in
            storeDone.wait()
            networkDone.wait()
            statusDone.wait()
            receipts.stopAndWait()
            do { try store.idleMaintenance() } catch {
                logger.warning("final checkpoint failed", metadata: ["error": "\(error)"])
            }
            do { try store.close() } catch {
                logger.warning("closing the store failed", metadata: ["error": "\(error)"])
            }
            if storeLocation.isShared { try? receiptStore.close() }
            zap?.stop()
            context.terminate()
            metricsServer?.shutdown()
            removeStatusFile()
            homeLock.release()
            storeLoop.logStatistics(final: true)
            logger.info("aggregator stopped")
            control.finish()
        }
    }

    /// Begins a graceful stop; returns at once. ``finished()`` returns when it is complete.
    public func stop() { control.stop() }

    /// Reloads the allow list at the next opportunity (SIGHUP).
    public func requestReload() { control.requestReload() }

    var stopRequested: Bool { control.stopRequested }

    /// Waits until the server has stopped completely (store closed).
    public func finished() async { await control.finished() }

    /// The counters so far.
    public var currentStatistics: ServerStatistics { statistics.withLock { $0 } }

    /// Serves until graceful shutdown (SIGTERM/SIGINT through the `ServiceGroup`) or cancellation, then stops.
    /// - Throws: ``AggregatorError`` when the server had to stop on a failure.
    public func run() async throws {
        await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await finished()
            } onGracefulShutdown: {
                self.stop()
            }
        } onCancel: {
            self.stop()
        }
        if let failure = control.failure { throw failure }
    }
}
