import FileQueue
import Foundation
import JetbridgeProtocol
import Logging
import Synchronization
import SystemSupport
import ZeroMQ

/// The sync loop: owns the queue handle and both sockets, on one thread of its own, so no blocking ZeroMQ or file
/// call ever runs on Swift's cooperative pool.
///
/// One thread for both sockets rather than one each: the loop must look at acks, the window and the queue together,
/// and libzmq's poll waits on the ack socket while sends are non-blocking, so a second thread would only add
/// hand-offs. The only state shared with other threads is the stop request.
final class SyncEngine: Sendable {
    private let configuration: AgentConfiguration
    private let options: SyncOptions
    private let logger: Logger
    private let progress: (@Sendable (SyncProgress) -> Void)?
    private let stopRequested = Atomic<Bool>(false)
    /// What the sockets' monitors say about the link, read by the loop to pace sends and explain silence.
    private let link = Mutex<LinkState>(LinkState())

    init(
        configuration: AgentConfiguration, options: SyncOptions, logger: Logger,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) {
        self.configuration = configuration
        self.options = options
        self.logger = logger
        self.progress = progress
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
    }

    /// Runs the loop on a new thread and returns its outcome.
    func run() async -> SyncOutcome {
        await withCheckedContinuation { (continuation: CheckedContinuation<SyncOutcome, Never>) in
            startThread("jetbridge-sync") { [self] in
                continuation.resume(returning: runBlocking())
            }
        }
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
        /// The ack DEALER's routing id, the same for every socket of this run (the ground's route stays valid).
        let routingID = SyncEngine.newAckRoutingID()

        init(engine: SyncEngine) {
            self.engine = engine
            self.start = clock.now
        }

        var configuration: AgentConfiguration { engine.configuration }
        var options: SyncOptions { engine.options }
        var logger: Logger { engine.logger }

        func now() -> Double {
            (clock.now - start).seconds
        }

        mutating func run() -> SyncOutcome {
            let queue: FileQueue
            do {
                try configuration.home.prepare(queueDirectory: configuration.queueDirectory)
                queue = try FileQueue(directory: configuration.queueDirectory)
                let status = try queue.status()
                ackedInQueue = status.acknowledgedThrough
                initialLast = status.lastSequence ?? status.acknowledgedThrough
                total = status.unacknowledged
            } catch {
                return finish(.failed(AgentError(error)), queue: nil)
            }
            let context: ZeroMQContext
            do {
                context = try ZeroMQContext()
            } catch {
                return finish(.failed(AgentError(.failure, "cannot create a ZeroMQ context: \(error)")), queue: queue)
            }
            var sockets: Sockets
            do {
                sockets = try connect(context)
            } catch {
                return finish(.failed(error), queue: queue)
            }
            let ending = loop(queue: queue, context: context, sockets: &sockets)
            sockets.close(linger: options.closingLinger)
            context.terminate()
            return finish(ending, queue: queue)
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

        /// Creates and connects both sockets with every option set explicitly (docs/PROTOCOL.md, Sockets), each with
        /// a monitor that feeds ``LinkState``. Called again for a fresh connection after the ground ended a handshake
        /// for good (libzmq does not reconnect by itself after a refused key).
        func connect(_ context: ZeroMQContext) throws(AgentError) -> Sockets {
            let generation = engine.link.withLock { state in
                state.sockets += 1
                state.up = [false, false]
                state.unreachable = [false, false]
                state.needsFreshSockets = false
                return state.sockets
            }
            var endpoint = options.dataEndpoint
            do {
                let push = try context.socket(.push)
                try watch(push, channel: .data, sockets: generation)
                try configure(push)
                try push.set(.sendHighWaterMark, max(16, configuration.sync.window * 2))
                try push.connect(options.dataEndpoint)
                endpoint = options.ackEndpoint
                let dealer = try context.socket(.dealer)
                try watch(dealer, channel: .acks, sockets: generation)
                try dealer.set(.routingID, routingID)
                try configure(dealer)
                try dealer.set(.sendHighWaterMark, 64)
                try dealer.set(.receiveHighWaterMark, max(1000, configuration.sync.window * 4))
                try dealer.connect(options.ackEndpoint)
                return Sockets(push: push, dealer: dealer)
            } catch {
                let usage = error.code == .invalidArgument || error.code == .protocolNotSupported
                throw AgentError(
                    usage ? .usage : .failure,
                    "cannot connect to \(endpoint): \(error); check --to/--acks or ground.data/ground.acks")
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
        func watch(_ socket: Socket, channel: LinkState.Channel, sockets: Int) throws(ZeroMQError) {
            let engine = self.engine
            let device = configuration.device
            var allow = "jetbridge-aggregator devices allow \(device) KEY"
            if case .curve(let keys, _) = options.security {
                allow = DeviceKeys.allowCommand(device: device, publicKeyZ85: keys.publicKeyZ85)
            }
            let curve = if case .curve = options.security { true } else { false }
            let explain: @Sendable (HandshakeFailure) -> String = { [allow] failure in
                Self.explain(failure, allow: allow, curve: curve)
            }
            try socket.monitor(events: Self.linkEvents) { event in
                engine.link.withLock { $0.apply(event, channel: channel, sockets: sockets, explain: explain) }
            }
        }

        /// A handshake failure in words, with what to do about it.
        static func explain(_ failure: HandshakeFailure, allow: String, curve: Bool) -> String {
            switch failure {
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

        func configure(_ socket: Socket) throws(ZeroMQError) {
            try socket.set(.linger, options.linger)
            try socket.set(.immediate, false)
            try socket.set(.heartbeatInterval, .seconds(5))
            try socket.set(.heartbeatTimeout, .seconds(15))
            try socket.set(.reconnectInterval, .milliseconds(100))
            // A link that returns is found within 1.5 s at most: a connect attempt whose SYN was lost in a cut gives
            // up after a second rather than waiting for the kernel's SYN retries (up to two minutes).
            try socket.set(.reconnectIntervalMax, .milliseconds(500))
            try socket.set(.connectTimeout, .seconds(1))
            if case .curve(let keys, let serverKey) = options.security {
                try socket.makeCurveClient(keys: keys, serverPublicKey: serverKey)
            }
        }

        mutating func loop(queue: FileQueue, context: ZeroMQContext, sockets: inout Sockets) -> SyncOutcome.Ending {
            var window = SyncWindow(
                acknowledgedThrough: ackedInQueue, limits: SyncWindow.Limits(configuration.sync),
                setAside: SetAside.sequences(in: configuration.home).filter { $0 > ackedInQueue })
            let device = configuration.device
            var reachedEnd = false
            var stopping: (ending: SyncOutcome.Ending, deadline: Double)?
            var lastHello = -Double.infinity
            var lastProgress = -Double.infinity
            var lastState = -Double.infinity  // written at once, so `status` shows a sync running from its start
            var lastProblem: (text: String, at: Double)?
            /// Link-ups already acted on.
            var seenUps = 0
            /// When to open fresh sockets after the ground ended a handshake for good, and the next delay.
            var freshAt: Double?
            var freshDelay = Self.freshDelays.lowerBound
            var linkWasUp = false
            do {
                while true {
                    let t = now()
                    var link = engine.link.withLock { $0 }
                    if link.needsFreshSockets {
                        if freshAt == nil { freshAt = t + freshDelay }
                        if let at = freshAt, t >= at {
                            // A new handshake, so an allowance made on the ground meanwhile is picked up.
                            logger.debug("opening fresh connections to the ground after: \(link.failure ?? "-")")
                            sockets.close(linger: .zero)
                            sockets = try connect(context)
                            freshAt = nil
                            freshDelay = min(freshDelay * 2, Self.freshDelays.upperBound)
                            link = engine.link.withLock { $0 }
                        }
                    }
                    if link.isUp {
                        linkWasUp = true
                    } else if linkWasUp {
                        // The link went down: fresh sockets, so that nothing queued in the old data socket (batches
                        // sent while the loss was not yet known) is delivered after the link returns, on top of the
                        // one resend each waiting batch gets then.
                        linkWasUp = false
                        logger.debug("the link to the ground is down; opening fresh connections")
                        sockets.close(linger: .zero)
                        sockets = try connect(context)
                        link = engine.link.withLock { $0 }
                    }
                    if link.isUp, link.ups != seenUps {
                        freshDelay = Self.freshDelays.lowerBound
                        if seenUps > 0 {
                            // What was sent before the link went down is either stored (its ack lost) or lost:
                            // each such batch goes once more, now, rather than after a backed-off timeout.
                            let again = window.linkRestored(now: t)
                            logger.info("the link to the ground is back; sending \(again) unacknowledged batches once more")
                        } else if lastProblem != nil {
                            logger.info("connected to the ground")
                        }
                        seenUps = link.ups
                        lastProblem = nil
                        // Announce the ack route on every new connection, before any batch.
                        sendHello(sockets.dealer)
                        lastHello = t
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
                        while window.hasRoom {
                            let read = try queue.read(
                                from: window.nextSequence, maxRecords: configuration.sync.batchRecords,
                                maxBytes: configuration.sync.batchBytes)
                            guard !read.isEmpty else {
                                reachedEnd = true
                                break
                            }
                            reachedEnd = false
                            total += read.count { $0.sequence > initialLast }
                            let skipped = read.count { window.setAside.contains($0.sequence) }
                            statistics.skipped += skipped
                            window.add(
                                read: read.map { SyncWindow.Record(sequence: $0.sequence, payload: $0.payload) }, now: t
                            )
                        }
                        // While the link is down nothing is handed to the socket: it would only pile up there and
                        // arrive as duplicates once the link returns.
                        if link.isUp {
                            try send(window: &window, push: sockets.push, now: t)
                            if let since = window.oldestWaitingSince, t - since >= options.helloInterval,
                                t - lastHello >= options.helloInterval
                            {
                                sendHello(sockets.dealer)
                                lastHello = t
                            }
                        }
                    }
                    if stopping == nil, options.untilDrained, reachedEnd, window.isIdle {
                        try persist(window, queue: queue)
                        return .drained
                    }
                    if let stopping, window.isIdle || t >= stopping.deadline {
                        try persist(window, queue: queue)
                        return stopping.ending
                    }
                    let wait: Duration = window.isIdle ? .milliseconds(100) : .milliseconds(20)
                    if try !poll([PollItem(sockets.dealer, .readable)], timeout: wait)[0].isEmpty {
                        while let frames = try sockets.dealer.receiveMultipart(options: .dontWait) {
                            if let failure = try handle(frames, device: device, window: &window, queue: queue) {
                                try persist(window, queue: queue)
                                return .failed(failure)
                            }
                        }
                    }
                    try persist(window, queue: queue)
                    let after = now()
                    let problem = Self.problem(engine.link.withLock { $0 }, options: options)
                    if after - lastProgress >= 0.1 {
                        lastProgress = after
                        var progress = progress(window, at: after)
                        progress.problem = problem
                        engine.progress?(progress)
                    }
                    if let problem, problem != lastProblem?.text || after - lastProblem!.at >= 30 {
                        lastProblem = (problem, after)
                        logger.warning("\(problem)")
                    }
                    if after - lastState >= options.stateInterval {
                        lastState = after
                        writeState(result: "running: \(statistics.acknowledged) records acknowledged so far")
                    }
                }
            } catch let error as AgentError {
                try? persist(window, queue: queue)
                return .failed(error)
            } catch let error as FileQueueError {
                try? persist(window, queue: queue)
                return .failed(AgentError(queue: error))
            } catch {
                try? persist(window, queue: queue)
                return .failed(AgentError(.failure, "sync failed: \(error)"))
            }
        }

        /// Seconds before fresh sockets replace ones whose handshake the ground ended for good; doubled per attempt.
        static let freshDelays = 0.5...5.0

        /// Why nothing gets through, when the sockets know: a handshake failure in words, or endpoints where no
        /// connection could be made. `nil` while the link is up (or still connecting without a failed attempt).
        static func problem(_ link: LinkState, options: SyncOptions) -> String? {
            guard !link.isUp else { return nil }
            if let failure = link.failure { return "\(failure); retrying" }
            let endpoints = [options.dataEndpoint, options.ackEndpoint].enumerated()
                .filter { link.unreachable[$0.offset] }.map(\.element)
            guard !endpoints.isEmpty else { return nil }
            return "cannot reach \(endpoints.joined(separator: " and ")); retrying"
        }

        /// Hands every batch that is due to the data socket, without blocking: at the high-water mark the rest wait
        /// for the next turn.
        mutating func send(window: inout SyncWindow, push: Socket, now t: Double) throws {
            for id in window.batchesToSend(now: t) {
                guard let batch = window.batch(id: id) else { continue }
                let outgoing = OutgoingBatch(
                    device: configuration.device, records: batch.records.map { ($0.sequence, $0.payload) })
                do {
                    try push.send(try outgoing.frames(), options: .dontWait)
                } catch let error as ZeroMQError where error.isTryAgain {
                    return
                }
                if batch.sends > 0 {
                    statistics.resends += 1
                    logger.debug("resending \(outgoing.header.label) (send \(batch.sends + 1))")
                }
                statistics.batchesSent += 1
                statistics.recordsSent += batch.records.count
                window.sent(batchID: id, now: t)
            }
        }

        func sendHello(_ dealer: Socket) {
            guard let frame = try? WireCoding.encode(Hello(device: configuration.device)) else { return }
            // A full pipe means hellos are already waiting to go; another adds nothing.
            try? dealer.send(frame, options: .dontWait)
        }

        /// Applies one message from the ack channel.
        /// - Returns: An error that ends the run, or `nil`.
        mutating func handle(
            _ frames: [Data], device: String, window: inout SyncWindow, queue: FileQueue
        ) throws -> AgentError? {
            guard let frame = frames.last, let ack = try? WireCoding.decode(Ack.self, from: frame) else {
                logger.warning("ignoring a message on the ack channel that is not an ack (\(frames.count) frames)")
                return nil
            }
            guard ack.device == device else {
                statistics.ignoredAcks += 1
                logger.warning("ignoring an ack for device '\(ack.device)'; this is '\(device)'")
                return nil
            }
            let label = "\(device) #\(ack.first)…\(ack.last)"
            switch window.apply(ack, now: now()) {
            case .ignored where ack.first == 0 && ack.last == 0 && ack.status == .forbidden:
                // Batch 0…0 `forbidden`: the answer to a hello from a key the ground no longer allows.
                return AgentError(
                    .dataError,
                    "the ground refused this device (forbidden): \(ack.reason ?? "no reason given"); check the allow list on the ground"
                )
            case .ignored where ack.first == 0 && ack.last == 0:
                // Batch 0…0: the ground could not read a message of ours as a batch at all (docs/PROTOCOL.md).
                statistics.ignoredAcks += 1
                logger.warning(
                    "the ground could not read a message from this device as a batch (\(ack.status.rawValue)): \(ack.reason ?? "no reason given")"
                )
            case .ignored:
                statistics.ignoredAcks += 1
                logger.debug("ignoring a late \(ack.status.rawValue) ack for \(label)")
            case .stored(let records, let new, let duplicates):
                statistics.acknowledged += records
                statistics.new += new
                statistics.duplicates += duplicates
                logger.debug("\(label) stored: \(new) new, \(duplicates) duplicates")
            case .setAside(let record, let reason):
                try SetAside.write(record, reason: reason, batch: label, device: device, home: configuration.home)
                statistics.setAside += 1
                logger.warning(
                    "the ground rejected record \(record.sequence) of \(label): \(reason); set aside in \(SetAside.file(for: record.sequence, in: configuration.home).path), sending the rest again"
                )
            case .rebuild(let batchID, let sequences):
                logger.warning(
                    "the ground rejected \(label) as malformed (\(ack.reason ?? "no reason")); reading it from the queue again"
                )
                if let first = sequences.first, let last = sequences.last {
                    let records = try queue.read(
                        from: first, maxRecords: Int(clamping: last - first + 1), maxBytes: Int(Int32.max))
                    window.replaceRecords(
                        ofBatch: batchID,
                        with: records.map { SyncWindow.Record(sequence: $0.sequence, payload: $0.payload) }, now: now())
                }
            case .limited(let at):
                statistics.limited += 1
                logger.warning(
                    "the ground limits this device (\(ack.reason ?? "no reason given")); \(label) again in \(Int((at - now()).rounded(.up))) s"
                )
            case .retryLater(let at):
                logger.info(
                    "the ground asked for \(label) later (\(ack.reason ?? "no reason")); again in \(Int(at - now())) s")
            case .fatal(let error):
                return error
            }
            return nil
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

        mutating func finish(_ ending: SyncOutcome.Ending, queue: FileQueue?) -> SyncOutcome {
            statistics.elapsed = now()
            let status = try? queue?.status()
            var outcome = SyncOutcome(
                ending: ending, statistics: statistics,
                acknowledgedThrough: status?.acknowledgedThrough ?? ackedInQueue,
                remaining: status?.unacknowledged)
            if case .failed = ending, queue == nil { outcome.remaining = nil }
            outcome.problem = Self.problem(engine.link.withLock { $0 }, options: options)
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
            try? Files.makeDirectory(configuration.home.url)
            do {
                try Files.writeAtomically(SyncState.encoder.encode(state), to: configuration.home.syncStateFile)
            } catch {
                logger.warning("cannot write \(configuration.home.syncStateFile.path): \(error)")
            }
        }
    }
}
