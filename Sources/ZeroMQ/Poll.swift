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

/// One socket (or a ``WakeupPipe``) to poll and the conditions to wait for.
public struct PollItem: Sendable {
    enum Target: Sendable {
        case socket(Socket)
        case pipe(WakeupPipe)
    }

    let target: Target
    /// What to wait for.
    public var events: PollEvents

    /// Creates a poll item.
    /// - Parameters:
    ///   - socket: The socket; must belong to the polling thread (see `Socket`).
    ///   - events: What to wait for, e.g. `.readable`.
    public init(_ socket: Socket, _ events: PollEvents) {
        self.target = .socket(socket)
        self.events = events
    }

    /// Waits for `pipe` to be signalled (readable); the polling thread drains it (``WakeupPipe/drain()``).
    public init(_ pipe: WakeupPipe) {
        self.target = .pipe(pipe)
        self.events = .readable
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
        switch item.target {
        case .socket(let socket):
            let handle = try socket.liveHandle("poll")
            raw.append(zmq_pollitem_t(socket: handle, fd: 0, events: item.events.rawValue, revents: 0))
        case .pipe(let pipe):
            raw.append(zmq_pollitem_t(socket: nil, fd: pipe.readDescriptor, events: item.events.rawValue, revents: 0))
        }
    }
    let milliseconds = timeout.map { Int(max(0, $0.clampedMilliseconds)) } ?? -1
    try zmqCall("poll \(items.count) items") { zmq_poll(&raw, Int32(raw.count), milliseconds) }
    return raw.map { PollEvents(rawValue: $0.revents & ($0.events | Int16(ZMQ_POLLERR))) }
}
