import Foundation
import JetbridgeModel
import JetbridgeProtocol
import Logging
import ZeroMQ
import SystemSupport
import JetbridgeStore

/// The network thread: owns the data `PULL` and the ack `ROUTER`, and the state only it touches (the ack routes and
/// held acks, the admitted keys, the per-device rate limiter). It never calls the store: the flight limits are the
/// store's (``StoreLoop``), and what it learns from the allow list for them it publishes in ``storeLimits``.
///
/// It checks and decodes batches (`IncomingBatch.decode`), answers refused ones at once (``BatchRefusals``), queues
/// good ones in the bounded ``BatchQueue``, learns each device's ack route from its hellos and sends the answers the
/// store thread posts (``StoreMailbox``) to that route only (``AckRoutes``; an ack never goes to a routing id just
/// because it equals a device id). What it shares with the other threads is passed in: the queue, the mailbox, the
/// ledger. Built once and run once, on its own thread (``IngressService``; `@unchecked Sendable`: its sockets and
/// state are used by that thread alone, and the stop and reload requests are behind a lock).
final class NetworkLoop: @unchecked Sendable {
    struct Sockets {
        let pull: Socket
        let router: Socket
    }

    private let sockets: Sockets
    private let queue: BatchQueue
    private let mailbox: StoreMailbox
    /// The flight limits the store thread passes to `apply`, replaced when the allow list is reloaded.
    private let storeLimits: Locked<StoreLimits>
    /// The connections each key holds (CURVE mode): every message names its connection's descriptor.
    private let connections: KeyConnections
    /// The TCP ports of the data and ack sockets, which a connection to shut down must be on.
    private let localPorts: Set<UInt16>
    /// Whether a socket is bound to an `ipc://` endpoint, whose connections are Unix-domain sockets.
    private let localEndpoints: Bool
    private let refusals: BatchRefusals
    private let ledger: AnswerLedger
    private let devicesFile: URL
    private let zap: ZAPHandler?
    private let insecure: Bool
    private let logger: Logger
    /// Stop and reload requests from other threads.
    private let requests = Locked((stop: false, reload: false))

    private var routes: AckRoutes
    /// Public key → device, as of the last allow-list load: checked on every message, so a revoked key gets nothing
    /// stored also on a connection admitted before the revocation.
    private var admitted: [String: String]
    private var limiter: DeviceLimiter
    /// Summaries taken per device in the current second (``readSummary(_:route:key:)``): each costs the store a read
    /// of the device's rows of a flight, so a device (or a stolen key) cannot keep the store thread busy with them.
    private var summaryCounts: [String: (second: ContinuousClock.Instant, count: Int)] = [:]
    /// Summaries one device may have answered from the store per second; past it they are answered `retry`.
    static let summariesPerSecond = 20
    /// Announcements taken per device in the current second (``readAnnounce(_:route:key:)``): each is a store write.
    private var announceCounts: [String: (second: ContinuousClock.Instant, count: Int)] = [:]
    /// The most announcements a device may send in a second; an agent sends one per connection (a few more when it
    /// holds more than ``FlightAnnounce/maxFlights`` flights).
    static let announcesPerSecond = 5

    init(
        sockets: Sockets, allowlist: DeviceAllowlist, devicesFile: URL, zap: ZAPHandler?, insecure: Bool,
        ackBounds: AckRoutes.Bounds, queue: BatchQueue, mailbox: StoreMailbox, storeLimits: Locked<StoreLimits>,
        connections: KeyConnections, refusals: BatchRefusals, logger: Logger
    ) {
        self.connections = connections
        let endpoints = [sockets.pull, sockets.router].compactMap { try? $0.lastEndpoint }
        localPorts = Set(endpoints.compactMap { $0.split(separator: ":").last.flatMap { UInt16($0) } })
        localEndpoints = endpoints.contains { $0.hasPrefix("ipc://") }
        self.sockets = sockets
        self.devicesFile = devicesFile
        self.zap = zap
        self.insecure = insecure
        self.queue = queue
        self.mailbox = mailbox
        self.storeLimits = storeLimits
        self.refusals = refusals
        self.ledger = refusals.ledger
        self.logger = logger
        routes = AckRoutes(bounds: ackBounds)
        admitted = allowlist.byPublicKey
        limiter = DeviceLimiter(allowlist: allowlist)
    }

    /// Stops taking batches at the next turn (what sits unread in libzmq is dropped unacked: the devices resend it);
    /// the loop goes on sending the store thread's answers until it is done. Any thread, any number of times.
    func requestStop() { requests.withLock { $0.stop = true } }

    /// Reloads the allow list at the next turn (SIGHUP). Any thread.
    func requestReload() { requests.withLock { $0.reload = true } }

    /// Runs until the store thread is done after a stop.
    /// - Throws: A ZeroMQ failure of its sockets; the queue is closed first, so the store thread ends too.
    func run() throws {
        var accepting = true
        var storeDone = false
        var allowlistStamp = Self.stamp(of: devicesFile)
        var lastAllowlistCheck = ContinuousClock.now
        var lastHeldCheck = ContinuousClock.now
        var reportedHeld = 0
        do {
            while !storeDone {
                let (stop, reload) = requests.withLock { requests in
                    defer { requests.reload = false }
                    return requests
                }
                if accepting && stop {
                    accepting = false
                    try sockets.pull.close(linger: .zero)
                    queue.close()
                }
                let readPull = accepting && queue.hasRoom
                var items = [PollItem(mailbox.wakeup), PollItem(sockets.router, .readable)]
                if readPull { items.append(PollItem(sockets.pull, .readable)) }
                let ready = try poll(items, timeout: .milliseconds(100))
                // Hellos first: a route that arrived with the acks it is needed for is used at once.
                if ready[1].contains(.readable) { try readHellos() }
                if ready[0].contains(.readable) { storeDone = forwardAnswers() }
                if readPull && ready[2].contains(.readable) { try readBatches() }

                let now = ContinuousClock.now
                if routes.heldCount > 0, now - lastHeldCheck >= .milliseconds(100) {
                    lastHeldCheck = now
                    retryHeld(now: now)
                }
                if routes.heldCount != reportedHeld {
                    reportedHeld = routes.heldCount
                    ledger.acksHeld(reportedHeld)
                }
                if reload || now - lastAllowlistCheck >= .seconds(1) {
                    lastAllowlistCheck = now
                    if !insecure { shedSilentConnections(now: now) }
                    let stamp = Self.stamp(of: devicesFile)
                    if reload || stamp != allowlistStamp {
                        allowlistStamp = stamp
                        if let list = reloadAllowlist() {
                            admitted = list.byPublicKey
                            limiter.allowlist = list
                            storeLimits.withLock { $0 = list.storeLimits }
                            for device in list.devices.keys { ledger.metrics.declare(device: device, lastBatch: Date()) }
                        }
                    }
                }
            }
        } catch {
            // The store thread ends once the queue is closed and drained; its last answers go nowhere.
            queue.close()
            closeSockets()
            throw AggregatorError(.failure, "the network thread stopped: \(error)")
        }
        retryHeld(now: .now)
        let unsent = routes.dropAllHeld()
        ledger.acksHeld(routes.heldCount, dropped: unsent)
        if unsent > 0 { logger.info("\(unsent) acks had no route at shutdown; their devices will resend") }
        closeSockets()
    }

    /// Closes both sockets: the last acks are queued in the ROUTER, and its linger gives them a second to leave.
    private func closeSockets() {
        if !sockets.pull.isClosed { try? sockets.pull.close(linger: .zero) }
        try? sockets.router.close(linger: AggregatorServer.ackLinger)
    }

    /// Sends the answers the store thread posted. Returns true once the store thread said it is done.
    private func forwardAnswers() -> Bool {
        var done = false
        for message in mailbox.take() {
            switch message {
            case .ack(let ack, let owner): send(ack, to: owner)
            case .summary(let answer, let owner): send(answer, to: owner)
            case .announce(let answer, let owner): send(answer, to: owner)
            case .room: break  // the poll loop reads the data socket again
            case .done: done = true
            }
        }
        return done
    }

    /// Sends one ack to `device`'s route, never to a routing id merely equal to its name. Without a route, or when
    /// the route fails (EHOSTUNREACH: the device is reconnecting; EAGAIN: it is not reading), the ack is held and
    /// sent later; one held too long is dropped (the device resends the batch, and the resend is a duplicate).
    private func sendAck(_ payload: Data, to device: String) {
        let router = sockets.router
        let holding = routes.isHolding(for: device)
        if !holding, let route = routes.route(for: device), (try? router.send([route, payload], options: .dontWait)) != nil
        {
            return
        }
        let dropped = routes.hold(payload, for: device, now: .now)
        ledger.acksHeld(routes.heldCount, dropped: dropped)
        if dropped > 0 {
            logger.debug("acks dropped: too many waiting for a route", metadata: ["device": "\(device)"])
        }
        // Behind older acks: they go first, in order.
        if holding { flushHeld(for: device) }
    }

    /// Encodes `ack` (the one place an ack is encoded) and sends it to `device`'s route (``sendAck(_:to:)``).
    private func send(_ ack: Ack, to device: String) {
        if let payload = Self.encode(ack) { sendAck(payload, to: device) }
    }

    /// Encodes a summary's answer and sends it to `device`'s route, as an ack: behind that device's held acks.
    private func send(_ answer: SummaryAnswer, to device: String) {
        if let payload = try? WireCoding.encode(answer) { sendAck(payload, to: device) }
    }

    /// Encodes an announcement's answer and sends it to `device`'s route, as an ack.
    private func send(_ answer: AnnounceAnswer, to device: String) {
        if let payload = try? WireCoding.encode(answer) { sendAck(payload, to: device) }
    }

    /// An ack's wire bytes (docs/PROTOCOL.md, "Acks").
    static func encode(_ ack: Ack) -> Data? { try? WireCoding.encode(ack) }

    /// Sends the acks held for `device`, oldest first, until its route fails.
    private func flushHeld(for device: String) {
        guard let route = routes.route(for: device) else { return }
        while let ack = routes.firstHeld(for: device) {
            do {
                try sockets.router.send([route, ack.payload], options: .dontWait)
            } catch {
                return
            }
            routes.removeFirstHeld(for: device)
        }
    }

    /// Retries every held ack and drops those that waited too long.
    private func retryHeld(now: ContinuousClock.Instant) {
        for device in Array(routes.held.keys) { flushHeld(for: device) }
        let expired = routes.expire(now: now)
        ledger.acksHeld(routes.heldCount, dropped: expired)
        if expired > 0 {
            logger.debug("\(expired) acks dropped after waiting for a route; their devices will resend")
        }
    }

    /// Reads hellos and learns routes from them (see ``AckRoutes``). In CURVE mode a hello counts only when its
    /// device is the connection's key, and any message on a route shows who holds it now.
    private func readHellos() throws {
        let router = sockets.router
        for _ in 0..<1_000 {
            guard let message = try router.receiveWithMetadata(options: .dontWait) else { return }
            count(message)
            guard let route = message.frames.first, !route.isEmpty else { continue }
            // In CURVE mode every connection has a User-Id from the ZAP handler; one without it matches no device.
            let key: String? = insecure ? nil : (message.userID ?? "")
            if let key, let lost = routes.forget(route: route, unlessHeldBy: key) {
                logger.warning(
                    "another key took over the ack route of \(lost) (an agent that uses its device id as routing id); its acks wait for its next hello",
                    metadata: ["device": "\(lost)", "key": "\(key)"])
            }
            if message.frames.count >= 2 {
                switch AckChannelType.of(message.frames[1]) {
                case FlightSummary.messageType:
                    readSummary(message, route: route, key: key)
                    continue
                case FlightAnnounce.messageType:
                    readAnnounce(message, route: route, key: key)
                    continue
                default: break
                }
            }
            guard message.frames.count == 2, let hello = try? WireCoding.decode(Hello.self, from: message.frames[1]),
                hello.type == Hello.messageType
            else {
                logger.debug(
                    "ignored a message on the ack channel that is not a hello", metadata: ["key": "\(key ?? "-")"])
                continue
            }
            let kind = AckRoutes.kind(of: route, device: hello.device)
            if let key, !Self.stillAllowed(message, admitted: admitted) {
                // Revoked since the connection was admitted: no route, and the answer goes to this connection only.
                refuseHello(route: route, device: key, reason: Self.revokedReason)
                if routes.shouldWarn(about: key) {
                    logger.warning("refused a hello: the connection's key is no longer allowed", metadata: ["device": "\(key)"])
                }
                continue
            }
            if let key {
                guard hello.device == key else {
                    // No route for it. From a secret routing id, which only this connection holds, it is answered
                    // `forbidden` there, as for a revoked key: a device configured with another device's id learns why
                    // nothing it sends is stored, instead of waiting for answers addressed to the key's device. Not
                    // from a legacy one (a device id): another connection may take that id over between the receive
                    // and the send, and a hijacker could then end that device's sync with an answer naming it.
                    let answered = kind == .secret
                    if answered {
                        refuseHello(
                            route: route, device: Ack.bounded(hello.device, scalars: BatchRejection.maxEchoedDeviceScalars),
                            reason: Self.otherDeviceReason(key: key, hello: hello.device))
                    }
                    guard routes.shouldWarn(about: key) else { continue }
                    logger.warning(
                        "ignored a hello for another device than the connection's key\(answered ? "; answered forbidden" : "")",
                        metadata: ["key": "\(key)", "device": "\(InertText.escape(hello.device))"])
                    continue
                }
                guard kind != .unusable else {
                    guard routes.shouldWarn(about: key) else { continue }
                    logger.warning(
                        "ignored a hello: its routing id is not a secret (it needs \(AckRoutes.minimumSecretLength) or more random bytes, not starting with 0; see docs/PROTOCOL.md)",
                        metadata: ["device": "\(hello.device)", "routingIDBytes": .stringConvertible(route.count)])
                    continue
                }
            }
            ledger.hello()
            if routes.learn(device: hello.device, route: route, key: message.publicKey) {
                logger.debug("ack route learned", metadata: ["device": "\(InertText.escape(hello.device))"])
            }
            if key != nil, kind == .legacy, routes.warnedLegacy.insert(hello.device).inserted {
                logger.warning(
                    "device \(hello.device) uses its device id as routing id (an agent before secret routing ids): another allowed device can take over its acks; upgrade its agent",
                    metadata: ["device": "\(hello.device)"])
            }
            flushHeld(for: hello.device)
        }
    }

    /// Checks a summary and queues it for the store thread, or answers it at once when it is refused (docs/PROTOCOL.md,
    /// "Proof of delivery"). Every message whose `type` is `summary` gets an answer, sent like an ack to the route of
    /// the connection's device (in insecure mode, the device the summary names): a device can only ask about its own
    /// records, and only its own key receives what the ground holds of them.
    ///
    /// Checks, in order: the key is still allowed (else `forbidden`, to this connection only, as for a hello); the
    /// message is one frame; ``FlightSummary/decode(_:)``; the summary names the key's device (else `forbidden`); the
    /// queue has room (else `retry`).
    private func readSummary(_ message: ReceivedMessage, route: Data, key: String?) {
        if let key, !Self.stillAllowed(message, admitted: admitted) {
            let answer = SummaryAnswer(device: key, flight: "", status: .forbidden, reason: Self.revokedReason)
            ledger.summary(.forbidden) {
                if let payload = try? WireCoding.encode(answer) {
                    try? sockets.router.send([route, payload], options: .dontWait)
                }
            }
            return
        }
        let decoded: Result<FlightSummary, SummaryRejection> =
            message.frames.count == 2
            ? FlightSummary.decode(message.frames[1])
            : .failure(
                SummaryRejection(
                    device: nil, flight: nil, status: .rejected,
                    reason: "a summary is one frame; this message has \(message.frames.count - 1)"))
        let owner: String
        switch decoded {
        case .success(let summary):
            owner = key ?? summary.device
            if let key, summary.device != key {
                refuseSummary(
                    SummaryRejection(
                        device: summary.device, flight: summary.flight, status: .forbidden,
                        reason: "the summary names device '\(Validation.visible(summary.device.prefix(64)))' but the "
                            + "connection's key belongs to '\(key)'; a device may only ask about its own records"),
                    owner: key)
                return
            }
            guard queue.hasRoom else {
                refuseSummary(
                    SummaryRejection(
                        device: summary.device, flight: summary.flight, status: .retry,
                        reason: "the aggregator is busy; ask again later"),
                    owner: owner)
                return
            }
            let now = ContinuousClock.now
            var taken = summaryCounts[owner] ?? (now, 0)
            if now - taken.second >= .seconds(1) { taken = (now, 0) }
            guard taken.count < Self.summariesPerSecond else {
                refuseSummary(
                    SummaryRejection(
                        device: summary.device, flight: summary.flight, status: .retry,
                        reason: "more than \(Self.summariesPerSecond) summaries in a second from this device; ask again later"),
                    owner: owner)
                return
            }
            taken.count += 1
            if summaryCounts.count >= 100_000 { summaryCounts = [:] }
            summaryCounts[owner] = taken
            queue.push(.summary(summary, owner: owner))
        case .failure(let rejection):
            guard let known = key ?? rejection.device.flatMap({ (try? Validation.deviceID($0)) != nil ? $0 : nil })
            else {
                logger.debug("ignored a summary naming no device (insecure mode)", metadata: ["reason": "\(rejection.reason)"])
                return
            }
            refuseSummary(rejection, owner: known)
        }
    }

    /// Checks an announcement and queues it for the store thread, or answers it at once when it is refused
    /// (docs/PROTOCOL.md, "Announce"). Every message whose `type` is `announce` gets an answer, to the route of the
    /// connection's device (in insecure mode, the device it names): a device announces only for itself.
    ///
    /// Checks, in order: the key is still allowed (else `forbidden`, to this connection only); the message is one
    /// frame; ``FlightAnnounce/decode(_:)``; it names the key's device (else `forbidden`); the queue has room and the
    /// device sent fewer than ``announcesPerSecond`` in the last second (else `retry`).
    private func readAnnounce(_ message: ReceivedMessage, route: Data, key: String?) {
        if let key, !Self.stillAllowed(message, admitted: admitted) {
            let answer = AnnounceAnswer(device: key, status: .forbidden, reason: Self.revokedReason)
            ledger.announce(.forbidden) {
                if let payload = try? WireCoding.encode(answer) {
                    try? sockets.router.send([route, payload], options: .dontWait)
                }
            }
            return
        }
        let decoded: Result<FlightAnnounce, AnnounceRejection> =
            message.frames.count == 2
            ? FlightAnnounce.decode(message.frames[1])
            : .failure(
                AnnounceRejection(
                    device: nil, status: .rejected,
                    reason: "an announce is one frame; this message has \(message.frames.count - 1)"))
        switch decoded {
        case .success(let announce):
            let owner = key ?? announce.device
            if let key, announce.device != key {
                refuseAnnounce(
                    AnnounceRejection(
                        device: announce.device, status: .forbidden,
                        reason: "the announce names device '\(Validation.visible(announce.device.prefix(64)))' but the "
                            + "connection's key belongs to '\(key)'; a device may only announce its own flights"),
                    owner: key)
                return
            }
            let now = ContinuousClock.now
            var taken = announceCounts[owner] ?? (now, 0)
            if now - taken.second >= .seconds(1) { taken = (now, 0) }
            guard queue.hasRoom, taken.count < Self.announcesPerSecond else {
                refuseAnnounce(
                    AnnounceRejection(
                        device: announce.device, status: .retry,
                        reason: queue.hasRoom
                            ? "more than \(Self.announcesPerSecond) announces in a second from this device; announce again later"
                            : "the aggregator is busy; announce again later"),
                    owner: owner)
                return
            }
            taken.count += 1
            if announceCounts.count >= 100_000 { announceCounts = [:] }
            announceCounts[owner] = taken
            queue.push(.announce(announce, owner: owner))
        case .failure(let rejection):
            guard let known = key ?? rejection.device.flatMap({ (try? Validation.deviceID($0)) != nil ? $0 : nil })
            else {
                logger.debug("ignored an announce naming no device (insecure mode)", metadata: ["reason": "\(rejection.reason)"])
                return
            }
            refuseAnnounce(rejection, owner: known)
        }
    }

    /// Answers a refused announcement to `owner`'s route, logged at most every 30 s per device.
    private func refuseAnnounce(_ rejection: AnnounceRejection, owner: String) {
        let answer = rejection.answer(owner: owner)
        ledger.announce(answer.status) { send(answer, to: owner) }
        if answer.status != .retry, routes.shouldWarn(about: "announce " + owner) {
            logger.warning(
                "announce refused",
                metadata: [
                    "device": "\(owner)", "status": "\(answer.status.rawValue)",
                    "reason": "\(InertText.escape(rejection.reason))",
                ])
        }
    }

    /// Answers a refused summary to `owner`'s route, logged at most every 30 s per device.
    private func refuseSummary(_ rejection: SummaryRejection, owner: String) {
        let answer = rejection.answer(owner: owner)
        ledger.summary(answer.status) { send(answer, to: owner) }
        if answer.status != .retry, routes.shouldWarn(about: "summary " + owner) {
            logger.warning(
                "summary refused",
                metadata: [
                    "device": "\(owner)", "status": "\(answer.status.rawValue)",
                    "reason": "\(InertText.escape(rejection.reason))",
                ])
        }
    }

    /// Reads and checks batches while the queue has room.
    private func readBatches() throws {
        for _ in 0..<64 {
            guard queue.hasRoom, let message = try sockets.pull.receiveWithMetadata(options: .dontWait) else { return }
            count(message)
            let size = message.frames.reduce(0) { $0 + $1.count }
            // In CURVE mode every connection has a User-Id from the ZAP handler; one without it matches no device.
            let authenticated: String? = insecure ? nil : (message.userID ?? "")
            if let authenticated, !authenticated.isEmpty, !Self.stillAllowed(message, admitted: admitted) {
                refuseRevoked(message, device: authenticated)
                continue
            }
            switch IncomingBatch.decode(frames: message.frames, authenticatedDevice: authenticated) {
            case .success(let batch):
                // The rates only need the counts; the flight limits are checked by the store, in `apply`.
                if let verdict = limiter.admit(
                    device: batch.header.device, records: batch.records.count, bytes: size, now: .now)
                {
                    answerLimited(batch.header, verdict)
                    continue
                }
                queue.push(.batch(batch, bytes: size))
            case .failure(let rejection):
                // A warning per device at most every 10 s (the others at debug; every one is counted and answered):
                // one per batch let a key flooding refused batches fill the log, written under its lock.
                // In insecure mode the header's device is the sender's to choose: one key for all of them.
                let device = authenticated.map { $0.isEmpty ? "-" : $0 } ?? "insecure"
                refuse(
                    rejection, authenticated: authenticated,
                    log: routes.shouldWarn(about: "refused " + String(device.prefix(64)), interval: .seconds(10)))
            }
        }
    }

    /// Answers a refused batch at once (nothing of it is stored, so there is no commit to wait for) and has the store
    /// thread count it against the device that sent it: the key's device when known.
    /// - Parameters:
    ///   - warning: The log line's text, and `log` whether to write it (as in ``BatchRefusals``).
    ///   - answering: False to count the refusal without sending its answer (a revoked key's, on another key's route).
    private func refuse(
        _ rejection: BatchRejection, authenticated: String?, warning: Logger.Message = "batch refused",
        log: Bool = true, answering: Bool = true
    ) {
        let answer = refusals.refuse(
            rejection, key: authenticated, logKey: authenticated ?? "-", warning: warning, log: log
        ) { if answering { send($0.ack, to: $0.owner) } }
        if let answer { queue.push(.rejection(device: answer.owner, reason: answer.reason)) }
    }

    /// Answers a batch past its device's rates `limited` (nothing stored), counts it and logs it (at most every 10 s
    /// per device).
    private func answerLimited(_ header: BatchHeader, _ verdict: DeviceLimiter.Verdict) {
        let ack = Ack(
            device: header.device, first: header.first, last: header.last, status: .limited, reason: verdict.reason,
            retryAfter: verdict.retryAfter)
        ledger.answer(device: header.device, .limited) { send(ack, to: header.device) }
        queue.push(.limited(device: header.device, reason: verdict.reason))
        if routes.shouldWarn(about: "limited " + header.device, interval: .seconds(10)) {
            logger.warning(
                "batch limited",
                metadata: [
                    "device": "\(header.device)", "batch": "#\(header.first)…\(header.last)",
                    "reason": "\(verdict.reason)", "retryAfter": .stringConvertible(verdict.retryAfter),
                ])
        }
    }

    /// Counts `message`'s connection against its key (``KeyConnections``), and shuts the connection down when it is
    /// one more than the key may hold (what it already sent is still read; it may connect again once the key holds
    /// fewer).
    private func count(_ message: ReceivedMessage) {
        guard !insecure, let key = message.publicKey, let descriptor = message.sourceDescriptor,
            connections.note(
                descriptor: descriptor, key: key,
                isConnection: { [localPorts, localEndpoints] in
                    KeyConnections.isConnection($0, localPorts: localPorts, orLocal: localEndpoints)
                })
        else { return }
        let shut = KeyConnections.shutDown(descriptor: descriptor, localPorts: localPorts)
        if routes.shouldWarn(about: "connections " + key, interval: .seconds(30)) {
            logger.warning(
                "closed a connection: its key holds more connections than a key may",
                metadata: [
                    "device": "\(message.userID ?? "-")", "key": "\(key)", "limit": "\(connections.perKey)",
                    "closed": "\(shut)",
                ])
        }
    }

    /// Shuts down connections that never sent anything, once more are silent than the allowed keys account for
    /// (``KeyConnections/shed(budget:now:)``): a stolen key cannot fill the process's descriptors with connections it
    /// keeps open and silent. Warned about at most every 30 s.
    private func shedSilentConnections(now: ContinuousClock.Instant) {
        let budget = connections.silentBudget(allowedKeys: admitted.count)
        let silent = connections.shed(budget: budget, now: now)
        guard !silent.isEmpty else { return }
        let closed = silent.count {
            KeyConnections.shutDown(descriptor: $0.descriptor, localPorts: localPorts, peer: $0.peer)
        }
        if routes.shouldWarn(about: "silent connections", interval: .seconds(30)) {
            logger.warning(
                "closed connections that sent nothing: more are open than the allowed devices account for",
                metadata: [
                    "closed": "\(closed)", "budget": "\(budget)",
                    "silentFor": "\(connections.silentAfter.components.seconds) s or more",
                ])
        }
    }

    /// Answers a refused hello `forbidden` for batch 0…0 on its own connection (`route`), without waiting.
    private func refuseHello(route: Data, device: String, reason: String) {
        let ack = Ack(device: device, first: 0, last: 0, status: .forbidden, reason: reason)
        if let payload = Self.encode(ack) { try? sockets.router.send([route, payload], options: .dontWait) }
    }

    /// The reason a hello naming another device than its connection's key is refused.
    static func otherDeviceReason(key: String, hello device: String) -> String {
        "the hello names device '\(Validation.visible(device.prefix(64)))' but this connection's key belongs to "
            + "'\(key)': check \"device\" in the device's configuration and its key on the ground's allow list"
    }

    static let revokedReason =
        "this device's key is no longer allowed on the ground (revoked after the connection was made); nothing is stored"

    /// Whether the key a message's connection was admitted with is still allowed, for the same device.
    static func stillAllowed(_ message: ReceivedMessage, admitted: [String: String]) -> Bool {
        guard let key = message.publicKey, let userID = message.userID else { return false }
        return admitted[key] == userID
    }

    /// Refuses a batch from a revoked key `forbidden` like any other refusal: stored nowhere, counted against the
    /// key's device (`/metrics`, `status`, the devices report), logged at most every 30 s per device. The answer goes
    /// to the device's route only if that route was learned from the same (revoked) key: a device re-allowed with a
    /// new key must not receive the stolen key's answers.
    private func refuseRevoked(_ message: ReceivedMessage, device: String) {
        let rejection = BatchRejection(
            status: .forbidden, header: IncomingBatch.name(of: message.frames), index: -1, reason: Self.revokedReason)
        refuse(
            rejection, authenticated: device, warning: "batch refused: the connection's key is no longer allowed",
            log: routes.shouldWarn(about: "revoked " + device),
            answering: routes.routeKeys[device] == message.publicKey)
    }

    /// Reloads the allow list into the ZAP handler (new connections) and returns it (for connections already made,
    /// and the limits). In insecure mode there is no ZAP handler, but the file's limits still apply and are reloaded
    /// (before, they stayed what they were at start).
    private func reloadAllowlist() -> DeviceAllowlist? {
        do {
            let list = try DeviceAllowlist.load(from: devicesFile)
            zap?.replaceAllowlist(list.byPublicKey)
            ledger.allowlistReloaded()
            logger.info(
                "allow list reloaded; applies to new connections and to every message from now on",
                metadata: ["devices": .stringConvertible(list.devices.count), "file": "\(devicesFile.path)"])
            return list
        } catch {
            logger.error("allow list not reloaded; keeping the previous one", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// What changes when the allow list file is replaced: modification time, inode and size.
    static func stamp(of url: URL) -> [Int] {
        var info = stat()
        guard stat(url.path, &info) == 0 else { return [] }
        return [
            Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_ino), Int(info.st_size),
        ]
    }
}
