import Foundation

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
        /// Tests that count held acks set it past their longest run: a loaded CI run once took 87 s.
        var heldLifetime = AckRoutes.heldLifetime
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
    private var warnings = WarningGate()
    static let warningInterval: Duration = .seconds(30)

    /// Whether to log a refused hello from `key` now (at most one per ``warningInterval`` and key).
    mutating func shouldWarn(
        about key: String, interval: Duration = warningInterval, now: ContinuousClock.Instant = .now
    ) -> Bool {
        warnings.shouldWarn(about: key, interval: interval, now: now)
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

    /// Drops acks older than the bounds' `heldLifetime` (``heldLifetime`` unless a test set another). - Returns: How many.
    mutating func expire(now: ContinuousClock.Instant) -> Int {
        var dropped = 0
        for (device, acks) in held {
            let kept = acks.filter { now - $0.since < bounds.heldLifetime }
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
