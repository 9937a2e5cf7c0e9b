internal import CZeroMQ

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A failed libzmq call: the errno code, libzmq's text for it, and the operation that failed.
///
/// Every C call in this module goes through one helper that produces this error, so a failure always says what was
/// being done (`"bind tcp://127.0.0.1:5555"`) as well as why.
public struct ZeroMQError: Error, Sendable, Hashable, CustomStringConvertible {
    /// An errno value as libzmq reports it (POSIX codes plus libzmq's own, such as `ETERM`).
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        /// The raw errno value.
        public let rawValue: Int32

        /// Wraps a raw errno value.
        /// - Parameter rawValue: The errno value.
        public init(rawValue: Int32) { self.rawValue = rawValue }

        /// `EAGAIN`: the operation would block (non-blocking call, timeout, or high-water mark reached).
        public static let tryAgain = Code(rawValue: EAGAIN)
        /// `ETERM`: the context was shut down or terminated; close the socket and stop.
        public static let terminated = Code(rawValue: CZMQ_ETERM)
        /// `EINTR`: a signal interrupted the call (retried internally; never thrown by this module).
        public static let interrupted = Code(rawValue: EINTR)
        /// `EINVAL`: an invalid argument, endpoint or option value.
        public static let invalidArgument = Code(rawValue: EINVAL)
        /// `EHOSTUNREACH`: a ROUTER with `routerMandatory` has no peer with that routing id.
        public static let hostUnreachable = Code(rawValue: EHOSTUNREACH)
        /// `EADDRINUSE`: the endpoint is already bound.
        public static let addressInUse = Code(rawValue: EADDRINUSE)
        /// `ENOENT`: unbind/disconnect of an endpoint that is not bound or connected.
        public static let notFound = Code(rawValue: ENOENT)
        /// `ENOTSOCK`: the socket was already closed.
        public static let notSocket = Code(rawValue: ENOTSOCK)
        /// `EFSM`: the operation is not valid in the socket's current state (e.g. REP sending before receiving).
        public static let wrongState = Code(rawValue: CZMQ_EFSM)
        /// `EPROTONOSUPPORT`: the transport in the endpoint is not supported.
        public static let protocolNotSupported = Code(rawValue: EPROTONOSUPPORT)

        /// libzmq's description of the code (`zmq_strerror`).
        public var description: String { String(cString: zmq_strerror(rawValue)) }
    }

    /// What went wrong.
    public let code: Code
    /// libzmq's text for `code` (`zmq_strerror`).
    public let text: String
    /// The operation that failed, with its argument, e.g. `"connect tcp://127.0.0.1:5555"`.
    public let operation: String

    /// Creates an error for an operation.
    /// - Parameters:
    ///   - code: The errno value.
    ///   - operation: The operation that failed, with its argument.
    public init(code: Code, operation: String) {
        self.code = code
        self.text = code.description
        self.operation = operation
    }

    /// Whether this is the "try again" outcome (`EAGAIN`): nothing failed, the call would have blocked.
    public var isTryAgain: Bool { code == .tryAgain }

    /// Whether the context was shut down (`ETERM`); loops should close their socket and stop.
    public var isTerminated: Bool { code == .terminated }

    /// A one-line description: operation, text and errno.
    public var description: String { "\(operation): \(text) (errno \(code.rawValue))" }
}

/// The outcome of a C call that may legitimately would-block.
enum CallOutcome {
    case done(Int32)
    case tryAgain
}

/// Runs a libzmq call, retrying `EINTR`, and turns a `-1` return into `ZeroMQError` (EAGAIN included).
///
/// libzmq returns `EINTR` from blocking calls even when handlers are installed with `SA_RESTART`, so every call is
/// retried here rather than at each call site.
/// - Parameters:
///   - operation: Names the operation for the error message; evaluated only on failure.
///   - call: The C call; returns `-1` and sets `zmq_errno()` on failure.
/// - Returns: The call's non-negative result.
/// - Throws: `ZeroMQError` for every failure other than `EINTR`.
@discardableResult
func zmqCall(_ operation: @autoclosure () -> String, _ call: () -> Int32) throws(ZeroMQError) -> Int32 {
    switch try zmqCallAllowingTryAgain(operation(), call) {
    case .done(let result): return result
    case .tryAgain: throw ZeroMQError(code: .tryAgain, operation: operation())
    }
}

/// Like `zmqCall`, but reports `EAGAIN` as `.tryAgain` instead of throwing.
/// - Parameters:
///   - operation: Names the operation for the error message; evaluated only on failure.
///   - call: The C call; returns `-1` and sets `zmq_errno()` on failure.
/// - Returns: `.done(result)` or `.tryAgain`.
/// - Throws: `ZeroMQError` for every failure other than `EINTR` and `EAGAIN`.
func zmqCallAllowingTryAgain(
    _ operation: @autoclosure () -> String,
    _ call: () -> Int32
) throws(ZeroMQError) -> CallOutcome {
    while true {
        let result = call()
        if result >= 0 { return .done(result) }
        let code = zmq_errno()
        if code == EINTR { continue }
        if code == EAGAIN { return .tryAgain }
        throw ZeroMQError(code: ZeroMQError.Code(rawValue: code), operation: operation())
    }
}
