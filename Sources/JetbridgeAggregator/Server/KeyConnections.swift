import Foundation
import SystemSupport

/// The connections each device key holds on the data and ack sockets, so that one key's memory is bounded (issue 23
/// item 7): libzmq buffers up to `receiveHighWaterMark` batches per *connection*, so a key with 24 connections pinned
/// 24 times one connection's worth (about 1.2 GB of batches).
///
/// libzmq 4.3 tells no one which key a connection has: the ZAP handler sees the key and the peer's IP address, the
/// socket monitor sees a connection's file descriptor (`accepted`, `disconnected`), and a message carries both its
/// key (`X-Public-Key`) and its descriptor (`ZMQ_SRCFD`). So a connection counts against its key
/// - from its handshake, as *unconfirmed*: the ZAP handler admits a key while its connections (known and
///   unconfirmed) are fewer than ``perKey``, and refuses the handshake (`refused-busy`) otherwise;
/// - from its first message, as *known* by descriptor (replacing one unconfirmed handshake of the key), until the
///   monitor reports its descriptor closed.
/// An unconfirmed handshake that no message confirms (a connection that never sends, or whose messages wait in
/// libzmq while the store's queue is full) stops counting after ``unconfirmedLifetime``. A known connection past
/// ``perKey`` (one that slipped in as another expired) is shut down by the network thread.
///
/// So a key could still pile up connections that never send, 8 every 30 s, each a descriptor and libzmq's buffers,
/// until the process ran out of descriptors and refused every device. Every accepted TCP connection is therefore
/// *silent* (by descriptor and peer, from the monitor's `accepted`) until its first message. Once more connections
/// have been silent for ``silentAfter`` than the allowed devices can account for (``silentBudget(allowedKeys:)``: an
/// honest idle agent holds one, its data connection), the network thread shuts down the excess
/// (``shed(budget:now:)``): first from the peer address holding the most of them, newest first, so a key piling up
/// connections from one host loses its own before anyone else's. A connection that has not finished its handshake
/// is closed by libzmq before it is due (``AggregatorServer/detectDeadPeers(on:)`` sets the handshake interval to
/// 10 s), so connections without a key never count.
///
/// Thread-safe: the ZAP handler's thread asks ``admit(key:now:)``, the network thread calls
/// ``note(descriptor:key:isConnection:)`` and ``shed(budget:now:)``, the monitors' threads ``accepted(descriptor:now:)``
/// and ``closed(descriptor:)``.
final class KeyConnections: Sendable {
    /// Connections one key may hold on both sockets together: an agent holds two (data and acks), and a reconnecting
    /// one briefly holds its old pair too, until TCP keepalive finds it dead.
    static let perKey = 8
    /// How long a handshake counts before a message confirms it.
    static let unconfirmedLifetime: Duration = .seconds(30)
    /// How long a connection may send nothing before it can be shut down as silent (when there are too many).
    static let silentAfter: Duration = .seconds(30)
    /// Silent connections kept beyond two per allowed key, whatever the allow list holds.
    static let silentFloor = 64

    private struct State {
        var keyOf: [Int32: String] = [:]
        var known: [String: Set<Int32>] = [:]
        var unconfirmed: [String: [ContinuousClock.Instant]] = [:]
        /// Accepted connections that sent nothing yet, by descriptor: when each was accepted, and its peer.
        var silent: [Int32: (at: ContinuousClock.Instant, peer: Peer)] = [:]

        mutating func forget(_ descriptor: Int32) {
            silent[descriptor] = nil
            guard let key = keyOf.removeValue(forKey: descriptor) else { return }
            known[key]?.remove(descriptor)
            if known[key]?.isEmpty == true { known[key] = nil }
        }
    }

    private let state = Locked(State())
    let perKey: Int
    let unconfirmedLifetime: Duration
    let silentAfter: Duration
    let silentFloor: Int

    init(
        perKey: Int = KeyConnections.perKey, unconfirmedLifetime: Duration = KeyConnections.unconfirmedLifetime,
        silentAfter: Duration = KeyConnections.silentAfter, silentFloor: Int = KeyConnections.silentFloor
    ) {
        self.perKey = perKey
        self.unconfirmedLifetime = unconfirmedLifetime
        self.silentAfter = silentAfter
        self.silentFloor = silentFloor
    }

    /// Whether `key` may open another connection now; if so, its handshake counts as unconfirmed.
    func admit(key: String, now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { state in
            let lifetime = unconfirmedLifetime
            state.unconfirmed[key]?.removeAll { now - $0 >= lifetime }
            if state.unconfirmed[key]?.isEmpty == true { state.unconfirmed[key] = nil }
            let live = (state.known[key]?.count ?? 0) + (state.unconfirmed[key]?.count ?? 0)
            guard live < perKey else { return false }
            state.unconfirmed[key, default: []].append(now)
            return true
        }
    }

    /// A message from the connection on `descriptor`, admitted with `key`.
    /// - Parameter isConnection: Whether a descriptor is (still) one of the sockets' TCP connections
    ///   (``isConnection(_:localPorts:orLocal:)``); asked, under the lock, of a descriptor not yet counted for the key.
    /// - Returns: True when that connection is one more than the key may hold: shut it down.
    func note(descriptor: Int32, key: String, isConnection: (Int32) -> Bool) -> Bool {
        state.withLock { state in
            if state.keyOf[descriptor] == key { return false }
            state.silent[descriptor] = nil
            // A descriptor closed and reused by another connection before its close was seen.
            state.forget(descriptor)
            // A message read after its connection closed (libzmq's I/O thread closes it, then the monitor says so):
            // counted, the closed descriptor (or the file that took its number since, which no monitor reports
            // closed) held one of the key's connections, and a device reconnecting often could be refused as busy.
            // Checked under the lock `closed(descriptor:)` takes, so a close seen after this check is still forgotten.
            guard isConnection(descriptor) else { return false }
            state.keyOf[descriptor] = key
            state.known[key, default: []].insert(descriptor)
            if state.unconfirmed[key] != nil {
                state.unconfirmed[key]!.removeFirst()
                if state.unconfirmed[key]!.isEmpty { state.unconfirmed[key] = nil }
            }
            return state.known[key]!.count > perKey
        }
    }

    /// The connection on `descriptor` closed (the socket monitor's `disconnected`).
    func closed(descriptor: Int32) {
        state.withLock { $0.forget(descriptor) }
    }

    /// Where a TCP connection comes from.
    struct Peer: Hashable, Sendable {
        var host: String
        var port: UInt16
    }

    /// A connection was accepted on `descriptor` from `peer` (the socket monitor's `accepted`): silent until its
    /// first message. One whose message was seen first (the monitor's thread runs behind the network thread) is not
    /// silent, nor one that is not TCP (`peer` nil: an `ipc://` endpoint's).
    func accepted(descriptor: Int32, peer: Peer?, now: ContinuousClock.Instant = .now) {
        guard let peer else { return }
        state.withLock { state in
            guard state.keyOf[descriptor] == nil else { return }
            state.silent[descriptor] = (now, peer)
        }
    }

    /// Silent connections allowed before the oldest are shut down: two per allowed key (an agent's data connection
    /// is silent until its first batch, and a reconnecting agent's old one until TCP keepalive ends it) and
    /// ``silentFloor``.
    func silentBudget(allowedKeys: Int) -> Int { silentFloor + 2 * allowedKeys }

    /// The silent connections to shut down now: when more than `budget` connections have sent nothing for
    /// ``silentAfter`` or longer, that many more of them, first from the peer host holding the most, newest first.
    /// They are no longer silent here (their `disconnected` follows).
    func shed(budget: Int, now: ContinuousClock.Instant = .now) -> [(descriptor: Int32, peer: Peer)] {
        state.withLock { state in
            let due = state.silent.filter { now - $0.value.at >= silentAfter }
            let excess = due.count - budget
            guard excess > 0 else { return [] }
            let perHost = due.values.reduce(into: [String: Int]()) { $0[$1.peer.host, default: 0] += 1 }
            let order = due.sorted { a, b in
                let (hostA, hostB) = (perHost[a.value.peer.host]!, perHost[b.value.peer.host]!)
                if hostA != hostB { return hostA > hostB }
                return a.value.at != b.value.at ? a.value.at > b.value.at : a.key < b.key
            }
            let shed = order.prefix(excess).map { (descriptor: $0.key, peer: $0.value.peer) }
            for (descriptor, _) in shed { state.silent[descriptor] = nil }
            return shed
        }
    }

    /// How many connections are silent now (tests).
    var silentCount: Int { state.withLock { $0.silent.count } }

    /// The connections `key` holds now, known and unconfirmed (tests, `status`).
    func count(for key: String, now: ContinuousClock.Instant = .now) -> (known: Int, unconfirmed: Int) {
        state.withLock { state in
            (
                state.known[key]?.count ?? 0,
                state.unconfirmed[key]?.filter { now - $0 < unconfirmedLifetime }.count ?? 0
            )
        }
    }

    /// Shuts down the TCP connection on `descriptor` (libzmq then sees it end, closes it and drops its queue), after
    /// checking that the descriptor is still a TCP socket on one of `ports` (it may have been closed and reused since
    /// the message that named it was received).
    /// - Returns: Whether it was shut down.
    /// - Parameter peer: The peer the connection had when it was accepted: a descriptor reused by another
    ///   connection since is left alone.
    static func shutDown(descriptor: Int32, localPorts ports: Set<UInt16>, peer: Peer? = nil) -> Bool {
        guard isConnection(descriptor, localPorts: ports, orLocal: false) else { return false }
        if let peer, Self.peer(of: descriptor) != peer { return false }
        return shutdown(descriptor, Int32(SHUT_RDWR)) == 0
    }

    /// The peer of the TCP connection on `descriptor` (`getpeername`); nil for any other descriptor.
    static func peer(of descriptor: Int32) -> Peer? {
        guard case .inet(let host?, let port) = address(of: descriptor, getpeername) else { return nil }
        return Peer(host: host, port: port)
    }

    /// Whether `descriptor` is a TCP socket on one of `ports` (the data and ack sockets' connections), or with
    /// `orLocal` any Unix-domain socket (an `ipc://` endpoint's connections), not a closed descriptor or one a file or
    /// a TCP connection of another port took since.
    static func isConnection(_ descriptor: Int32, localPorts ports: Set<UInt16>, orLocal: Bool) -> Bool {
        switch address(of: descriptor, getsockname) {
        case .inet(_, let port): ports.contains(port)
        case .local: orLocal
        case nil: false
        }
    }

    /// One end of a socket, as `getsockname` or `getpeername` names it.
    private enum Address {
        /// IPv4 or IPv6: the address as text (nil when it cannot be written) and the port.
        case inet(host: String?, port: UInt16)
        /// A Unix-domain socket.
        case local
    }

    /// `name`'s answer for `descriptor`; nil for a closed descriptor or one of another kind (a file).
    private static func address(
        of descriptor: Int32, _ name: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) -> Address? {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { name(descriptor, $0, &length) }
        }
        guard named == 0 else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        func host(_ family: Int32, _ bytes: UnsafeRawPointer) -> String? {
            guard inet_ntop(family, bytes, &text, socklen_t(text.count)) != nil else { return nil }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        switch Int32(address.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet in
                    var bytes = inet.pointee.sin_addr
                    return .inet(host: host(AF_INET, &bytes), port: UInt16(bigEndian: inet.pointee.sin_port))
                }
            }
        case AF_INET6:
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet in
                    var bytes = inet.pointee.sin6_addr
                    return .inet(host: host(AF_INET6, &bytes), port: UInt16(bigEndian: inet.pointee.sin6_port))
                }
            }
        case AF_UNIX: return .local
        default: return nil
        }
    }
}
