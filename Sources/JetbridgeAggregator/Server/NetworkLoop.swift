import Foundation
import JetbridgeModel
import JetbridgeProtocol
import Logging
import ZeroMQ
import SystemSupport

/// The sockets the network thread owns; handed to it once, used by it alone.
struct NetworkLoop: @unchecked Sendable {
    let pull: Socket
    let router: Socket
    /// Acks (two frames: device id, ack) and control messages (one frame) from the store thread.
    let acks: Socket
}

/// Where each device's acks go on the ack channel, and the acks waiting for a route. Owned by the network thread.
///
/// A route is the routing id of a connection that said hello **as that device**: in CURVE mode only a hello whose
/// `device` equals the connection's `User-Id` (the key's allow-listed device) sets it. Acks never go to a routing id
/// just because it equals a device id. A routing id is a secret the device chose (docs/PROTOCOL.md, Acks): the
/// ROUTER hands a routing id over to any connection that presents it (`ROUTER_HANDOVER`), so only a connection that
/// knows the secret, which is the device's own, can take its route over. The one exception is the route of an agent
/// older than that rule, whose routing id is its device id: still served, with a warning, because nothing better can
/// be done for it.
///
/// An ack without a usable route (no hello yet, the device reconnecting, its pipe full) is held rather than dropped,
/// and sent when the route works again: the first batches of a new connection are often committed before its hello
/// arrives, and a device whose link was cut reconnects with the same routing id. It is held long enough to outlast a
/// cut link and the device's reconnect (60 s), bounded per device and in all, and counted.
struct AckRoutes {
    /// An ack waiting for its device's route.
    struct Held {
        let payload: Data
        let since: ContinuousClock.Instant
    }

    /// How long an ack waits for a route: longer than a cut link usually lasts (the agent resends every batch
    /// still waiting once its link returns, so an ack that outlived this is only a duplicate saved).
    static let heldLifetime: Duration = .seconds(60)
    /// Bounds on held acks: beyond the first a device's oldest is dropped, beyond the second the new one.
    static let maxHeldPerDevice = 256
    static let maxHeld = 65_536
    /// Most routes kept: in CURVE mode the allow list bounds them, in insecure mode (any hello names any device) this
    /// does; a hello for a new device past it sets no route (its acks wait, then its device resends).
    static let maxRoutes = 100_000
    /// The shortest routing id taken as a secret (besides the old agents' device-id routing id).
    static let minimumSecretLength = 16

    /// The bounds in force: the ones above, smaller in tests.
    struct Bounds: Sendable {
        var maxHeldPerDevice = AckRoutes.maxHeldPerDevice
        var maxHeld = AckRoutes.maxHeld
        var maxRoutes = AckRoutes.maxRoutes
    }

    let bounds: Bounds
    init(bounds: Bounds = Bounds()) { self.bounds = bounds }

    private(set) var routes: [String: Data] = [:]
    private var devicesByRoute: [Data: String] = [:]
    /// The public key of the connection each route was learned from (CURVE mode).
    private(set) var routeKeys: [String: String] = [:]
    private(set) var held: [String: [Held]] = [:]
    private(set) var heldCount = 0
    /// Devices already warned about, so each is named once per run.
    var warnedLegacy: Set<String> = []
    /// When each key was last warned about a refused hello: a peer that repeats one must not flood the log.
    private var lastWarning: [String: ContinuousClock.Instant] = [:]
    static let warningInterval: Duration = .seconds(30)

    /// Whether to log a refused hello from `key` now (at most one per ``warningInterval`` and key).
    mutating func shouldWarn(
        about key: String, interval: Duration = warningInterval, now: ContinuousClock.Instant = .now
    ) -> Bool {
        if let last = lastWarning[key], now - last < interval { return false }
        if lastWarning.count >= 10_000 { lastWarning = [:] }
        lastWarning[key] = now
        return true
    }

    /// What kind of routing id a hello came with.
    enum Kind: Equatable {
        /// A secret the device chose: what the protocol asks for.
        case secret
        /// The device id itself, as agents before the secret routing ids did: served, but anyone allowed can take it.
        case legacy
        /// Neither (too short to be secret, or starting with a zero byte): refused in CURVE mode.
        case unusable
    }

    static func kind(of route: Data, device: String) -> Kind {
        if route == Data(device.utf8) { return .legacy }
        if route.count >= minimumSecretLength, route.first != 0 { return .secret }
        return .unusable
    }

    /// The route for `device`'s acks, if a hello set one.
    func route(for device: String) -> Data? { routes[device] }

    /// Sets `device`'s route, learned from a connection with public key `key` (CURVE mode). - Returns: Whether it
    /// changed.
    mutating func learn(device: String, route: Data, key: String? = nil) -> Bool {
        if routes[device] == nil, routes.count >= bounds.maxRoutes { return false }
        routeKeys[device] = key
        if routes[device] == route { return false }
        if let previous = routes[device] { devicesByRoute[previous] = nil }
        // A routing id names one connection: whoever had it before has lost it (insecure mode only: in CURVE mode
        // `forget(route:unlessHeldBy:)` has already dropped another key's claim).
        if let other = devicesByRoute[route] { routes[other] = nil }
        routes[device] = route
        devicesByRoute[route] = device
        return true
    }

    /// Drops the route `route` when a message on it shows that another key holds it now (an old agent's device-id
    /// routing id taken over by another device). - Returns: The device whose route was dropped.
    mutating func forget(route: Data, unlessHeldBy key: String) -> String? {
        guard let device = devicesByRoute[route], device != key else { return nil }
        devicesByRoute[route] = nil
        routes[device] = nil
        routeKeys[device] = nil
        return device
    }

    /// Queues an ack behind those already waiting for `device`. - Returns: How many old acks were dropped to make room.
    mutating func hold(_ payload: Data, for device: String, now: ContinuousClock.Instant) -> Int {
        var dropped = 0
        if held[device, default: []].count >= bounds.maxHeldPerDevice {
            held[device]!.removeFirst()
            heldCount -= 1
            dropped += 1
        }
        if heldCount >= bounds.maxHeld {
            return dropped + 1
        }
        held[device, default: []].append(Held(payload: payload, since: now))
        heldCount += 1
        return dropped
    }

    /// Whether acks wait for `device`.
    func isHolding(for device: String) -> Bool { held[device] != nil }

    /// The oldest ack waiting for `device`.
    func firstHeld(for device: String) -> Held? { held[device]?.first }

    /// Removes the oldest ack waiting for `device` (it was sent).
    mutating func removeFirstHeld(for device: String) {
        guard var acks = held[device], !acks.isEmpty else { return }
        acks.removeFirst()
        heldCount -= 1
        held[device] = acks.isEmpty ? nil : acks
    }

    /// Drops acks older than ``heldLifetime``. - Returns: How many.
    mutating func expire(now: ContinuousClock.Instant) -> Int {
        var dropped = 0
        for (device, acks) in held {
            let kept = acks.filter { now - $0.since < Self.heldLifetime }
            guard kept.count != acks.count else { continue }
            dropped += acks.count - kept.count
            held[device] = kept.isEmpty ? nil : kept
        }
        heldCount -= dropped
        return dropped
    }

    /// Drops every held ack (shutdown). - Returns: How many.
    mutating func dropAllHeld() -> Int {
        defer {
            held = [:]
            heldCount = 0
        }
        return heldCount
    }
}

/// One-frame control messages on the inproc socket from the store thread.
enum StoreSignal {
    /// The queue had been full and has room now.
    static let room = Data("room".utf8)
    /// The store thread has committed and acked its last batch and is gone.
    static let done = Data("done".utf8)
}

extension AggregatorServer {
    func runNetwork(_ sockets: NetworkLoop, allowlist: DeviceAllowlist) {
        var accepting = true
        var storeDone = false
        var allowlistStamp = Self.stamp(of: home.devicesFile)
        var lastAllowlistCheck = ContinuousClock.now
        var routes = AckRoutes(bounds: ackBounds)
        var lastHeldCheck = ContinuousClock.now
        var reportedHeld = 0
        /// Public key → device, as of the last allow-list load: checked on every message, so a revoked key gets
        /// nothing stored also on a connection admitted before the revocation.
        var admitted = allowlist.byPublicKey
        var limiter = DeviceLimiter(allowlist: allowlist)
        do {
            while !storeDone {
                if accepting && stopRequested {
                    // Stop taking new batches. What sits in the PULL queue is dropped unacked: the devices resend it.
                    accepting = false
                    try sockets.pull.close(linger: .zero)
                    queue.close()
                }
                let readPull = accepting && queue.hasRoom
                var items = [PollItem(sockets.acks, .readable), PollItem(sockets.router, .readable)]
                if readPull { items.append(PollItem(sockets.pull, .readable)) }
                let ready = try poll(items, timeout: .milliseconds(100))
                // Hellos first: a route that arrived with the acks it is needed for is used at once.
                if ready[1].contains(.readable) {
                    try readHellos(sockets.router, routes: &routes, admitted: admitted)
                }
                if ready[0].contains(.readable) { storeDone = try forwardAcks(sockets, routes: &routes) }
                if readPull && ready[2].contains(.readable) {
                    try readBatches(sockets, routes: &routes, admitted: admitted, limiter: &limiter)
                }

                let now = ContinuousClock.now
                if routes.heldCount > 0, now - lastHeldCheck >= .milliseconds(100) {
                    lastHeldCheck = now
                    retryHeld(&routes, router: sockets.router, now: now)
                }
                if routes.heldCount != reportedHeld {
                    reportedHeld = routes.heldCount
                    acksHeld.withLock { $0 = reportedHeld }
                }
                let reload = state.withLock { state in
                    defer { state.reloadRequested = false }
                    return state.reloadRequested
                }
                if reload || now - lastAllowlistCheck >= .seconds(1) {
                    lastAllowlistCheck = now
                    let stamp = Self.stamp(of: home.devicesFile)
                    if reload || stamp != allowlistStamp {
                        allowlistStamp = stamp
                        if let list = reloadAllowlist() {
                            admitted = list.byPublicKey
                            limiter.allowlist = list
                        }
                    }
                }
            }
        } catch {
            fail(AggregatorError(.other, "the network thread stopped: \(error)"))
            queue.close()
            // Keep draining the store thread's acks until it is done, so it never blocks on a full inproc pipe.
            while !storeDone {
                guard let frames = try? sockets.acks.receiveMultipart() else { break }
                storeDone = frames.count == 1 && frames[0] == StoreSignal.done
            }
        }
        if !sockets.pull.isClosed { try? sockets.pull.close(linger: .zero) }
        retryHeld(&routes, router: sockets.router, now: .now)
        let unsent = routes.dropAllHeld()
        if unsent > 0 {
            statistics.withLock { $0.unroutableAcks += unsent }
            logger.info("\(unsent) acks had no route at shutdown; their devices will resend")
        }
        // The last acks are queued in the ROUTER: linger gives them a second to leave.
        try? sockets.router.close(linger: Self.ackLinger)
        try? sockets.acks.close(linger: .zero)
    }

    /// Sends the acks the store thread passed back. Returns true once the store thread said it is done.
    private func forwardAcks(_ sockets: NetworkLoop, routes: inout AckRoutes) throws -> Bool {
        for _ in 0..<1_000 {
            guard let frames = try sockets.acks.receiveMultipart(options: .dontWait) else { return false }
            if frames.count == 1 {
                if frames[0] == StoreSignal.done { return true }
                continue  // `room`: the poll loop reads the data socket again
            }
            guard frames.count == 2 else { continue }
            sendAck(frames[1], to: String(decoding: frames[0], as: UTF8.self), routes: &routes, router: sockets.router)
        }
        return false
    }

    /// Sends one ack to `device`'s route, never to a routing id merely equal to its name. Without a route, or when
    /// the route fails (EHOSTUNREACH: the device is reconnecting; EAGAIN: it is not reading), the ack is held and
    /// sent later; one held too long is dropped (the device resends the batch, and the resend is a duplicate).
    func sendAck(_ payload: Data, to device: String, routes: inout AckRoutes, router: Socket) {
        let holding = routes.isHolding(for: device)
        if !holding, let route = routes.route(for: device), (try? router.send([route, payload], options: .dontWait)) != nil
        {
            return
        }
        let dropped = routes.hold(payload, for: device, now: .now)
        statistics.withLock { $0.acksHeld = routes.heldCount }
        if dropped > 0 {
            statistics.withLock { $0.unroutableAcks += dropped }
            logger.debug("acks dropped: too many waiting for a route", metadata: ["device": "\(device)"])
        }
        // Behind older acks: they go first, in order.
        if holding { flushHeld(for: device, routes: &routes, router: router) }
    }

    /// Sends the acks held for `device`, oldest first, until its route fails.
    private func flushHeld(for device: String, routes: inout AckRoutes, router: Socket) {
        guard let route = routes.route(for: device) else { return }
        while let ack = routes.firstHeld(for: device) {
            do {
                try router.send([route, ack.payload], options: .dontWait)
            } catch {
                return
            }
            routes.removeFirstHeld(for: device)
        }
    }

    /// Retries every held ack and drops those that waited too long.
    private func retryHeld(_ routes: inout AckRoutes, router: Socket, now: ContinuousClock.Instant) {
        for device in Array(routes.held.keys) { flushHeld(for: device, routes: &routes, router: router) }
        let expired = routes.expire(now: now)
        statistics.withLock { $0.acksHeld = routes.heldCount }
        if expired > 0 {
            statistics.withLock { $0.unroutableAcks += expired }
            logger.debug("\(expired) acks dropped after waiting for a route; their devices will resend")
        }
    }

    /// Reads hellos and learns routes from them (see ``AckRoutes``). In CURVE mode a hello counts only when its
    /// device is the connection's key, and any message on a route shows who holds it now.
    private func readHellos(_ router: Socket, routes: inout AckRoutes, admitted: [String: String]) throws {
        for _ in 0..<1_000 {
            guard let message = try router.receiveWithMetadata(options: .dontWait) else { return }
            guard let route = message.frames.first, !route.isEmpty else { continue }
            // In CURVE mode every connection has a User-Id from the ZAP handler; one without it matches no device.
            let key: String? = insecure ? nil : (message.userID ?? "")
            if let key, let lost = routes.forget(route: route, unlessHeldBy: key) {
                logger.warning(
                    "another key took over the ack route of \(lost) (an agent that uses its device id as routing id); its acks wait for its next hello",
                    metadata: ["device": "\(lost)", "key": "\(key)"])
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
                let ack = Ack(
                    device: key, first: 0, last: 0, status: .forbidden, reason: Self.revokedReason)
                if let payload = try? WireCoding.encode(ack) { try? router.send([route, payload], options: .dontWait) }
                if routes.shouldWarn(about: key) {
                    logger.warning("refused a hello: the connection's key is no longer allowed", metadata: ["device": "\(key)"])
                }
                continue
            }
            if let key {
                guard hello.device == key else {
                    guard routes.shouldWarn(about: key) else { continue }
                    logger.warning(
                        "ignored a hello for another device than the connection's key",
                        metadata: ["key": "\(key)", "device": "\(InertText.escape(hello.device))"])
                    continue
                }
                guard kind != .unusable else {
                    guard routes.shouldWarn(about: key) else { continue }
                    logger.warning(
                        "ignored a hello: its routing id is not a secret (it needs \(AckRoutes.minimumSecretLength) or more random bytes, not starting with 0; see docs/PROTOCOL.md)",
                        metadata: ["device": "\(hello.device)", "routingIDBytes": "\(route.count)"])
                    continue
                }
            }
            statistics.withLock { $0.hellos += 1 }
            if routes.learn(device: hello.device, route: route, key: message.publicKey) {
                logger.debug("ack route learned", metadata: ["device": "\(InertText.escape(hello.device))"])
            }
            if key != nil, kind == .legacy, routes.warnedLegacy.insert(hello.device).inserted {
                logger.warning(
                    "device \(hello.device) uses its device id as routing id (an agent before secret routing ids): another allowed device can take over its acks; upgrade its agent",
                    metadata: ["device": "\(hello.device)"])
            }
            flushHeld(for: hello.device, routes: &routes, router: router)
        }
    }

    /// Reads and checks batches while the queue has room.
    private func readBatches(
        _ sockets: NetworkLoop, routes: inout AckRoutes, admitted: [String: String], limiter: inout DeviceLimiter
    ) throws {
        for _ in 0..<64 {
            guard queue.hasRoom, let message = try sockets.pull.receiveWithMetadata(options: .dontWait) else { return }
            let size = message.frames.reduce(0) { $0 + $1.count }
            // In CURVE mode every connection has a User-Id from the ZAP handler; one without it matches no device.
            let authenticated: String? = insecure ? nil : (message.userID ?? "")
            if let authenticated, !authenticated.isEmpty, !Self.stillAllowed(message, admitted: admitted) {
                refuseRevoked(message, device: authenticated, routes: &routes, router: sockets.router)
                continue
            }
            switch IncomingBatch.decode(frames: message.frames, authenticatedDevice: authenticated) {
            case .success(let batch):
                let device = batch.header.device
                if let verdict = limiter.admit(
                    device: device, records: batch.records.map(\.record), now: .now,
                    count: { (try? store.recordCount(device: $0, flight: $1)) ?? 0 },
                    unstored: { (try? store.unstoredCount(of: $0)) ?? $0.count })
                {
                    answerLimited(batch.header, verdict, routes: &routes, router: sockets.router)
                    continue
                }
                queue.push(.batch(batch, bytes: size))
            case .failure(let rejection):
                refuse(rejection, authenticated: authenticated, routes: &routes, router: sockets.router)
            }
        }
    }

    /// Answers a refused batch at once (nothing of it is stored, so there is no commit to wait for) and counts it.
    private func refuse(
        _ rejection: BatchRejection, authenticated: String?, routes: inout AckRoutes, router: Socket
    ) {
        statistics.withLock { $0.rejectedBatches += 1 }
        let device = rejection.header?.device
        metrics.batch(
            device: authenticated.flatMap { $0.isEmpty ? nil : $0 } ?? device ?? "-",
            status: rejection.status.rawValue, rejected: rejection.header?.count ?? 0, reason: rejection.reason)
        logger.warning(
            "batch refused",
            metadata: [
                "device": "\(InertText.escape(device ?? "?"))", "key": "\(authenticated ?? "-")",
                "status": "\(rejection.status.rawValue)",
                "index": "\(rejection.index)", "reason": "\(rejection.reason)",
            ])
        // The ack goes back to the sender's route: its key's in CURVE mode (a forbidden header names someone else),
        // the header's device's on trust otherwise. A message that names no batch at all is answered too, as batch
        // 0…0 of the key's device (no queue sequence is 0), so its sender learns why (docs/PROTOCOL.md, Answers).
        if let owner = authenticated ?? device, !owner.isEmpty,
            let payload = try? WireCoding.encode(rejection.ack ?? Self.unnamedAnswer(rejection, device: owner))
        {
            sendAck(payload, to: owner, routes: &routes, router: router)
        }
        // Counted against the device that sent it: the key's device when known.
        if let owner = authenticated ?? device, !owner.isEmpty {
            queue.push(.rejection(device: owner, reason: rejection.description))
        }
    }

    /// Answers a batch past its device's limits `limited` (nothing stored), counts it and logs it (at most every 10 s
    /// per device, with how many since).
    private func answerLimited(
        _ header: BatchHeader, _ verdict: DeviceLimiter.Verdict, routes: inout AckRoutes, router: Socket
    ) {
        statistics.withLock { $0.limitedBatches += 1 }
        metrics.batch(device: header.device, status: Ack.Status.limited.rawValue)
        let ack = Ack(
            device: header.device, first: header.first, last: header.last, status: .limited, reason: verdict.reason,
            retryAfter: verdict.retryAfter)
        if let payload = try? WireCoding.encode(ack) { sendAck(payload, to: header.device, routes: &routes, router: router) }
        queue.push(.limited(device: header.device, reason: verdict.reason))
        if routes.shouldWarn(about: "limited " + header.device, interval: .seconds(10)) {
            logger.warning(
                "batch limited",
                metadata: [
                    "device": "\(header.device)", "batch": "#\(header.first)…\(header.last)",
                    "reason": "\(verdict.reason)", "retryAfter": "\(verdict.retryAfter)",
                ])
        }
    }

    static let revokedReason =
        "this device's key is no longer allowed on the ground (revoked after the connection was made); nothing is stored"

    /// Whether the key a message's connection was admitted with is still allowed, for the same device.
    static func stillAllowed(_ message: ReceivedMessage, admitted: [String: String]) -> Bool {
        guard let key = message.publicKey, let userID = message.userID else { return false }
        return admitted[key] == userID
    }

    /// Answers a batch from a revoked key `forbidden` and stores nothing of it. The answer goes to the device's route
    /// only if that route was learned from the same (revoked) key: a device re-allowed with a new key must not
    /// receive the stolen key's answers.
    private func refuseRevoked(_ message: ReceivedMessage, device: String, routes: inout AckRoutes, router: Socket) {
        statistics.withLock { $0.rejectedBatches += 1 }
        let header = IncomingBatch.name(of: message.frames)
        metrics.batch(
            device: device, status: Ack.Status.forbidden.rawValue, rejected: header?.count ?? 0,
            reason: Self.revokedReason)
        if routes.shouldWarn(about: "revoked " + device) {
            logger.warning(
                "batch refused: the connection's key is no longer allowed",
                metadata: ["device": "\(device)", "batch": "\(header.map { "#\($0.first)…\($0.last)" } ?? "?")"])
        }
        guard routes.routeKeys[device] == message.publicKey else { return }
        let ack = Ack(
            device: header?.device ?? device, first: header?.first ?? 0, last: header?.last ?? 0, status: .forbidden,
            reason: Self.revokedReason)
        if let payload = try? WireCoding.encode(ack) { sendAck(payload, to: device, routes: &routes, router: router) }
    }

    /// The answer to a message whose header could not be read: `rejected`, index −1, first = last = 0.
    static func unnamedAnswer(_ rejection: BatchRejection, device: String) -> Ack {
        Ack(device: device, first: 0, last: 0, status: rejection.status, index: -1, reason: rejection.reason)
    }

    /// Reloads the allow list into the ZAP handler (new connections) and returns it (for connections already made).
    private func reloadAllowlist() -> DeviceAllowlist? {
        guard let zap else { return nil }
        do {
            let list = try DeviceAllowlist.load(from: home.devicesFile)
            zap.replaceAllowlist(list.byPublicKey)
            statistics.withLock { $0.allowlistReloads += 1 }
            logger.info(
                "allow list reloaded; applies to new connections and to every message from now on",
                metadata: ["devices": "\(list.devices.count)", "file": "\(home.devicesFile.path)"])
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
