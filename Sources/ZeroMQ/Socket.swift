internal import CZeroMQ

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A ZeroMQ socket.
///
/// **Threading rule.** libzmq sockets are not thread-safe. A `Socket` must be used by one thread at a time, and
/// moving it to another thread needs a happens-before edge (starting a `Thread`, a lock, an actor hop, any Swift
/// concurrency hand-off provides one). It is `@unchecked Sendable` only so it can be handed over like that; never
/// call it from two threads concurrently. Sockets that block belong on their own thread: see `AsyncSocket`.
///
/// **Shutdown.** Call `close(linger:)` with the linger you want; then terminate the context, which waits for the
/// linger to deliver what is queued. A socket dropped without `close` is closed with its current `linger` option.
public final class Socket: @unchecked Sendable {
    /// The context the socket belongs to; retained so the context outlives its sockets.
    public let context: ZeroMQContext
    /// The socket's pattern.
    public let type: SocketType
    var handle: UnsafeMutableRawPointer?

    init(context: ZeroMQContext, type: SocketType) throws(ZeroMQError) {
        guard let handle = zmq_socket(context.handle, type.cValue) else {
            throw ZeroMQError(code: .init(rawValue: zmq_errno()), operation: "create \(type) socket")
        }
        self.context = context
        self.type = type
        self.handle = handle
    }

    deinit {
        if let handle { zmq_close(handle) }
    }

    /// The live C handle, or `ENOTSOCK` once closed.
    func liveHandle(_ operation: @autoclosure () -> String) throws(ZeroMQError) -> UnsafeMutableRawPointer {
        guard let handle else { throw ZeroMQError(code: .notSocket, operation: operation()) }
        return handle
    }

    /// Whether `close` has been called.
    public var isClosed: Bool { handle == nil }

    /// Binds to an endpoint so peers can connect.
    /// - Parameter endpoint: E.g. `"tcp://127.0.0.1:*"` (any free port; read it back from `lastEndpoint`),
    ///   `"ipc:///path"`, `"inproc://name"`.
    /// - Throws: `ZeroMQError`, e.g. `addressInUse`, `invalidArgument`.
    public func bind(_ endpoint: String) throws(ZeroMQError) {
        try endpointCall("bind", endpoint, zmq_bind)
    }

    /// Connects to an endpoint; the connection is made (and re-made) in the background.
    /// - Parameter endpoint: E.g. `"tcp://127.0.0.1:5555"`.
    /// - Throws: `ZeroMQError`, e.g. `invalidArgument` for a malformed endpoint.
    public func connect(_ endpoint: String) throws(ZeroMQError) {
        try endpointCall("connect", endpoint, zmq_connect)
    }

    /// Stops listening on a bound endpoint.
    /// - Parameter endpoint: The endpoint as bound, or as read back from `lastEndpoint` for wildcards.
    /// - Throws: `ZeroMQError`, `notFound` if not bound.
    public func unbind(_ endpoint: String) throws(ZeroMQError) {
        try endpointCall("unbind", endpoint, zmq_unbind)
    }

    /// Disconnects from a connected endpoint.
    /// - Parameter endpoint: The endpoint as connected.
    /// - Throws: `ZeroMQError`, `notFound` if not connected.
    public func disconnect(_ endpoint: String) throws(ZeroMQError) {
        try endpointCall("disconnect", endpoint, zmq_disconnect)
    }

    /// Runs one of libzmq's endpoint calls (`zmq_bind`, `zmq_connect`, …) on the live socket; a failure names the
    /// verb and the endpoint (`"bind tcp://127.0.0.1:5555"`).
    private func endpointCall(
        _ verb: String, _ endpoint: String, _ call: (UnsafeMutableRawPointer, UnsafePointer<CChar>) -> Int32
    ) throws(ZeroMQError) {
        let handle = try liveHandle("\(verb) \(endpoint)")
        try zmqCall("\(verb) \(endpoint)") { call(handle, endpoint) }
    }

    /// The endpoint most recently bound or connected, with wildcards resolved (`ZMQ_LAST_ENDPOINT`).
    public var lastEndpoint: String {
        get throws(ZeroMQError) { try getString(ZMQ_LAST_ENDPOINT, name: "last endpoint") }
    }

    /// Closes the socket. Messages already handed to it are delivered in the background for up to `linger`.
    ///
    /// Does not block; the context's `terminate()` is what waits for the linger. Closing twice is harmless.
    /// - Parameter linger: How long queued messages may still be delivered: `.zero` drops them, `nil` keeps the
    ///   socket's current `linger` option (libzmq's default is forever).
    /// - Throws: `ZeroMQError` if the linger cannot be set (the socket is closed regardless).
    public func close(linger: Duration? = nil) throws(ZeroMQError) {
        guard let handle else { return }
        defer {
            zmq_close(handle)
            self.handle = nil
        }
        if let linger { try set(.linger, linger) }
    }

    /// Subscribes a SUB socket to messages whose first frame starts with `prefix` (empty: everything).
    /// - Parameter prefix: The topic prefix.
    /// - Throws: `ZeroMQError`.
    public func subscribe(_ prefix: Data = Data()) throws(ZeroMQError) { try set(.subscribe, prefix) }

    /// Subscribes a SUB socket to messages whose first frame starts with the UTF-8 bytes of `prefix`.
    /// - Parameter prefix: The topic prefix.
    /// - Throws: `ZeroMQError`.
    public func subscribe(_ prefix: String) throws(ZeroMQError) { try set(.subscribe, Data(prefix.utf8)) }

    /// Removes a subscription made with the same prefix.
    /// - Parameter prefix: The topic prefix.
    /// - Throws: `ZeroMQError`.
    public func unsubscribe(_ prefix: Data) throws(ZeroMQError) { try set(.unsubscribe, prefix) }

    /// Removes a subscription made with the same UTF-8 prefix.
    /// - Parameter prefix: The topic prefix.
    /// - Throws: `ZeroMQError`.
    public func unsubscribe(_ prefix: String) throws(ZeroMQError) { try set(.unsubscribe, Data(prefix.utf8)) }
}
