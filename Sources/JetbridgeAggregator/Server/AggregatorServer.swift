import Foundation
internal import GRDB
import JetbridgeProtocol
public import Logging
public import ServiceLifecycle
import ZeroMQ
import SystemSupport
public import JetbridgeStore

/// `jetbridge-aggregator serve`: receives batches on the data socket, stores them, acks them on the ack socket.
///
/// A builder and a `Service`. ``init(home:configuration:logger:)`` does what can fail for a reason the operator must
/// fix, so that it fails at start with a clear error: it loads the keys and the allow list, takes the home's lock,
/// opens the store, binds both endpoints (and the metrics endpoint) and builds the loops, but starts nothing.
/// ``run()`` runs them as the services of one `ServiceGroup` (``services``), each on a thread of its own because
/// every ZeroMQ, SQLite and PostgreSQL call here blocks:
/// - the **network thread** (``NetworkLoop``, ``IngressService``) owns the data `PULL` and the ack `ROUTER` and the
///   ack routes (``AckRoutes``): it checks and decodes batches, answers refused ones at once, holds each device to its
///   rates (``DeviceLimiter``; it never calls the store), queues good ones in a bounded ``BatchQueue`` and sends the
///   answers the store thread posts (``StoreMailbox``);
/// - the **store thread** (``StoreLoop``, ``StoreService``) groups what is waiting into one `apply` transaction (which
///   also checks the flight limits), then posts one answer per batch: `stored` after the commit, `limited` past a
///   flight limit, `retry` for every batch of a failed transaction;
/// - a key holds at most ``KeyConnections/perKey`` connections (the ZAP handler's thread, the network thread and the
///   sockets' monitors count them);
/// - a refused batch takes one path on either thread (``BatchRefusals``), and every answer is counted once
///   (``AnswerLedger``: `/metrics`, the statistics and `status` are its views);
/// - the **receipts thread** (``ReceiptWorker``, ``ReceiptsService``) rewrites receipts after commits, off the ack
///   path; the **status thread** (``StatusService``) writes `status.json`; the metrics endpoint
///   (``MetricsService``) answers `/metrics`, `/healthz` and `/readyz`.
///
/// Graceful shutdown (SIGTERM/SIGINT through the `ServiceGroup` the command runs this in, or ``stop()``) shuts the
/// services down in reverse order: no new batches are read, the batches in hand are committed and acked, sockets
/// close after at most one second of linger, at most one more group of receipts is written; then ``run()`` closes the
/// store and the ZeroMQ context and releases the home. Nothing is acked that was not committed.
public final class AggregatorServer: Service, Sendable {
    /// The data endpoint actually bound (a `*` port resolved).
    public let dataEndpoint: String
    /// The ack endpoint actually bound.
    public let acksEndpoint: String
    /// The store, for reads while the server runs (tests, reports).
    public let store: any StoreWriter
    /// Where the store is (``StoreLocation``: the SQLite file, or the PostgreSQL URL shown without its password).
    public let storeLocation: StoreLocation
    /// The receipts thread's store: ``store`` itself for SQLite (a pool of readers), a connection of its own for
    /// PostgreSQL (whose receipt walk holds a transaction while it writes files).
    let receiptStore: any StoreWriter
    /// Whether CURVE is off.
    public let insecure: Bool
    /// The metrics endpoint actually bound (`HOST:PORT`), when `metrics` is configured.
    public let metricsEndpoint: String?
    /// The console actually bound (`HOST:PORT`), when `console` is configured.
    public let consoleEndpoint: String?

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
    /// The connections each key holds (issue 23 item 7).
    let connections: KeyConnections
    /// Every answer, counted once; `/metrics`, the statistics and `status` are its views.
    let ledger: AnswerLedger
    let metricsServer: MetricsServer?
    /// `serve --console`: its own store reader, its own HTTP thread and read pool.
    let consoleServer: ConsoleServer?
    /// With the metrics endpoint: each recent flight's bags for `jetbridge_flight_bags`, read by a store reader of its
    /// own on a thread of its own (``FlightBagsService``).
    let flightBags: FlightBagsReader?
    /// Why the store is not usable now (the last transaction failed), for `/readyz`; nil after a commit. Written by
    /// the store thread.
    let storeProblem = Locked<String?>(nil)
    /// Seats whose receipts are behind, as the status thread last read them from the store (nil until it could):
    /// `/metrics` and `status` show this value. Nothing on the metrics server's event loop may call the store:
    /// PostgreSQL's calls wait on a future, which SwiftNIO forbids on an event loop (a scrape crashed `serve`).
    let receiptsPending = Locked<Int?>(nil)
    /// Why the SQLite store or its directory is not writable, as the status thread last found (``checkWritable()``).
    let notWritable = Locked<String?>(nil)
    /// When the status thread's writability check began, while it runs (``checkWritable()``).
    let writableCheckStarted = Locked<ContinuousClock.Instant?>(nil)
    /// The fleet of each flight announced in the last ``FleetFlightCounts/window`` (devices by state), as the status
    /// thread last read it: `status` and `/metrics` show it (nil until it could).
    let fleet = Locked<[FleetFlightCounts]?>(nil)
    let startedAt = Date()
    let network: NetworkLoop
    let storeLoop: StoreLoop
    /// Where the server is in its life, and the group that runs it while it runs.
    private let phase = Locked(Phase.built)
    static let zapDomain = "jetbridge"
    static let ackLinger: Duration = .seconds(1)
    /// The ack socket's `RCVHWM`: messages one connection may have waiting to be read.
    static let ackReceiveHighWaterMark = 100
    /// The kernel send buffer of each ack connection, in bytes (`ZMQ_SNDBUF`).
    static let ackSendBuffer = 128 << 10

    enum Phase {
        case built
        /// Stopped before it ran: ``run()`` only cleans up.
        case stopRequested
        case running(ServiceGroup)
        case stopping
        case finished
    }

    /// Opens the store and binds both endpoints; ``run()`` serves.
    ///
    /// - Parameters:
    ///   - home: The aggregator's home (keys, allow list, default store and receipts).
    ///   - configuration: Settings after flags were applied.
    ///   - logger: Where the server logs.
    /// - Throws: ``AggregatorError``: `.unavailable` for a missing key pair or an endpoint in use (naming it),
    ///   `.dataError` for a bad allow list or endpoint, `.tryAgain` for a busy store or a full disk,
    ///   `.unavailable` when another `serve` holds the home's lock (``HomeLock``).
    public convenience init(home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger) throws {
        try self.init(home: home, configuration: configuration, logger: logger, ackBounds: AckRoutes.Bounds())
    }

    /// As ``init(home:configuration:logger:)``, with other bounds on ack routes and held acks (tests, which flood
    /// past them), another interval between two readings of the flights' bags (tests, which cannot wait 30 s), and
    /// other bounds on connections per key (tests).
    init(
        home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger, ackBounds: AckRoutes.Bounds,
        flightBagsInterval: Duration = FlightBagsReader.defaultInterval, connections: KeyConnections = KeyConnections()
    ) throws {
        try configuration.validate()
        self.home = home
        self.configuration = configuration
        self.logger = logger
        self.insecure = configuration.insecure
        let keys = configuration.insecure ? nil : try ServerKeys.load(from: home)
        let allowlist = try DeviceAllowlist.load(from: home.devicesFile)
        // Before the store opens: two `serve`s on one home would share its store and receipts.
        homeLock = try HomeLock(home: home)
        // A `status.json` left by a serve killed with SIGKILL goes now, not when this one writes its own (after its store
        // opened): `status` also refuses a file whose pid is not the lock holder's, but not when a pid comes back (a
        // container's serve is always pid 1).
        do {
            try FileSystem.unlinkIfExists(ServeStatus.url(in: home).path)
        } catch {
            logger.warning("cannot remove the last serve's status file: \(error); `status` reads it as not written yet")
        }
        let storeLocation = try StoreLocation(configuration.store, home: home)
        self.storeLocation = storeLocation
        if case .postgres(_, let location) = storeLocation, !location.passedOver.isEmpty {
            logger.notice(
                "the store URL's \(location.passedOver.joined(separator: ", ")) are passed over: the store keeps its own timeouts and names its sessions itself (docs/AGGREGATOR.md, \"Shared store\")"
            )
        }
        store = try storeLocation.open(create: true, logger: logger)
        do {
            receiptStore = storeLocation.isShared ? try storeLocation.open(create: true, logger: logger) : store
        } catch {
            try? store.close()
            throw error
        }
        let ledger = AnswerLedger()
        self.ledger = ledger
        let metrics = ledger.metrics
        self.connections = connections
        // Every allowed device has its series from the start, its last batch as the store last saw it.
        let lastSyncs = ((try? store.deviceReport().devices) ?? []).reduce(into: [String: Date]()) { syncs, row in
            if let at = row.lastSync { syncs[row.device] = at }
        }
        let started = Date()
        for device in allowlist.devices.keys {
            metrics.declare(device: device, lastBatch: lastSyncs[device] ?? started)
        }
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
        var consoleServerOrNil: ConsoleServer?
        var flightBagsOrNil: FlightBagsReader?
        do {
            let context = try ZeroMQContext(ioThreads: 1)
            contextOrNil = context
            // The handler must exist before the CURVE servers bind, or CURVE admits anyone who knows the server key.
            if keys != nil {
                zapHandler = try ZAPHandler(
                    context: context, allowlist: allowlist.byPublicKey,
                    admit: { key, _ in connections.admit(key: key) }, observer: { handshakes.record($0) })
            }
            let pull = try context.socket(.pull)
            opened.append(pull)
            let router = try context.socket(.router)
            opened.append(router)
            // Batches up to 16 MiB on the data socket; only hellos on the ack socket.
            try pull.set(.maxMessageSize, 16 << 20)
            try router.set(.maxMessageSize, 64 << 10)
            for socket in [pull, router] {
                try socket.set(.linger, Self.ackLinger)
                try Self.detectDeadPeers(on: socket)
                if let keys {
                    try socket.makeCurveServer(keys: keys)
                    try socket.set(.zapDomain, Self.zapDomain)
                }
            }
            if keys != nil {
                // Handshakes that fail before ZAP (a wrong server key, a plaintext client) reach no handler: the
                // monitors (started before bind, as libzmq asks) tell the operator. Their streams end at close.
                // They also report each connection's start (silent until its first message) and end, so that it stops
                // counting against its key.
                for (socket, name) in [(pull, "data"), (router, "acks")] {
                    try socket.monitor(events: [.handshakeFailed, .accepted, .disconnected]) { event in
                        switch event {
                        case .handshakeFailed(let endpoint, let reason):
                            handshakes.recordFailure(socket: name, endpoint: endpoint, failure: reason)
                        case .accepted(_, let descriptor):
                            connections.accepted(descriptor: descriptor, peer: KeyConnections.peer(of: descriptor))
                        case .disconnected(_, let descriptor):
                            connections.closed(descriptor: descriptor)
                        default: break
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
            // What the ack socket receives (hellos, at most 20 summaries and 5 announces a second per device) is read
            // as it comes: 100 messages per connection is room enough, and bounds what one connection can pin to
            // 100 × 64 KiB (libzmq's default of 1,000 let a key's 8 connections pin 500 MB).
            try router.set(.receiveHighWaterMark, Self.ackReceiveHighWaterMark)
            try Self.bind(pull, configuration.dataEndpoint, name: "data")
            try Self.bind(router, configuration.acksEndpoint, name: "acks")
            dataEndpoint = try pull.lastEndpoint
            acksEndpoint = try router.lastEndpoint

            if let endpoint = configuration.metrics { metricsServerOrNil = try MetricsServer(endpoint: endpoint) }
            self.metricsServer = metricsServerOrNil
            self.metricsEndpoint = metricsServerOrNil?.endpoint
            if metricsServerOrNil != nil {
                // A reader of its own, console or not: the flights' bags are read off every other thread's connection.
                let reader = try storeLocation.open(create: true, logger: logger)
                guard let bagsStore = reader as? any ConsoleReading else {
                    try? reader.close()
                    throw AggregatorError(.failure, "the store \(storeLocation) cannot count the flights' bags")
                }
                flightBagsOrNil = FlightBagsReader(store: bagsStore, interval: flightBagsInterval, logger: logger)
            }
            self.flightBags = flightBagsOrNil
            if let console = configuration.console {
                let endpoint = try ConsoleServer.endpoint(console)
                // A reader of its own: the console's reads never wait for (or hold) the store thread's connection.
                let reader = try storeLocation.open(create: true, logger: logger)
                guard let consoleStore = reader as? any ConsoleReading else {
                    try? reader.close()
                    throw AggregatorError(.failure, "the store \(storeLocation) cannot serve the console")
                }
                // And one for its start-up read of today's flights, sharing the answers' kept totals: on PostgreSQL
                // a reader is one connection, and the first answers would wait for that read.
                var warmReader: (any ConsoleReading)?
                do {
                    let token = try ConsoleToken.load(in: home) { path in
                        logger.notice("console: made its sign-in token", metadata: ["file": "\(path)"])
                    }
                    if case .postgres = storeLocation {
                        warmReader = try storeLocation.open(create: true, logger: logger) as? any ConsoleReading
                    }
                    consoleServerOrNil = try ConsoleServer(
                        endpoint: endpoint, store: consoleStore, warmStore: warmReader, home: home,
                        insecure: configuration.insecure, token: token, logger: logger)
                } catch {
                    try? reader.close()
                    try? warmReader?.close()
                    throw error
                }
            }
            self.consoleServer = consoleServerOrNil
            self.consoleEndpoint = consoleServerOrNil?.endpoint
            self.context = context
            self.zap = zapHandler
            let refusals = BatchRefusals(ledger: ledger, logger: logger)
            let mailbox = try StoreMailbox()
            let storeLimits = Locked(allowlist.storeLimits)
            network = NetworkLoop(
                sockets: .init(pull: pull, router: router), allowlist: allowlist, devicesFile: home.devicesFile,
                zap: zapHandler, insecure: insecure, ackBounds: ackBounds, queue: queue, mailbox: mailbox,
                storeLimits: storeLimits, connections: connections, refusals: refusals, logger: logger)
            storeLoop = StoreLoop(
                mailbox: mailbox, store: store, storeLocation: storeLocation, queue: queue, receipts: receipts,
                configuration: configuration, refusals: refusals, limits: storeLimits, storeProblem: storeProblem,
                handshakes: handshakes, logger: logger)
        } catch {
            for socket in opened { try? socket.close(linger: .zero) }
            metricsServerOrNil?.shutdown()
            consoleServerOrNil?.shutdown()
            flightBagsOrNil?.close()
            zapHandler?.stop()
            contextOrNil?.terminate()
            try? store.close()
            if storeLocation.isShared { try? receiptStore.close() }
            if let error = error as? AggregatorError { throw error }
            throw AggregatorError(.failure, "cannot start: \(error)")
        }
        self.allowedDevices = allowlist.devices.count
    }

    private static func bind(_ socket: Socket, _ endpoint: String, name: String) throws {
        do {
            try socket.bind(endpoint)
        } catch {
            if error.code == .addressInUse {
                throw AggregatorError(
                    .unavailable, "the \(name) endpoint \(endpoint) is in use (is another aggregator running?)")
            }
            throw AggregatorError(.dataError, "cannot bind the \(name) endpoint \(endpoint): \(error.text)")
        }
    }

    /// Turns a failure to open the store into the operator's error: `.tryAgain` for a full disk or a busy store
    /// (``FailureClass``), else `.unavailable`.
    static func storeError(_ error: any Error, path: String) -> AggregatorError {
        let context = "cannot open the store \(path)"
        return AggregatorError(temporary: error, context: context)
            ?? AggregatorError(.unavailable, "\(context): \(error)")
    }

    /// How long an accepted connection has to finish its ZMTP handshake: under ``KeyConnections/silentAfter``.
    static let handshakeInterval: Duration = .seconds(10)

    /// How many devices the allow list held at start, for the start-up line.
    private let allowedDevices: Int

    /// Dead peers are found by TCP, not ZMTP heartbeats: with heartbeats on, libzmq 4.3.4 (and later, unfixed:
    /// zeromq/libzmq#4364) aborts the process when a peer whose pipe is full goes away (its heartbeat timer writes to
    /// a connection already failed: `Assertion failed: !_io_error (src/stream_engine_base.cpp:331)`). Keepalive
    /// probes after 10 s of silence, 3 of them 5 s apart, and 20 s for unacknowledged data (`TCP_USER_TIMEOUT`)
    /// drop a vanished peer in about 17–22 s, as the heartbeats did (docs/AGGREGATOR.md, "Hostile peers").
    ///
    /// A connection has 10 s to finish its handshake (libzmq's default is 30 s): one that does not is closed before
    /// it could count as a silent connection of a key (``KeyConnections``).
    static func detectDeadPeers(on socket: Socket) throws(ZeroMQError) {
        try socket.set(.heartbeatInterval, .zero)
        try socket.set(.handshakeInterval, Self.handshakeInterval)
        try socket.set(.tcpKeepalive, true)
        try socket.set(.tcpKeepaliveIdle, .seconds(10))
        try socket.set(.tcpKeepaliveInterval, .seconds(5))
        try socket.set(.tcpKeepaliveCount, 3)
        try socket.set(.tcpMaxRetransmitTimeout, .seconds(20))
    }

    // MARK: Lifecycle

    /// The services ``run()`` runs, in start order (shut down in reverse): metrics, console, flight bags, status,
    /// receipts, store, ingress.
    var services: [any Service] {
        var services: [any Service] = []
        if let metricsServer {
            services.append(MetricsService(server: metricsServer))
        }
        if let consoleServer { services.append(ConsoleService(server: consoleServer)) }
        if let flightBags { services.append(FlightBagsService(reader: flightBags)) }
        services.append(StatusService(server: self))
        services.append(ReceiptsService(worker: receipts))
        services.append(StoreService(loop: storeLoop, queue: queue))
        services.append(IngressService(loop: network))
        return services
    }

    /// Serves until graceful shutdown (SIGTERM/SIGINT through the command's `ServiceGroup`), cancellation or
    /// ``stop()``; then closes the store, the sockets' context and the home's lock.
    /// - Throws: ``AggregatorError`` when a service had to stop on a failure.
    public func run() async throws {
        let group = ServiceGroup(
            configuration: .init(
                services: services.map { .init(service: $0, successTerminationBehavior: .ignore) },
                logger: logger))
        let start = phase.withLock { phase -> Bool in
            guard case .built = phase else { return false }
            phase = .running(group)
            return true
        }
        var failure: (any Error)?
        if start {
            // The HTTP endpoints answer from here, before the line that says `serve` is serving: they answered 503
            // `starting` until their services had started in the group, a moment after it, and a client that went by
            // the line (a script, a test) met that.
            checkWritable()
            metricsServer?.start { [self] method, path in answer(method, path) }
            consoleServer?.start()
            logger.info(
                "aggregator serving",
                metadata: [
                    "data": "\(dataEndpoint)", "acks": "\(acksEndpoint)",
                    "mode": "\(insecure ? "INSECURE (no CURVE, device ids taken on trust)" : "CURVE")",
                    "store": "\(storeLocation)", "receipts": "\(home.resolve(configuration.receipts).path)",
                    "allowedDevices": .stringConvertible(allowedDevices),
                    "metrics": "\(metricsEndpoint.map { "http://\($0)/metrics" } ?? "off")",
                    "console": "\(consoleEndpoint.map { "http://\($0)/" } ?? "off")",
                ])
            if insecure { StoreLoop.warnInsecure(logger) }
            // The group and its services' tasks on a thread of their own, not the cooperative pool: their start and
            // their shutdown never wait for blocking work elsewhere in the process.
            let executor = ThreadTaskExecutor(name: "jb-services")
            defer { executor.finish() }
            do {
                try await withTaskCancellationHandler {
                    try await withGracefulShutdownHandler {
                        try await withTaskExecutorPreference(executor) { try await group.run() }
                    } onGracefulShutdown: {
                        self.stop()
                    }
                } onCancel: {
                    self.stop()
                }
            } catch {
                failure = error
                logger.critical("aggregator failed: \(error)")
            }
        }
        finish()
        if let failure {
            if let failure = failure as? AggregatorError { throw failure }
            throw AggregatorError(.failure, "serve stopped: \(failure)")
        }
    }

    /// After the services: the final checkpoint, the store, the ZeroMQ context, the home's lock.
    private func finish() {
        if case .stopRequested = phase.withLock({ $0 }) {
            metricsServer?.shutdown()
            consoleServer?.shutdown()
        }
        flightBags?.close()
        do { try store.idleMaintenance() } catch {
            logger.warning(
                "final idle maintenance (the SQLite checkpoint, the PostgreSQL stale-mark fold) failed",
                metadata: ["error": "\(error)"])
        }
        do { try store.close() } catch {
            logger.warning("closing the store failed", metadata: ["error": "\(error)"])
        }
        if storeLocation.isShared { try? receiptStore.close() }
        zap?.stop()
        context.terminate()
        homeLock.release()
        storeLoop.logStatistics(final: true)
        logger.info("aggregator stopped")
        let waiters = phase.withLock { phase in
            phase = .finished
            return finishedWaiters.withLock { waiters in
                defer { waiters = [] }
                return waiters
            }
        }
        for waiter in waiters { waiter.resume() }
    }

    private let finishedWaiters = Locked<[CheckedContinuation<Void, Never>]>([])

    /// Begins a graceful stop; returns at once. ``finished()`` returns when it is complete.
    public func stop() {
        let group = phase.withLock { phase -> ServiceGroup? in
            switch phase {
            case .built:
                phase = .stopRequested
                return nil
            case .running(let group):
                phase = .stopping
                return group
            case .stopRequested, .stopping, .finished:
                return nil
            }
        }
        guard let group else { return }
        logger.info("aggregator stopping: committing and acking the batches in hand")
        Task { await group.triggerGracefulShutdown() }
    }

    /// Reloads the allow list at the next opportunity (SIGHUP).
    public func requestReload() { network.requestReload() }

    /// Whether a stop has begun or is complete.
    var stoppingOrFinished: Bool {
        switch phase.withLock({ $0 }) {
        case .built, .running: false
        case .stopRequested, .stopping, .finished: true
        }
    }

    /// Waits until the server has stopped completely (store closed).
    public func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = phase.withLock { phase -> Bool in
                if case .finished = phase { return true }
                finishedWaiters.withLock { $0.append(continuation) }
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// The counters so far.
    public var currentStatistics: ServerStatistics { ledger.statistics }
}
