import FileQueue
import JetbridgeModel
import JetbridgeProtocol
import Logging
import Synchronization
import SystemSupport
import ZeroMQ

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The sync loop: owns the queue handle and every aggregator's pair of sockets, on one thread of its own, so no
/// blocking ZeroMQ or file call ever runs on Swift's cooperative pool.
///
/// One thread for all sockets rather than one each: the loop must look at acks, the window and the queue together,
/// and libzmq's poll waits on every ack socket at once while sends are non-blocking, so more threads would only add
/// hand-offs. The only state shared with other threads is the stop request and the links' monitor state.
///
/// With several aggregators (docs/PROTOCOL.md, "Several aggregators") each has its own `PUSH` + `DEALER`, so the
/// loop knows which aggregator had which batch and which one answered; ``GroundSet`` chooses where each send goes.
final class SyncEngine: Sendable {
    private let configuration: AgentConfiguration
    private let options: SyncOptions
    /// Messages taken from one aggregator's ack channel per turn of the loop.
    static let maxMessagesPerTurn = 1_000
    /// Seconds a link problem must read the same before it is logged.
    static let problemSettle = 0.2
    private let logger: Logger
    private let progress: (@Sendable (SyncProgress) -> Void)?
    private let stopRequested = Atomic<Bool>(false)
    /// Per aggregator, what its sockets' monitors say about its link, read by the loop to pace sends and explain
    /// silence.
    private let links: [Link]
    /// Wakes the loop's poll when a link's state changes or a stop is requested, so the loop can wait for acks in
    /// long polls (``Loop/longWait``) rather than waking every few milliseconds to look. `nil` only when the system
    /// had no descriptors left for it: the run then fails at its start.
    private let wakeup: WakeupPipe?

    /// One aggregator's ``LinkState``, shared with its sockets' monitor threads.
    final class Link: Sendable {
        let state = Mutex(LinkState())
    }

    init(
        configuration: AgentConfiguration, options: SyncOptions, logger: Logger,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) {
        self.configuration = configuration
        self.options = options
        self.logger = logger
        self.progress = progress
        links = options.aggregators.map { _ in Link() }
        wakeup = try? WakeupPipe()
    }

    /// A fresh secret routing id for the ack `DEALER` (docs/PROTOCOL.md, Acks): `j` and 16 bytes from the system's
    /// cryptographic generator. The ground routes this device's acks to it once a hello has come from it, and the
    /// ROUTER hands it over only to a connection that presents it, so another device cannot take the acks over the
    /// way it could take over a routing id equal to the device id. It stays the same across reconnects of the socket
    /// (the ground's route stays valid) and changes with every run.
    static func newAckRoutingID() -> Data {
        var generator = SystemRandomNumberGenerator()
        return Data([UInt8(ascii: "j")] + (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// Asks the loop to stop sending, wait briefly for acks, and end. Safe from any thread, repeatedly.
    func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
        wakeup?.signal()
    }

    /// Runs the loop on a new thread and returns its outcome.
    func run() async -> SyncOutcome {
        await runOnOwnThread("jetbridge-sync") { [self] in runBlocking() }
    }

    /// The loop itself; blocks the calling thread until the run ends.
    func runBlocking() -> SyncOutcome {
        var loop = Loop(engine: self)
        return loop.run()
    }

    /// The state of one run, touched only by the engine's thread.
    private struct Loop {
        let engine: SyncEngine
        let clock = ContinuousClock()
        let start: ContinuousClock.Instant
        var statistics = SyncStatistics()
        var ackedInQueue: UInt64 = 0
        var initialLast: UInt64 = 0
        var total = 0
        /// Per aggregator: its ack DEALER's routing id, the same for every socket of this run (its route stays valid),
        /// and one secret per aggregator, so no aggregator learns the route another one uses.
        let routingIDs: [Data]
        /// Per aggregator: what it did in this run.
        var perAggregator: [AggregatorStatistics]
        /// Which aggregators may get batches, and which one gets the next.
        var ground: GroundSet
        /// Batch names already warned about for an ack outside the bounds (``ignoreInvalid(_:label:problem:warn:)``).
        var warnedInvalid: Set<String> = []
        /// Proof of delivery: the acknowledged records kept per flight, and which flights the ground confirmed.
        let archive: DeliveryArchive
        var confirmer = DeliveryConfirmer()
        /// Something was acknowledged since the flights' summaries were last computed.
        var holdingsStale = true
        var holdings: [String: DeliveryArchive.Holding] = [:]
        /// The flights with records acknowledged since `holdings` was computed: a summary asked from it may be
        /// answered with records the device had not counted yet (``handleSummaryAnswer(_:from:device:queue:)``).
        var appendedSinceHoldings: Set<String> = []
        /// The records sent again after a `mismatch` in this run, by id: they are in `delivered/` already, and their
        /// acks do not write them there again (``DeliveryArchive/append(_:tails:held:)``).
        var resent: [UUID: Data] = [:]
        /// Flights whose file in `delivered/` this sync has checked for a torn end, and the ends cut
        /// (``DeliveryArchive/append(_:tails:held:)``, ``DeliveryArchive/sizeToConfirm(flight:wholeBytes:tails:)``).
        var tails = DeliveryArchive.TailChecks()
        /// The records set aside in `rejected/` when the sync started (read before the loop, where a failure can end
        /// the sync: an unreadable `rejected/` must not read as empty, or its records would be sent again).
        var setAsideAtStart: Set<UInt64> = []
        /// The home's sync lock, held for the whole run: one sync per home. Two on one home would each acknowledge
        /// the queue, append to `delivered/`, and read, change and save `confirmed.json` over the other's, which
        /// can drop the summary of records retention released (the flight is then never confirmed again). Nil
        /// until taken, and for a run that did not take it (another sync holds it, or the home does not exist):
        /// such a run writes nothing in the home, neither its state nor retention's releases.
        var homeLock: FileLock?
        /// Round robin over the aggregators for summaries.
        var nextAsk = 0
        /// An aggregator was usable at some time in this run: from then on, while none is, the wait for the ground's
        /// confirmation pauses (``DeliveryConfirmer/Ground/lost``) rather than running out during a cut.
        var groundReached = false
        /// The announcements sent on every new connection after its hello (docs/PROTOCOL.md, "Announce"): the flights
        /// this device holds records of that the ground has not confirmed, as they stood when the sync started.
        var announcements: [FlightAnnounce] = []
        /// When a read of the queue last found nothing new (``endReadInterval``); reset when this loop appends.
        var foundEndAt = -Double.infinity

        init(engine: SyncEngine) {
            self.engine = engine
            self.start = clock.now
            let aggregators = engine.options.aggregators
            routingIDs = aggregators.map { _ in SyncEngine.newAckRoutingID() }
            perAggregator = aggregators.map { AggregatorStatistics(data: $0.dataEndpoint, acks: $0.ackEndpoint) }
            ground = GroundSet(count: aggregators.count)
            archive = DeliveryArchive(home: engine.configuration.home)
            confirmer.limits = engine.options.confirmLimits
        }

        /// Several aggregators: messages then name the one they concern.
        var isSpread: Bool { options.aggregators.count > 1 }

        /// The name of aggregator `index` in logs and output: its data endpoint.
        func name(_ index: Int) -> String { options.aggregators[index].dataEndpoint }

        func link(_ index: Int) -> LinkState { engine.links[index].state.withLock { $0 } }

        var allLinks: [LinkState] { engine.links.map { $0.state.withLock { $0 } } }

        var configuration: AgentConfiguration { engine.configuration }
        var options: SyncOptions { engine.options }
        var logger: Logger { engine.logger }

        func now() -> Double {
            (clock.now - start).seconds
        }

        mutating func run() -> SyncOutcome {
            guard engine.wakeup != nil else {
                let problem = "cannot create the sync loop's wake-up pipe: no file descriptors left"
                return finish(.failed(AgentError(.failure, problem)), queue: nil)
            }
            let queue: FileQueue
            do {
                // A home that does not exist (nor a queue configured outside it) was never captured into: most often
                // a mistyped `--home`. Sync does not create it (capture does), or it would report a drained queue it
                // had just made.
                guard try Files.isPresent(configuration.home.url) || Files.isPresent(configuration.queueDirectory)
                else {
                    throw AgentError(
                        .noInput,
                        "no device home at \(configuration.home.url.path): nothing was captured there, so there is nothing to sync (check --home or JETBRIDGE_HOME)"
                    )
                }
                try configuration.home.prepare(queueDirectory: configuration.queueDirectory)
                homeLock = try Self.lock(configuration.home)
                if let damaged = try archive.setAsideDamagedConfirmations() {
                    logger.warning(
                        "\(archive.confirmationsFile.path) does not decode (\(damaged.problem)); kept as \(damaged.file.path), and every flight is asked again: a flight whose records retention released stays NOT confirmed"
                    )
                }
                queue = try FileQueue(directory: configuration.queueDirectory)
                let status = try queue.status()
                ackedInQueue = status.acknowledgedThrough
                setAsideAtStart = try SetAside.sequences(in: configuration.home)
                // A set-aside sequence past the queue's last one was never this queue's (a record is set aside
                // after it was read from the queue, and a queue never numbers a sequence twice): stale too, or the
                // records captured up to it while this sync runs would be skipped and acknowledged past unsent.
                let last = max(status.lastSequence ?? 0, status.acknowledgedThrough)
                let stale = try SetAside.stale(
                    setAsideAtStart.filter { $0 > status.acknowledgedThrough && $0 <= last }, in: configuration.home
                ) { sequence in
                    try queue.read(from: sequence, maxRecords: 1, maxBytes: Int(Int32.max)).first.flatMap {
                        $0.sequence == sequence ? $0.payload : nil
                    }
                }
                for sequence in stale.sorted() {
                    logger.warning(
                        "\(SetAside.file(for: sequence, in: configuration.home).path) holds another record than the queue's \(sequence) (the queue was replaced since it was set aside): the queue's record is sent; the file stays, and is kept beside should this one be refused too"
                    )
                }
                let beyond = setAsideAtStart.filter { $0 > last }
                for sequence in beyond.sorted() {
                    logger.warning(
                        "\(SetAside.file(for: sequence, in: configuration.home).path) names sequence \(sequence), past the queue's last (\(last)): it was set aside from a queue replaced since; the queue's record with that sequence, when captured, is sent"
                    )
                }
                setAsideAtStart.subtract(stale.union(beyond))
                announcements = Self.announcements(
                    device: configuration.device,
                    flights: try CaptureService(configuration: configuration, logger: logger)
                        .deliveries(queue: configuration.queueDirectory, acknowledgedThrough: status.acknowledgedThrough)
                        .filter { $0.unacknowledged > 0 || ($0.acknowledged > 0 && !$0.confirmed) }.map(\.flight))
                initialLast = status.lastSequence ?? status.acknowledgedThrough
                total = status.unacknowledged
            } catch let error as FileQueueError {
                return finish(.failed(AgentError(syncQueue: error, home: configuration.home)), queue: nil)
            } catch {
                return finish(.failed(AgentError(error)), queue: nil)
            }
            let context: ZeroMQContext
            do {
                context = try ZeroMQContext()
            } catch {
                return finish(.failed(AgentError(.failure, "cannot create a ZeroMQ context: \(error)")), queue: queue)
            }
            var peers: [Peer] = []
            do {
                for index in options.aggregators.indices {
                    peers.append(Peer(sockets: try connect(context, index)))
                }
            } catch {
                for peer in peers { peer.sockets.close(linger: .zero) }
                return finish(.failed(error), queue: queue)
            }
            let ending = loop(queue: queue, context: context, peers: &peers)
            for peer in peers { peer.sockets.close(linger: options.closingLinger) }
            context.terminate()
            return finish(ending, queue: queue)
        }

        /// The loop's view of one aggregator's connection.
        struct Peer {
            var sockets: Sockets
            /// Link-ups already acted on.
            var seenUps = 0
            /// When to open fresh sockets after the aggregator ended a handshake for good, and the next delay.
            var freshAt: Double?
            var freshDelay = Loop.freshDelays.lowerBound
            var linkWasUp = false
            var lastHello = -Double.infinity
        }

        /// The two sockets of one connection to the ground.
        struct Sockets {
            let push: Socket
            let dealer: Socket

            func close(linger: Duration) {
                try? dealer.close(linger: .zero)
                try? push.close(linger: linger)
            }
        }

        /// Creates and connects aggregator `index`'s two sockets with every option set explicitly (docs/PROTOCOL.md,
        /// Sockets), each with a monitor that feeds its ``LinkState``. Called again for a fresh connection after the
        /// aggregator ended a handshake for good (libzmq does not reconnect by itself after a refused key).
        func connect(_ context: ZeroMQContext, _ index: Int) throws(AgentError) -> Sockets {
            let aggregator = options.aggregators[index]
            let generation = engine.links[index].state.withLock { state in
                state.sockets += 1
                state.up = [false, false]
                state.unreachable = [false, false]
                state.needsFreshSockets = false
                return state.sockets
            }
            var endpoint = aggregator.dataEndpoint
            do {
                let push = try context.socket(.push)
                try watch(push, channel: .data, sockets: generation, link: engine.links[index])
                try configure(push, serverKey: aggregator.serverPublicKey)
                try push.set(.sendHighWaterMark, max(16, configuration.sync.window * 2))
                // A PUSH receives nothing: whatever a hostile peer sends it waits, one message at most, unread.
                try push.set(.receiveHighWaterMark, 1)
                try push.connect(aggregator.dataEndpoint)
                endpoint = aggregator.ackEndpoint
                let dealer = try context.socket(.dealer)
                try watch(dealer, channel: .acks, sockets: generation, link: engine.links[index])
                try dealer.set(.routingID, routingIDs[index])
                try configure(dealer, serverKey: aggregator.serverPublicKey)
                try dealer.set(.sendHighWaterMark, 64)
                try dealer.set(.receiveHighWaterMark, max(1000, configuration.sync.window * 4))
                try dealer.connect(aggregator.ackEndpoint)
                return Sockets(push: push, dealer: dealer)
            } catch {
                // An endpoint libzmq refuses though it passed `WireProtocol.endpointProblem`: a usage error when it
                // came from the command line, bad data (65) when from the configuration file (docs/EXIT-CODES.md).
                let malformed = error.code == .invalidArgument || error.code == .protocolNotSupported
                let configured = configuration.aggregators.contains { $0.data == endpoint || $0.acks == endpoint }
                guard malformed else {
                    throw AgentError(
                        .failure, "cannot connect to \(endpoint): \(error); check --to/--acks or ground.data/ground.acks")
                }
                throw configured
                    ? AgentError(
                        .dataError,
                        "cannot connect to \(endpoint): \(error); check ground.data/ground.acks in \(configuration.file?.path ?? "the configuration")")
                    : AgentError(.usage, "cannot connect to \(endpoint): \(error); check --to/--acks")
            }
        }

        static let linkEvents: MonitorEvents = [
            .connected, .connectRetried, .disconnected, .closed, .handshakeFailed, .handshakeSucceeded,
        ]

        /// Feeds one socket's events into ``LinkState``; turns handshake failures into words: without this, a refused
        /// key or a wrong server key looks like a ground that never answers.
        ///
        /// The events are applied on the monitor's thread, not in a task: the link state must not wait for a busy
        /// cooperative pool, since nothing is sent until it says the link is up.
        func watch(_ socket: Socket, channel: LinkState.Channel, sockets: Int, link: Link) throws(ZeroMQError) {
            let device = configuration.device
            var allow = "jetbridge-aggregator devices allow \(device) KEY"
            if case .curve(let keys, _) = options.security {
                allow = DeviceKeys.allowCommand(device: device, publicKeyZ85: keys.publicKeyZ85)
            }
            let curve = if case .curve = options.security { true } else { false }
            let explain: @Sendable (HandshakeFailure) -> String = { [allow] failure in
                Self.explain(failure, allow: allow, curve: curve)
            }
            let wakeup = engine.wakeup
            try socket.monitor(events: Self.linkEvents) { event in
                link.state.withLock { $0.apply(event, channel: channel, sockets: sockets, explain: explain) }
                wakeup?.signal()
            }
        }

        /// A handshake failure in words, with what to do about it.
        static func explain(_ failure: HandshakeFailure, allow: String, curve: Bool) -> String {
            switch failure {
            case .authentication(300):
                return
                    "the ground turned this connection away for now (ZAP status 300): this device's key holds as many connections as the ground allows one key (is another agent running with the same key?)"
            case .authentication(let status):
                return
                    "the ground refused this device's key (ZAP status \(status)): allow it on the ground with `\(allow)`"
            case .protocolError(let code):
                return
                    "the handshake with the ground failed (ZMTP protocol error 0x\(String(code, radix: 16))): check that both sides use CURVE (or both --insecure) and that ground.serverPublicKey is the ground's key"
            case .noDetail(let code):
                // A CURVE server that cannot decrypt our HELLO (it was encrypted for another server key) closes the
                // connection without a word: the client sees only the connection end in the middle of the handshake.
                guard curve else { return "the handshake with the ground failed: \(code)" }
                return
                    "the ground's key does not match ground.serverPublicKey (or --server-key): the ground closed the connection during the CURVE handshake (\(code)); copy keys/server.pub from the ground"
            }
        }

        /// - Parameter serverKey: The aggregator's own key; `nil`: the one in the options' security.
        func configure(_ socket: Socket, serverKey own: Data?) throws(ZeroMQError) {
            try socket.set(.linger, options.linger)
            try socket.set(.immediate, false)
            try socket.set(.heartbeatInterval, .seconds(5))
            try socket.set(.heartbeatTimeout, .seconds(15))
            // Heartbeats alone miss a link that stalls under our own sends: libzmq produces its PING, and starts the
            // heartbeat's timeout, only when the connection can take more output, so a data socket whose batches
            // sit unacknowledged in a link that keeps failing (TCP backing off through 5 s cuts) waited 90 s in
            // netlab's flapping profile. Data unacknowledged by the peer's TCP for 20 s ends the connection instead
            // (a slow link shared by four devices at 1 Mbit/s saw stalls of over 10 s that then recovered).
            try socket.set(.tcpMaxRetransmitTimeout, .seconds(20))
            try socket.set(.reconnectInterval, .milliseconds(100))
            // A link that returns is found within 1.5 s at most: a connect attempt whose SYN was lost in a cut gives
            // up after a second rather than waiting for the kernel's SYN retries (up to two minutes).
            try socket.set(.reconnectIntervalMax, .milliseconds(500))
            try socket.set(.connectTimeout, .seconds(1))
            // An ack is one small frame: a bigger message from the ground ends the connection in libzmq as soon as its
            // size is read, so it never reaches this process's memory (the loop opens fresh sockets, as after any
            // lost link: libzmq does not reconnect after it by itself).
            try socket.set(.maxMessageSize, WireProtocol.maxAckMessageBytes)
            if case .curve(let keys, let serverKey) = options.security {
                try socket.makeCurveClient(keys: keys, serverPublicKey: own ?? serverKey)
            }
        }

        mutating func loop(queue: FileQueue, context: ZeroMQContext, peers: inout [Peer]) -> SyncOutcome.Ending {
            var window = SyncWindow(
                acknowledgedThrough: ackedInQueue, limits: SyncWindow.Limits(configuration.sync),
                setAside: setAsideAtStart.filter { $0 > ackedInQueue })
            let device = configuration.device
            var reachedEnd = false
            var stopping: (ending: SyncOutcome.Ending, deadline: Double)?
            var lastProgress = -Double.infinity
            var lastState = -Double.infinity  // written at once, so `status` shows a sync running from its start
            var lastProblem: (text: String, at: Double)?
            // Since when some problem has been there: logged, as it reads then, once that is `problemSettle`.
            // The two sockets of a link fail a moment apart: logged at once, `cannot reach A` came 2 ms before
            // `cannot reach A and B`, two lines for one cut.
            var problemSince: Double?
            var lastDown: (text: String, at: Double)?
            var sendBlocked = false
            do {
                while true {
                    let t = now()
                    for index in peers.indices {
                        try follow(
                            link: index, peer: &peers[index], window: &window, context: context, now: t,
                            lastProblem: &lastProblem)
                    }
                    if ground.anyUsable { groundReached = true }
                    if isSpread, ground.anyUsable {
                        // Batches waiting for an aggregator whose link is down (killed, cut off, refusing us) go
                        // once more, to another one, now rather than after a timeout.
                        let ground = self.ground
                        let moved = window.sendAgain(now: t) { batch in
                            batch.route.map { !ground.isUsable($0) } ?? false
                        }
                        if moved > 0 {
                            logger.info(
                                "sending \(moved) batches that were waiting for an aggregator that is down to the others"
                            )
                        }
                    }
                    if stopping == nil {
                        if engine.stopRequested.load(ordering: .relaxed) {
                            stopping = (.stopped, t + options.stopGrace)
                            logger.info("stop requested; waiting up to \(options.stopGrace) s for outstanding acks")
                        } else if let timeout = options.timeout, t >= timeout {
                            // Giving up means now: the caller chose how long to wait.
                            stopping = (.timedOut, t)
                            logger.info("timeout of \(timeout) s reached")
                        }
                    }
                    if stopping == nil {
                        // Past the queue's end, each look for records appended since lists the queue's directory:
                        // while the loop waits for acks it looks at most every `endReadInterval`.
                        let look = !reachedEnd || t - foundEndAt >= Self.endReadInterval
                        while look, window.hasRoom {
                            let read = try queue.read(
                                from: window.nextSequence, maxRecords: configuration.sync.batchRecords,
                                // Frame 2 adds the array's header to the records (`maxBatchRecordBytes`).
                                maxBytes: WireProtocol.batchRecordBytes(upTo: configuration.sync.batchBytes))
                            guard !read.isEmpty else {
                                reachedEnd = true
                                foundEndAt = t
                                break
                            }
                            reachedEnd = false
                            total += read.count { $0.sequence > initialLast }
                            let skipped = read.count { window.setAside.contains($0.sequence) }
                            statistics.skipped += skipped
                            window.add(read: read, now: t)
                        }
                        // While no link is up nothing is handed to a socket: it would only pile up there and arrive
                        // as duplicates once a link returns.
                        if ground.anyUsable {
                            sendBlocked = try send(window: &window, peers: peers, now: t)
                            if let since = window.oldestWaitingSince, t - since >= options.helloInterval {
                                for index in peers.indices
                                where ground.isUsable(index) && t - peers[index].lastHello >= options.helloInterval {
                                    sendHello(peers[index].sockets.dealer)
                                    peers[index].lastHello = t
                                }
                            }
                        }
                    }
                    if stopping == nil, reachedEnd, window.isIdle, configuration.sync.confirmDelivery {
                        try confirm(queue: queue, peers: peers, now: t, reachedEnd: &reachedEnd)
                    }
                    if stopping == nil, options.untilDrained, reachedEnd, window.isIdle, confirmer.isSettled {
                        try persist(window, queue: queue)
                        return .drained
                    }
                    if let stopping, !window.awaitsAnAck || t >= stopping.deadline {
                        try persist(window, queue: queue)
                        return stopping.ending
                    }
                    // Acks wake the poll, and so do link changes and a stop request (``SyncEngine/wakeup``); the
                    // rest (ack deadlines, hellos, progress) can wait for the long wait. A data socket at its
                    // high-water mark is not watched: batches it refused are tried again after the short wait.
                    let wait = sendBlocked ? Self.shortWait : Self.longWait
                    let ready = try poll(
                        peers.map { PollItem($0.sockets.dealer, .readable) } + [PollItem(engine.wakeup!)],
                        timeout: wait)
                    if !ready[peers.count].isEmpty { engine.wakeup!.drain() }
                    sendBlocked = false
                    for index in peers.indices where !ready[index].isEmpty {
                        // At most `maxMessagesPerTurn` per turn: what is left wakes the next poll at once, and the
                        // loop's stop, timeout and deadline checks run between (a ground flooding the ack channel
                        // kept the loop here, and SIGTERM unanswered, for as long as it sent).
                        var taken = 0
                        while taken < SyncEngine.maxMessagesPerTurn,
                            let frames = try peers[index].sockets.dealer.receiveMultipart(options: .dontWait)
                        {
                            taken += 1
                            if let failure = try handle(
                                frames, from: index, device: device, window: &window, queue: queue)
                            {
                                try persist(window, queue: queue)
                                return .failed(failure)
                            }
                        }
                    }
                    try persist(window, queue: queue)
                    let after = now()
                    let links = allLinks
                    let problem = Self.problem(links, options: options)
                    let down = isSpread && problem == nil ? Self.down(links, ground: ground, options: options) : nil
                    if after - lastProgress >= 0.1 {
                        lastProgress = after
                        var progress = progress(window, at: after)
                        progress.problem = problem
                        progress.down = down
                        engine.progress?(progress)
                    }
                    if problem == nil { problemSince = nil } else if problemSince == nil { problemSince = after }
                    if let problem, let since = problemSince, after - since >= SyncEngine.problemSettle,
                        problem != lastProblem?.text || after - lastProblem!.at >= 30
                    {
                        lastProblem = (problem, after)
                        logger.warning("\(problem)")
                    }
                    if let down, down != lastDown?.text || after - lastDown!.at >= 30 {
                        lastDown = (down, after)
                        logger.warning("\(down); the others carry the sync")
                    } else if down == nil {
                        lastDown = nil
                    }
                    if after - lastState >= options.stateInterval {
                        lastState = after
                        writeState(
                            result: "running: \(NumberText.grouped(statistics.acknowledged)) records acknowledged so far")
                    }
                }
            } catch let error as AgentError {
                try? persist(window, queue: queue)
                return .failed(error)
            } catch let error as FileQueueError {
                try? persist(window, queue: queue)
                return .failed(AgentError(syncQueue: error, home: configuration.home))
            } catch {
                try? persist(window, queue: queue)
                return .failed(AgentError(.failure, "sync failed: \(error)"))
            }
        }

        /// Acts on what aggregator `index`'s link monitors say: fresh sockets after a refused handshake or a lost
        /// link, and on each link-up a hello and one more send of the batches that were waiting for its ack.
        mutating func follow(
            link index: Int, peer: inout Peer, window: inout SyncWindow, context: ZeroMQContext, now t: Double,
            lastProblem: inout (text: String, at: Double)?
        ) throws {
            var link = self.link(index)
            let who = isSpread ? "aggregator \(name(index))" : "the ground"
            if link.needsFreshSockets {
                if peer.freshAt == nil { peer.freshAt = t + peer.freshDelay }
                if let at = peer.freshAt, t >= at {
                    // A new handshake, so an allowance made on the ground meanwhile is picked up.
                    logger.debug("opening fresh connections to \(who) after: \(link.failure ?? "-")")
                    peer.sockets.close(linger: .zero)
                    peer.sockets = try connect(context, index)
                    peer.freshAt = nil
                    peer.freshDelay = min(peer.freshDelay * 2, Self.freshDelays.upperBound)
                    link = self.link(index)
                }
            }
            if link.isUp {
                peer.linkWasUp = true
            } else if peer.linkWasUp {
                // The link went down: fresh sockets, so that nothing queued in the old data socket (batches sent
                // while the loss was not yet known) is delivered after the link returns, on top of the one resend
                // each waiting batch gets then.
                peer.linkWasUp = false
                if isSpread {
                    logger.warning("\(who) is down; its unacknowledged batches go to the other aggregators")
                } else {
                    logger.debug("the link to the ground is down; opening fresh connections")
                }
                peer.sockets.close(linger: .zero)
                peer.sockets = try connect(context, index)
                link = self.link(index)
            }
            ground.setUp(index, link.isUp)
            if link.isUp, link.ups != peer.seenUps {
                peer.freshDelay = Self.freshDelays.lowerBound
                if peer.seenUps > 0 {
                    // What was sent before the link went down is either stored (its ack lost) or lost: each such
                    // batch goes once more, now, rather than after a backed-off timeout.
                    if isSpread {
                        let again = window.sendAgain(now: t) { $0.route == index }
                        logger.info("\(who) is back; sending \(again) unacknowledged batches once more")
                    } else {
                        let again = window.linkRestored(now: t)
                        logger.info("the link to the ground is back; sending \(again) unacknowledged batches once more")
                    }
                } else if lastProblem != nil {
                    logger.info("connected to \(who)")
                }
                peer.seenUps = link.ups
                lastProblem = nil
                // Announce the ack route on every new connection, before any batch; then the flights.
                sendHello(peer.sockets.dealer)
                peer.lastHello = t
                sendAnnouncements(peer.sockets.dealer)
            }
        }

        /// Seconds between looks past the queue's end for records captured during the sync.
        static let endReadInterval = 0.25
        /// The longest the loop sleeps in its poll: how late an ack deadline, a hello or a progress line can be.
        static let longWait: Duration = .milliseconds(100)
        /// The poll's wait while a data socket refused a batch (at its high-water mark).
        static let shortWait: Duration = .milliseconds(20)

        /// Seconds before fresh sockets replace ones whose handshake the ground ended for good; doubled per attempt.
        static let freshDelays = 0.5...5.0

        /// Why nothing gets through, when the sockets know: a handshake failure in words, or endpoints where no
        /// connection could be made. `nil` while the link is up (or still connecting without a failed attempt).
        /// `retrying`: whether the sync goes on (the progress line, the warning) or is ending (the final outcome).
        ///
        /// With several aggregators, `nil` while any link is up; else each aggregator's reason, named.
        static func problem(_ links: [LinkState], options: SyncOptions, retrying: Bool = true) -> String? {
            guard !links.contains(where: \.isUp) else { return nil }
            let suffix = retrying ? "; retrying" : ""
            if links.count == 1 {
                return problem(links[0], options.aggregators[0]).map { "\($0)\(suffix)" }
            }
            let each = zip(links, options.aggregators).compactMap { link, aggregator in
                problem(link, aggregator).map { "\(aggregator.dataEndpoint): \($0)" }
            }
            guard !each.isEmpty else { return nil }
            return "no aggregator is reachable (\(each.joined(separator: "; ")))\(suffix)"
        }

        /// One aggregator's link problem in words, or `nil` when up or not known.
        static func problem(_ link: LinkState, _ aggregator: SyncOptions.Aggregator) -> String? {
            guard !link.isUp else { return nil }
            if let failure = link.failure { return failure }
            let endpoints = [aggregator.dataEndpoint, aggregator.ackEndpoint].enumerated()
                .filter { link.unreachable[$0.offset] }.map(\.element)
            guard !endpoints.isEmpty else { return nil }
            return "cannot reach \(endpoints.joined(separator: " and "))"
        }

        /// With several aggregators while some carry the sync: the others, named, with why when known
        /// (`tcp://10.0.0.2:5560 down: cannot reach …`); `nil` when all are up.
        static func down(_ links: [LinkState], ground: GroundSet, options: SyncOptions) -> String? {
            let each = options.aggregators.indices.compactMap { index -> String? in
                let name = options.aggregators[index].dataEndpoint
                if ground.refusing[index] { return "\(name) refused this device" }
                guard !links[index].isUp else { return nil }
                let reason = problem(links[index], options.aggregators[index])
                // Still connecting for the first time, with nothing failed yet: not worth a warning.
                if reason == nil, links[index].ups == 0 { return nil }
                return "\(name) down" + (reason.map { ": \($0)" } ?? "")
            }
            return each.isEmpty ? nil : each.joined(separator: ", ")
        }

        /// Hands every batch that is due to a data socket, without blocking: at the high-water mark the rest wait
        /// for the next turn. ``GroundSet`` chooses the aggregator: round robin for a new batch, the next one after
        /// the last for a resend.
        /// - Returns: Whether a data socket refused a batch for now (its high-water mark).
        mutating func send(window: inout SyncWindow, peers: [Peer], now t: Double) throws -> Bool {
            for id in window.batchesToSend(now: t) {
                guard let batch = window.batch(id: id) else { continue }
                var reason: GroundSet.Reason = batch.sends == 0 ? .new : .again
                if case .waiting(_, let deadline) = batch.state, deadline <= t { reason = .timedOut }
                guard let target = ground.choose(previous: batch.route, reason: reason, now: t) else { return false }
                let outgoing = OutgoingBatch(
                    device: configuration.device, records: batch.records.map { ($0.sequence, $0.payload) })
                do {
                    try peers[target].sockets.push.send(try outgoing.frames(), options: .dontWait)
                } catch let error as ZeroMQError where error.isTryAgain {
                    return true
                }
                if batch.sends > 0 {
                    statistics.resends += 1
                    let to = isSpread ? " to \(name(target))" : ""
                    logger.debug("resending \(outgoing.header.label)\(to) (send \(batch.sends + 1))")
                }
                statistics.batchesSent += 1
                statistics.recordsSent += batch.records.count
                perAggregator[target].batchesSent += 1
                perAggregator[target].recordsSent += batch.records.count
                window.sent(batchID: id, now: t, route: target)
            }
            return false
        }

        func sendHello(_ dealer: Socket) {
            guard let frame = try? WireCoding.encode(Hello(device: configuration.device)) else { return }
            // A full pipe means hellos are already waiting to go; another adds nothing.
            try? dealer.send(frame, options: .dontWait)
        }

        /// The flights to announce, at most ``announcedFlights``, in announcements of at most
        /// ``FlightAnnounce/maxFlights`` each; none when there is nothing to announce.
        static func announcements(device: String, flights: [String]) -> [FlightAnnounce] {
            let kept = Array(flights.sorted().prefix(announcedFlights))
            return stride(from: 0, to: kept.count, by: FlightAnnounce.maxFlights).map {
                FlightAnnounce(device: device, flights: Array(kept[$0..<min($0 + FlightAnnounce.maxFlights, kept.count)]))
            }
        }

        /// The most flights announced on one connection: four announcements, within the ground's five a second.
        static let announcedFlights = 4 * FlightAnnounce.maxFlights

        /// Sends the announcements on `dealer`, without blocking: the ground's answer is only logged, and a ground
        /// that predates announcements ignores them (docs/PROTOCOL.md, "Announce").
        func sendAnnouncements(_ dealer: Socket) {
            for announce in announcements {
                guard let frame = try? WireCoding.encode(announce) else { continue }
                try? dealer.send(frame, options: .dontWait)
            }
        }

        /// Logs the ground's answer to an announcement: nothing waits for it.
        func handleAnnounceAnswer(_ frame: Data, from index: Int, device: String) {
            let from = isSpread ? " from \(name(index))" : ""
            guard let answer = try? WireCoding.decode(AnnounceAnswer.self, from: frame), answer.device == device else {
                logger.warning("ignoring an announce answer\(from) that does not decode or is for another device")
                return
            }
            let reason = Ack.bounded(answer.reason ?? "no reason given", scalars: Ack.maxReasonScalars)
            switch answer.status {
            case .recorded:
                logger.debug("the ground\(from) recorded the announcement of \(answer.flights ?? 0) flights")
            case .retry:
                logger.debug("the ground\(from) could not record the announcement now: \(reason)")
            case .rejected, .forbidden, .unsupportedVersion:
                logger.warning("the ground\(from) refused the announcement (\(answer.status.rawValue)): \(reason)")
            }
        }

        /// Proof of delivery, once everything queued is acknowledged: recomputes the flights' summaries when records were
        /// acknowledged since, asks the ground about each flight not confirmed (``DeliveryConfirmer``), and gives up on
        /// those whose answers do not come within the wait (which pauses while a ground reached in this run is lost).
        mutating func confirm(queue: FileQueue, peers: [Peer], now t: Double, reachedEnd: inout Bool) throws {
            if holdingsStale || confirmer.isResending {
                holdings = try archive.holdings()
                confirmer.refresh(held: holdings.mapValues(\.summary))
                holdingsStale = false
                appendedSinceHoldings = []
            }
            let usable = peers.indices.filter { ground.isUsable($0) }
            let state: DeliveryConfirmer.Ground = !usable.isEmpty ? .usable : groundReached ? .lost : .unreached
            for ask in confirmer.due(now: t, ground: state) {
                let target = usable[nextAsk % usable.count]
                nextAsk += 1
                let summary = FlightSummary(device: configuration.device, flight: ask.flight, summary: ask.summary)
                guard let frame = try? WireCoding.encode(summary) else { continue }
                try? peers[target].sockets.dealer.send(frame, options: .dontWait)
                logger.debug(
                    "asked \(isSpread ? name(target) : "the ground") to confirm \(ask.flight): \(ask.summary.count) records, digest \(ask.summary.digestHex) (ask \(ask.asks))"
                )
            }
            if confirmer.isSettled { reachedEnd = true }
        }

        /// Logs the torn ends ``tails`` cut since the last call.
        mutating func logCutTails() {
            for torn in tails.takeCuts() {
                logger.warning(
                    "cut \(torn.bytes) bytes of a write a crash interrupted off the end of \(archive.file(for: torn.flight).path) (kept beside it as .torn-<seconds>); the queue is acknowledged only past records written whole there, so that write's records are not lost"
                )
            }
        }

        /// Applies the ground's answer to a summary: records a confirmation, or appends the flight's acknowledged
        /// records to the queue again after a `mismatch` (the ground's deduplication absorbs what it still has).
        mutating func handleSummaryAnswer(_ frame: Data, from index: Int, device: String, queue: FileQueue) throws {
            let from = isSpread ? " from \(name(index))" : ""
            guard let answer = try? WireCoding.decode(SummaryAnswer.self, from: frame) else {
                logger.warning("ignoring a summary answer\(from) that does not decode")
                return
            }
            guard answer.device == device else {
                logger.warning(
                    "ignoring a summary answer\(from) for device '\(Ack.bounded(answer.device, scalars: 80))'; this is '\(device)'")
                return
            }
            ground.answered(by: index)
            switch confirmer.apply(answer, now: now(), changedSinceAsked: appendedSinceHoldings.contains(answer.flight)) {
            case .none: break
            case .confirmed(let flight, let summary):
                // The file's size, when nothing was appended since the summary was computed from it (a torn end
                // cut off first: it must not become part of what the ground confirmed).
                defer { logCutTails() }
                let bytes =
                    holdingsStale
                    ? nil
                    : try archive.sizeToConfirm(flight: flight, wholeBytes: holdings[flight]?.wholeBytes, tails: &tails)
                try archive.confirm(flight: flight, summary: summary, bytes: bytes)
                statistics.confirmedFlights += 1
                logger.info("the ground confirmed \(flight)\(from): it holds all \(summary.count) records of this device")
            case .resend(let flight, let groundCount):
                // What the ground confirmed before, it no longer holds: `status` must not say confirmed.
                try archive.unconfirm(flight: flight)
                let payloads = holdings[flight]?.payloads ?? []
                logger.warning(
                    "the ground holds \(groundCount) of this device's \(payloads.count) acknowledged records of \(flight)\(from); sending the flight again"
                )
                var stream = RecordCoding.Stream()
                for payload in payloads {
                    if let record = try? stream.identity(payload) { resent[record.id] = payload }
                }
                if !payloads.isEmpty {
                    foundEndAt = -.infinity
                    do {
                        try queue.append(contentsOf: payloads)
                    } catch {
                        throw AgentError(syncQueue: error, home: configuration.home)
                    }
                }
                statistics.resentForProof += payloads.count
            case .askAgain(let flight, let groundCount):
                logger.info(
                    "the ground holds \(groundCount) records of \(flight)\(from), counting some acknowledged since it was asked; asking again"
                )
            case .gaveUp(let flight, let reason):
                logger.warning("\(flight) is not confirmed: \(reason)")
            }
        }

        /// Applies one message from aggregator `index`'s ack channel.
        /// - Returns: An error that ends the run, or `nil`.
        mutating func handle(
            _ frames: [Data], from index: Int, device: String, window: inout SyncWindow, queue: FileQueue
        ) throws -> AgentError? {
            let from = isSpread ? " from \(name(index))" : ""
            if frames.count == 1, AckChannelType.of(frames[0]) == SummaryAnswer.messageType {
                try handleSummaryAnswer(frames[0], from: index, device: device, queue: queue)
                return nil
            }
            if frames.count == 1, AckChannelType.of(frames[0]) == AnnounceAnswer.messageType {
                handleAnnounceAnswer(frames[0], from: index, device: device)
                return nil
            }
            // An ack is one frame (docs/PROTOCOL.md, Acks); a message of several is nobody's ack.
            guard frames.count == 1, let ack = try? WireCoding.decode(Ack.self, from: frames[0]) else {
                logger.warning(
                    "ignoring a message on the ack channel\(from) that is not an ack (\(frames.count) frames)")
                return nil
            }
            guard ack.device == device else {
                statistics.ignoredAcks += 1
                logger.warning(
                    "ignoring an ack\(from) for device '\(Ack.bounded(ack.device, scalars: 80))'; this is '\(device)'")
                return nil
            }
            let batchName = BatchHeader.label(device: device, first: ack.first, last: ack.last)
            let label = batchName + from
            // Numbers no ground can mean are checked before anything acts on the ack, also for answers that end the
            // sync or name no batch; what needs the batch's record count is checked by the window.
            if let problem = ack.boundsProblem(batchRecords: nil) {
                let named =
                    ack.first == 0 && ack.last == 0
                    || window.batches.contains { !$0.isDone && $0.first == ack.first && $0.last == ack.last }
                ignoreInvalid(ack, label: label, problem: problem, warn: named)
                return nil
            }
            ground.answered(by: index)
            if isSpread, ack.status == .forbidden || ack.status == .unsupportedVersion {
                // One aggregator refusing this device (its allow list, its protocol version) is that aggregator's
                // answer: the others go on, and only when every one has refused does the sync end, as with one.
                ground.refused(by: index)
                let moved = window.sendAgain(now: now()) { $0.route == index }
                logger.error(
                    "aggregator \(name(index)) refused this device (\(ack.status.rawValue)): \(ack.shownReason); \(ground.allRefusing ? "no aggregator is left" : "sending \(moved) batches to the others")"
                )
                guard ground.allRefusing else { return nil }
                return ack.status == .forbidden
                    ? AgentError(
                        .dataError,
                        "every aggregator refused this device (forbidden), the last \(name(index)): \(ack.shownReason); check \"device\" in the configuration and the allow list on the ground"
                    )
                    : AgentError(
                        .unavailable,
                        "no aggregator speaks protocol version \(WireProtocol.version) (the last: \(name(index))); upgrade the agent or the aggregators"
                    )
            }
            // The records of the batch this ack names, kept if it says `stored` (proof of delivery).
            let payloads =
                ack.status == .stored
                ? window.batches.first { !$0.isDone && $0.first == ack.first && $0.last == ack.last }?.records.map(\.payload)
                : nil
            // What the ack settles is made durable before the window moves past it: a batch's records into
            // `delivered/`, a refused record into `rejected/`. Should that write fail (a full disk), the window is left
            // as it was, so the queue is not acknowledged past records kept nowhere else on the device (before, the
            // window moved first, and the failure's exit acknowledged them: the flight could never be confirmed, and a
            // refused record was in neither the queue nor `rejected/`).
            var next = window
            let outcome = next.apply(ack, now: now(), from: index)
            switch outcome {
            case .stored:
                // Logged also when a later write of the append fails.
                defer { logCutTails() }
                appendedSinceHoldings.formUnion(try archive.append(payloads ?? [], tails: &tails, held: resent))
            case .setAside(let record, let reason):
                try SetAside.write(record, reason: reason, batch: batchName, device: device, home: configuration.home)
            default: break
            }
            window = next
            switch outcome {
            case .ignored where ack.first == 0 && ack.last == 0 && ack.status == .forbidden:
                // Batch 0…0 `forbidden`: the answer to a hello from a key the ground no longer allows, or to one
                // naming another device than the key's (a device configured with another device's id).
                return AgentError(
                    .dataError,
                    "the ground refused this device (forbidden): \(ack.shownReason); check the allow list on the ground"
                )
            case .ignored where ack.first == 0 && ack.last == 0:
                // Batch 0…0: the ground could not read a message of ours as a batch at all (docs/PROTOCOL.md).
                statistics.ignoredAcks += 1
                logger.warning(
                    "the ground could not read a message from this device as a batch (\(ack.status.rawValue)): \(ack.shownReason)"
                )
            case .ignored:
                statistics.ignoredAcks += 1
                if ack.status == .stored { perAggregator[index].lateAcks += 1 }
                logger.debug("ignoring a late \(ack.status.rawValue) ack for \(label)")
            case .stored(let records, let new, let duplicates):
                holdingsStale = true
                statistics.acknowledged += records
                perAggregator[index].acknowledged += records
                statistics.new += new
                statistics.duplicates += duplicates
                logger.debug("\(label) stored: \(new) new, \(duplicates) duplicates")
            case .setAside(let record, let reason):
                statistics.setAside += 1
                logger.warning(
                    "the ground rejected record \(record.sequence) of \(label): \(reason); set aside in \(SetAside.file(for: record.sequence, in: configuration.home).path), sending the rest again"
                )
            case .rebuild(let batchID, let sequences):
                logger.warning(
                    "the ground rejected \(label) as malformed (\(ack.shownReason)); reading it from the queue again"
                )
                if let first = sequences.first, let last = sequences.last {
                    let records = try queue.read(
                        from: first, maxRecords: Int(clamping: last - first + 1), maxBytes: Int(Int32.max))
                    window.replaceRecords(ofBatch: batchID, with: records, now: now())
                }
            case .limited(let at):
                statistics.limited += 1
                logger.warning(
                    "the ground limits this device (\(ack.shownReason)); \(label) again in \(Self.seconds(at - now())) s"
                )
            case .retryLater(let at):
                logger.info(
                    "the ground asked for \(label) later (\(ack.shownReason)); again in \(Self.seconds(at - now())) s")
            case .invalid(let problem):
                ignoreInvalid(ack, label: label, problem: problem, warn: true)
            case .fatal(let error):
                return error
            }
            return nil
        }

        /// Ignores an ack outside the bounds of docs/PROTOCOL.md ("Bounds of an ack") as if it had not come: counted
        /// among the ignored acks (none of its numbers is counted anywhere), warned about once per batch (a hostile
        /// ground answering every send must not flood the log), then at debug level.
        /// - Parameter warn: Whether the ack names a batch in flight (or 0…0); one naming none is logged at debug
        ///   level only, like a late ack, so that made-up names cannot buy a warning each.
        mutating func ignoreInvalid(_ ack: Ack, label: String, problem: String, warn: Bool) {
            statistics.ignoredAcks += 1
            if warnedInvalid.count >= 10_000 { warnedInvalid = [] }
            let message: Logger.Message =
                "ignoring an ack (\(ack.status.rawValue)) for \(label) outside the protocol's bounds: \(problem); the batch goes again on its timeout"
            if warn, warnedInvalid.insert(label).inserted {
                logger.warning(message)
            } else {
                logger.debug(message)
            }
        }

        /// A wait in whole seconds for a log line, rounded up; never traps, whatever the value.
        static func seconds(_ wait: Double) -> String {
            let rounded = wait.rounded(.up)
            return abs(rounded) < 1e15 ? String(Int(rounded)) : "\(rounded)"
        }

        /// Acknowledges the queue through the contiguous finished prefix; nothing the ground did not confirm.
        mutating func persist(_ window: SyncWindow, queue: FileQueue) throws {
            guard window.acknowledgedThrough > ackedInQueue else { return }
            try queue.acknowledge(through: window.acknowledgedThrough)
            ackedInQueue = window.acknowledgedThrough
        }

        func progress(_ window: SyncWindow, at t: Double) -> SyncProgress {
            let done = statistics.acknowledged + statistics.setAside + statistics.skipped
            return SyncProgress(
                acknowledged: done, total: max(total, done + window.recordsInFlight), inFlight: window.recordsInFlight,
                elapsed: t)
        }

        /// Takes the home's sync lock (``homeLock``), waiting up to 2 s: `status` takes a shared lock on the file
        /// for an instant to see who holds it, which must not make a sync starting at that instant give up.
        /// - Throws: ``AgentError``: `tryAgain` (75, "a busy lock": the systemd unit restarts after it, so the
        ///   device's service syncs again once a crew member's sync has ended) naming the running sync's pid when
        ///   another holds it.
        static func lock(_ home: AgentHome) throws(AgentError) -> FileLock {
            do {
                return try FileLock(path: home.syncLockFile.path, waitingUpTo: .seconds(2), recordingPID: true)
            } catch {
                switch error {
                case .busy(let holder):
                    throw AgentError(
                        .tryAgain,
                        "another sync\(holder.flatMap { $0 > 0 ? " (pid \($0))" : nil } ?? "") is running on the home \(home.url.path) (it holds \(home.syncLockFile.path)); `\(home.command("status"))` shows its progress and the verdict; stop it first, or run this one once it has ended"
                    )
                case .system(let failure):
                    throw AgentError(failure)
                }
            }
        }

        mutating func finish(_ ending: SyncOutcome.Ending, queue: FileQueue?) -> SyncOutcome {
            defer {
                homeLock?.release()
                homeLock = nil
            }
            statistics.elapsed = now()
            let status = try? queue?.status()
            var outcome = SyncOutcome(
                ending: ending, statistics: statistics,
                acknowledgedThrough: status?.acknowledgedThrough ?? ackedInQueue,
                remaining: status?.unacknowledged)
            if case .failed = ending, queue == nil { outcome.remaining = nil }
            outcome.problem = Self.problem(allLinks, options: options, retrying: false)
            outcome.aggregators = perAggregator
            outcome.statusCommand = configuration.home.command("status")
            outcome.untilDrained = options.untilDrained
            do {
                // Only the sync that holds the home changes what is kept there.
                let released = homeLock == nil ? [] : try archive.applyRetention(configuration.retention)
                if !released.isEmpty {
                    logger.info(
                        "retention released the confirmed records of \(released.joined(separator: ", ")) (retention.days \(configuration.retention.days), retention.maxBytes \(configuration.retention.maxBytes))"
                    )
                }
            } catch {
                logger.warning("retention could not release confirmed records: \(error)")
            }
            outcome.unconfirmed = confirmer.unconfirmed
            outcome.confirmedFlights = confirmer.confirmedFlights
            // Stopped or timed out with everything acknowledged, the run may not have asked about every flight (it
            // asks once everything is acknowledged), or asked before its last acks: for `--until-drained`'s exit
            // code, a flight whose acknowledged records are not what the ground last confirmed is not confirmed.
            if options.untilDrained, !outcome.isDrained, outcome.remaining == 0 {
                let confirmations = archive.confirmations()
                do {
                    for (flight, holding) in try archive.holdings()
                    where holding.summary.count > 0 && confirmations[flight]?.summary != holding.summary {
                        outcome.unconfirmed[flight] =
                            outcome.unconfirmed[flight] ?? "not confirmed yet when the sync ended"
                    }
                } catch {
                    // What this device holds cannot be read back: no flight of it counts as confirmed.
                    for flight in archive.flights()
                    where outcome.unconfirmed[flight] == nil && !outcome.confirmedFlights.contains(flight) {
                        outcome.unconfirmed[flight] = "not known to be confirmed: \(error.message)"
                    }
                }
            }
            // Read at the start, so readable; should it fail now, the start's count and this sync's are a floor.
            outcome.setAsideHeld =
                (try? SetAside.sequences(in: configuration.home).count) ?? setAsideAtStart.count + statistics.setAside
            writeState(SyncState(finished: outcome))
            return outcome
        }

        func writeState(result: String, acknowledgedThrough: UInt64? = nil) {
            // The last finished run's outcome, duration and rate stay until this run finishes.
            var state = (try? SyncState.load(from: configuration.home.syncStateFile)) ?? nil ?? SyncState()
            state.lastSyncAt = Date()
            state.lastResult = result
            state.acknowledgedThrough = acknowledgedThrough ?? ackedInQueue
            writeState(state)
        }

        func writeState(_ state: SyncState) {
            guard homeLock != nil else { return }
            try? Files.makeDirectory(configuration.home.url)
            do {
                try Files.writeAtomically(SyncState.encoder.encode(state), to: configuration.home.syncStateFile)
            } catch {
                logger.warning("cannot write \(configuration.home.syncStateFile.path): \(error)")
            }
        }
    }
}
