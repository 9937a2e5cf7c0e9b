internal import CZeroMQ
import Synchronization
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A libzmq context: owns the I/O threads and every socket created from it.
///
/// Contexts are thread-safe in libzmq, so this class is `Sendable`. Each `Socket` keeps its context alive, so the
/// context is terminated only after the last socket is closed; call `terminate()` to do it explicitly.
public final class ZeroMQContext: Sendable {
    // libzmq documents zmq_ctx_* as thread-safe; the pointer itself never changes.
    nonisolated(unsafe) let handle: UnsafeMutableRawPointer
    private let state = Mutex(State.running)

    private enum State { case running, shutDown, terminated }

    /// Creates a context.
    /// - Parameter ioThreads: How many libzmq I/O threads to run (libzmq's default is 1; CURVE encryption runs on
    ///   them, so more helps encrypted throughput with many connections).
    /// - Throws: `ZeroMQError` if libzmq cannot create the context or set the thread count.
    public init(ioThreads: Int = 1) throws(ZeroMQError) {
        guard let handle = zmq_ctx_new() else {
            throw ZeroMQError(code: .init(rawValue: zmq_errno()), operation: "create context")
        }
        self.handle = handle
        if ioThreads != 1 {
            do {
                try zmqCall("set context io threads \(ioThreads)") {
                    zmq_ctx_set(handle, ZMQ_IO_THREADS, Int32(clamping: ioThreads))
                }
            } catch {
                zmq_ctx_term(handle)
                throw error
            }
        }
    }

    /// Makes every blocking call on this context's sockets return `ETERM` (receive loops end), without waiting.
    ///
    /// Sockets must still be closed, then the context terminated. Safe to call from any thread, repeatedly.
    public func shutdown() {
        let shouldShutDown = state.withLock { state in
            guard state == .running else { return false }
            state = .shutDown
            return true
        }
        if shouldShutDown {
            _ = try? zmqCall("shut down context") { zmq_ctx_shutdown(handle) }
        }
    }

    /// Terminates the context, blocking until every socket is closed and has delivered or dropped its queue per
    /// its linger.
    ///
    /// Blocks the calling thread; from async code use the `async` overload, which waits on a dedicated thread.
    /// Idempotent.
    public func terminate() {
        let shouldTerminate = state.withLock { state in
            guard state != .terminated else { return false }
            state = .terminated
            return true
        }
        if shouldTerminate {
            _ = try? zmqCall("terminate context") { zmq_ctx_term(handle) }
        }
    }

    /// Terminates the context without blocking Swift's cooperative pool: waits on a dedicated thread.
    ///
    /// Returns once every socket is closed and has delivered or dropped its queue per its linger.
    public func terminate() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            startThread("zmq-terminate") { [self] in
                terminate()
                continuation.resume()
            }
        }
    }

    /// Creates a socket of the given type on this context.
    /// - Parameter type: The socket pattern.
    /// - Returns: A new socket, owned by the caller (see `Socket` for the threading rule).
    /// - Throws: `ZeroMQError`, e.g. `terminated` after shutdown or too many sockets.
    public func socket(_ type: SocketType) throws(ZeroMQError) -> Socket {
        // Under the lock so a concurrent terminate() either waits for this socket or is seen here: libzmq frees the
        // context when termination completes, so a later zmq_socket would touch freed memory.
        try state.withLock { (state) throws(ZeroMQError) -> Socket in
            guard state != .terminated else {
                throw ZeroMQError(code: .terminated, operation: "create \(type) socket")
            }
            return try Socket(context: self, type: type)
        }
    }

    deinit {
        let alreadyTerminated = state.withLock { $0 == .terminated }
        if !alreadyTerminated {
            // Every socket retains its context, so none is left open here and zmq_ctx_term returns promptly.
            _ = try? zmqCall("terminate context") { zmq_ctx_term(handle) }
        }
    }
}
