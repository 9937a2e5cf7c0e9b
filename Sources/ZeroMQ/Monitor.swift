internal import CZeroMQ
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Which socket events to monitor (`ZMQ_EVENT_*`).
public struct MonitorEvents: OptionSet, Sendable, Hashable {
    /// The raw `ZMQ_EVENT_*` bits.
    public let rawValue: Int32

    /// Wraps raw bits.
    /// - Parameter rawValue: The bits.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// A connection to a peer was made.
    public static let connected = MonitorEvents(rawValue: ZMQ_EVENT_CONNECTED)
    /// A connect attempt was deferred (will be retried).
    public static let connectDelayed = MonitorEvents(rawValue: ZMQ_EVENT_CONNECT_DELAYED)
    /// A reconnect attempt is scheduled.
    public static let connectRetried = MonitorEvents(rawValue: ZMQ_EVENT_CONNECT_RETRIED)
    /// The socket is listening on an endpoint.
    public static let listening = MonitorEvents(rawValue: ZMQ_EVENT_LISTENING)
    /// Binding failed.
    public static let bindFailed = MonitorEvents(rawValue: ZMQ_EVENT_BIND_FAILED)
    /// A peer connection was accepted.
    public static let accepted = MonitorEvents(rawValue: ZMQ_EVENT_ACCEPTED)
    /// Accepting a peer connection failed.
    public static let acceptFailed = MonitorEvents(rawValue: ZMQ_EVENT_ACCEPT_FAILED)
    /// A listening or connected descriptor was closed.
    public static let closed = MonitorEvents(rawValue: ZMQ_EVENT_CLOSED)
    /// Closing a descriptor failed.
    public static let closeFailed = MonitorEvents(rawValue: ZMQ_EVENT_CLOSE_FAILED)
    /// A peer connection was lost.
    public static let disconnected = MonitorEvents(rawValue: ZMQ_EVENT_DISCONNECTED)
    /// The ZMTP handshake (including CURVE and ZAP) completed.
    public static let handshakeSucceeded = MonitorEvents(rawValue: ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
    /// The ZMTP handshake failed, for any reason (no detail, protocol error, or authentication).
    public static let handshakeFailed = MonitorEvents(
        rawValue: ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
            | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
    /// Every event.
    public static let all = MonitorEvents(rawValue: ZMQ_EVENT_ALL)
}

/// Why a ZMTP handshake failed.
public enum HandshakeFailure: Sendable, Hashable {
    /// Failed without detail; carries the errno libzmq reported.
    case noDetail(ZeroMQError.Code)
    /// The peer broke the protocol: a `ZMQ_PROTOCOL_ERROR_*` code (e.g. a mechanism mismatch such as a plaintext
    /// client talking to a CURVE server, or a failed CURVE decryption).
    case protocolError(code: UInt32)
    /// The ZAP handler refused the peer; carries its status code (e.g. 400).
    case authentication(status: Int)
}

/// An event on a monitored socket.
public enum MonitorEvent: Sendable, Hashable {
    /// A connection to `endpoint` was made.
    case connected(endpoint: String)
    /// A connect attempt to `endpoint` was deferred.
    case connectDelayed(endpoint: String)
    /// A reconnect to `endpoint` is scheduled after `interval`.
    case connectRetried(endpoint: String, interval: Duration)
    /// Listening on `endpoint`.
    case listening(endpoint: String)
    /// Binding `endpoint` failed.
    case bindFailed(endpoint: String, error: ZeroMQError.Code)
    /// A peer connected to `endpoint` was accepted, on file `descriptor`.
    case accepted(endpoint: String, descriptor: Int32)
    /// Accepting on `endpoint` failed.
    case acceptFailed(endpoint: String, error: ZeroMQError.Code)
    /// A descriptor for `endpoint` was closed.
    case closed(endpoint: String)
    /// Closing a descriptor for `endpoint` failed.
    case closeFailed(endpoint: String, error: ZeroMQError.Code)
    /// The connection on `endpoint` with file `descriptor` was lost (peer gone, keepalive, or handshake failure); the
    /// descriptor is closed (and may be reused) right after.
    case disconnected(endpoint: String, descriptor: Int32)
    /// The handshake on `endpoint` succeeded (after CURVE and ZAP, if configured).
    case handshakeSucceeded(endpoint: String)
    /// The handshake on `endpoint` failed.
    case handshakeFailed(endpoint: String, reason: HandshakeFailure)
    /// An event this wrapper does not know, with its raw number and value.
    case other(event: Int32, value: UInt32, endpoint: String)
}

extension MonitorEvent {
    init(event: UInt16, value: UInt32, endpoint: String) {
        let code = ZeroMQError.Code(rawValue: Int32(bitPattern: value))
        switch Int32(event) {
        case ZMQ_EVENT_CONNECTED: self = .connected(endpoint: endpoint)
        case ZMQ_EVENT_CONNECT_DELAYED: self = .connectDelayed(endpoint: endpoint)
        case ZMQ_EVENT_CONNECT_RETRIED:
            self = .connectRetried(endpoint: endpoint, interval: .milliseconds(Int64(value)))
        case ZMQ_EVENT_LISTENING: self = .listening(endpoint: endpoint)
        case ZMQ_EVENT_BIND_FAILED: self = .bindFailed(endpoint: endpoint, error: code)
        case ZMQ_EVENT_ACCEPTED: self = .accepted(endpoint: endpoint, descriptor: Int32(bitPattern: value))
        case ZMQ_EVENT_ACCEPT_FAILED: self = .acceptFailed(endpoint: endpoint, error: code)
        case ZMQ_EVENT_CLOSED: self = .closed(endpoint: endpoint)
        case ZMQ_EVENT_CLOSE_FAILED: self = .closeFailed(endpoint: endpoint, error: code)
        case ZMQ_EVENT_DISCONNECTED: self = .disconnected(endpoint: endpoint, descriptor: Int32(bitPattern: value))
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: self = .handshakeSucceeded(endpoint: endpoint)
        case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            self = .handshakeFailed(endpoint: endpoint, reason: .noDetail(code))
        case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
            self = .handshakeFailed(endpoint: endpoint, reason: .protocolError(code: value))
        case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
            self = .handshakeFailed(endpoint: endpoint, reason: .authentication(status: Int(value)))
        default: self = .other(event: Int32(event), value: value, endpoint: endpoint)
        }
    }
}

extension Socket {
    /// Streams this socket's events (`zmq_socket_monitor`), read by a PAIR socket on a dedicated thread.
    ///
    /// Call it on the socket's owning thread, before `bind`/`connect`, so no event is missed. The stream ends when
    /// the socket is closed or the context shut down. Stopping iteration early is fine: the reader thread keeps
    /// draining events (so libzmq never blocks on them) until then. Up to 1,024 unread events are buffered; older
    /// ones are dropped.
    /// - Parameter events: Which events to report.
    /// - Returns: The events, in order.
    /// - Throws: `ZeroMQError` if the monitor cannot be started (e.g. the context is shut down).
    public func monitor(events: MonitorEvents = .all) throws(ZeroMQError) -> AsyncStream<MonitorEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: MonitorEvent.self, bufferingPolicy: .bufferingNewest(1024))
        try monitor(events: events, onEvent: { continuation.yield($0) }, onEnd: { continuation.finish() })
        return stream
    }

    /// Calls `onEvent` with this socket's events on the monitor's own thread, as they happen: for a caller that must
    /// see them even while Swift's cooperative pool is busy. Same rules as ``monitor(events:)``.
    /// - Parameters:
    ///   - events: Which events to report.
    ///   - onEvent: Called for each event, in order, on the reader thread; must not block.
    ///   - onEnd: Called once when the socket is closed or the context shut down.
    /// - Throws: `ZeroMQError` if the monitor cannot be started.
    public func monitor(
        events: MonitorEvents, onEvent: @escaping @Sendable (MonitorEvent) -> Void,
        onEnd: @escaping @Sendable () -> Void = {}
    ) throws(ZeroMQError) {
        let handle = try liveHandle("monitor")
        let endpoint = "inproc://zeromq.monitor.\(UUID().uuidString)"
        // The stop event tells the reader thread the monitored socket is gone, so it always asks for it.
        let mask = events.rawValue | ZMQ_EVENT_MONITOR_STOPPED
        try zmqCall("monitor \(endpoint)") { zmq_socket_monitor(handle, endpoint, mask) }
        let reader = try context.socket(.pair)
        do {
            try reader.connect(endpoint)
        } catch {
            _ = zmq_socket_monitor(handle, nil, 0)
            throw error
        }
        startThread("zmq-monitor") {
            Socket.readMonitorEvents(from: reader, onEvent: onEvent, onEnd: onEnd)
        }
    }

    private static func readMonitorEvents(
        from reader: Socket, onEvent: (MonitorEvent) -> Void, onEnd: () -> Void
    ) {
        defer {
            try? reader.close(linger: .zero)
            onEnd()
        }
        while true {
            guard let frames = try? reader.receiveMultipart(), frames.count == 2, frames[0].count == 6 else { return }
            let header = [UInt8](frames[0])
            let event = UInt16(header[0]) | UInt16(header[1]) << 8
            let value = UInt32(header[2]) | UInt32(header[3]) << 8 | UInt32(header[4]) << 16 | UInt32(header[5]) << 24
            if Int32(event) == ZMQ_EVENT_MONITOR_STOPPED { return }
            onEvent(MonitorEvent(event: event, value: value, endpoint: String(decoding: frames[1], as: UTF8.self)))
        }
    }
}
