internal import CZeroMQ
import SystemSupport

/// Readiness conditions for `poll`.
public struct PollEvents: OptionSet, Sendable, Hashable {
    /// The raw `ZMQ_POLL*` bits.
    public let rawValue: Int16

    /// Wraps raw bits.
    /// - Parameter rawValue: The bits.
    public init(rawValue: Int16) { self.rawValue = rawValue }

    /// At least one message can be received without blocking.
    public static let readable = PollEvents(rawValue: Int16(ZMQ_POLLIN))
    /// At least one message can be sent without blocking.
    public static let writable = PollEvents(rawValue: Int16(ZMQ_POLLOUT))
}

/// One socket to poll and the conditions to wait for.
public struct PollItem: Sendable {
    /// The socket; must belong to the polling thread (see `Socket`).
    public var socket: Socket
    /// What to wait for.
    public var events: PollEvents

    /// Creates a poll item.
    /// - Parameters:
    ///   - socket: The socket.
    ///   - events: What to wait for, e.g. `.readable`.
    public init(_ socket: Socket, _ events: PollEvents) {
        self.socket = socket
        self.events = events
    }
}

/// Waits until at least one item is ready or the timeout passes (`zmq_poll`).
/// - Parameters:
///   - items: The sockets and conditions.
///   - timeout: The longest wait; `nil` waits forever, `.zero` only checks.
/// - Returns: For each item, in order, which of its conditions hold (empty: not ready).
/// - Throws: `ZeroMQError`; `isTerminated` after context shutdown, `notSocket` for a closed socket.
public func poll(_ items: [PollItem], timeout: Duration?) throws(ZeroMQError) -> [PollEvents] {
    var raw = [zmq_pollitem_t]()
    raw.reserveCapacity(items.count)
    for item in items {
        let handle = try item.socket.liveHandle("poll")
        raw.append(zmq_pollitem_t(socket: handle, fd: 0, events: item.events.rawValue, revents: 0))
    }
    let milliseconds = timeout.map { Int(max(0, $0.clampedMilliseconds)) } ?? -1
    try zmqCall("poll \(items.count) sockets") { zmq_poll(&raw, Int32(raw.count), milliseconds) }
    return raw.map { PollEvents(rawValue: $0.revents & ($0.events | Int16(ZMQ_POLLERR))) }
}
