internal import CZeroMQ
import Synchronization
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A socket owned by its own thread, for async code: received messages arrive as an `AsyncSequence`, sends are
/// awaited, and no blocking call ever runs on Swift's cooperative pool.
///
/// The thread polls the socket together with a wake-up pipe. It reads ahead at most `receiveBufferLimit` messages;
/// beyond that it stops reading, so libzmq's high-water marks push back on senders as usual. A send completes when
/// libzmq has queued the message (at the high-water mark it waits, without blocking any Swift thread).
///
/// Ends cleanly: `close(linger:)`, or `ZeroMQContext.shutdown()` (libzmq's `ETERM`), finishes `messages` with `nil`
/// and fails sends still waiting for the high-water mark. `Sendable`: any task may send; one task at a time should
/// iterate `messages`.
public final class AsyncSocket: Sendable {
    /// The socket's pattern.
    public let type: SocketType
    private let shared: Shared
    private var wakeup: WakeupPipe { shared.wakeup }

    /// What the socket's thread and the async callers share; a class because `Mutex` cannot be copied into the
    /// thread's closure.
    private final class Shared: Sendable {
        let state = Mutex(State())
        let wakeup: WakeupPipe
        let limit: Int

        init(limit: Int) throws(ZeroMQError) {
            self.wakeup = try WakeupPipe()
            self.limit = limit
        }
    }

    private struct PendingSend {
        let id: UInt64
        let frames: [Data]
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var buffer: [ReceivedMessage] = []
        var bufferHead = 0
        var receiver: CheckedContinuation<ReceivedMessage?, any Error>?
        /// Set once the thread has stopped: `nil` error means a clean end (close or `ETERM`).
        var ended = false
        var endError: (any Error)?
        var sends: [PendingSend] = []
        var nextSendID: UInt64 = 0
        var closeRequested = false
        var closeLinger: Duration?
        var closeWaiters: [CheckedContinuation<Void, Never>] = []

        var buffered: Int { buffer.count - bufferHead }

        mutating func popBuffered() -> ReceivedMessage? {
            guard bufferHead < buffer.count else { return nil }
            let message = buffer[bufferHead]
            bufferHead += 1
            if bufferHead == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                bufferHead = 0
            }
            return message
        }
    }

    /// Creates a socket, lets `configure` set options, bind and connect it on the calling thread, then moves it to
    /// its own thread.
    /// - Parameters:
    ///   - context: The context.
    ///   - type: The socket pattern.
    ///   - receiveBufferLimit: How many received messages to read ahead of the consumer.
    ///   - configure: Sets options, starts a monitor, binds or connects; must not keep the socket.
    /// - Throws: `ZeroMQError`, or what `configure` throws (the socket is then closed with zero linger).
    public init(
        context: ZeroMQContext,
        type: SocketType,
        receiveBufferLimit: Int = 64,
        configure: (Socket) throws -> Void
    ) throws {
        let socket = try context.socket(type)
        do {
            try configure(socket)
        } catch {
            try? socket.close(linger: .zero)
            throw error
        }
        self.type = type
        let shared: Shared
        do {
            shared = try Shared(limit: max(1, receiveBufferLimit))
        } catch {
            try? socket.close(linger: .zero)
            throw error
        }
        self.shared = shared
        startThread("zmq-\(type)") {
            AsyncSocket.run(socket, shared: shared)
        }
    }

    deinit {
        // Nobody can send or receive any more; let the thread close the socket with its configured linger.
        shared.state.withLock { $0.closeRequested = true }
        wakeup.signal()
    }

    /// The received multipart messages, in order; ends with `nil` after `close` or context shutdown.
    public var messages: Messages { Messages(socket: self) }

    /// Waits for the next received message.
    /// - Returns: The message, or `nil` once the socket is closed or its context shut down.
    /// - Throws: `ZeroMQError` if receiving failed, `CancellationError` if the task was cancelled.
    public func receive() async throws -> ReceivedMessage? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<ReceivedMessage?, any Error>) in
                let outcome: Result<ReceivedMessage?, any Error>?
                var wasFull = false
                outcome = shared.state.withLock { state in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    wasFull = state.buffered >= shared.limit
                    if let message = state.popBuffered() { return .success(message) }
                    if state.ended { return state.endError.map { .failure($0) } ?? .success(nil) }
                    precondition(state.receiver == nil, "AsyncSocket.messages must be iterated by one task at a time")
                    state.receiver = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
                // The thread stopped reading at the limit; now there is room again.
                if wasFull { wakeup.signal() }
            }
        } onCancel: {
            shared.state.withLock { state -> CheckedContinuation<ReceivedMessage?, any Error>? in
                let receiver = state.receiver
                state.receiver = nil
                return receiver
            }?.resume(throwing: CancellationError())
        }
    }

    /// Sends a multipart message, waiting (off the cooperative pool) while the high-water mark is reached.
    /// - Parameter frames: The frames, at least one.
    /// - Throws: `ZeroMQError` (`notSocket` after `close`, `terminated` after context shutdown), or
    ///   `CancellationError` if cancelled before libzmq accepted the message (it was then not sent).
    public func send(_ frames: [Data]) async throws {
        guard !frames.isEmpty else { throw ZeroMQError(code: .invalidArgument, operation: "send empty multipart") }
        let id = shared.state.withLock { state in
            state.nextSendID += 1
            return state.nextSendID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let failure: (any Error)? = shared.state.withLock { state in
                    if Task.isCancelled { return CancellationError() }
                    if state.ended || state.closeRequested {
                        return state.endError ?? ZeroMQError(code: .notSocket, operation: "send: socket closed")
                    }
                    state.sends.append(PendingSend(id: id, frames: frames, continuation: continuation))
                    return nil
                }
                if let failure { continuation.resume(throwing: failure) } else { wakeup.signal() }
            }
        } onCancel: {
            shared.state.withLock { state -> CheckedContinuation<Void, any Error>? in
                guard let index = state.sends.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sends.remove(at: index).continuation
            }?.resume(throwing: CancellationError())
        }
    }

    /// Closes the socket on its thread and waits for that; messages already accepted by `send` are then delivered
    /// for up to `linger` while the context terminates.
    /// - Parameter linger: How long queued messages may still be delivered: `.zero` drops them, `nil` keeps the
    ///   socket's `linger` option (libzmq's default is forever).
    public func close(linger: Duration? = nil) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyEnded = shared.state.withLock { state in
                if state.ended { return true }
                if !state.closeRequested {
                    state.closeRequested = true
                    state.closeLinger = linger
                }
                state.closeWaiters.append(continuation)
                return false
            }
            if alreadyEnded { continuation.resume() } else { wakeup.signal() }
        }
    }

    // MARK: The socket's thread

    private static func run(_ socket: Socket, shared: Shared) {
        let limit = shared.limit
        let wakeup = shared.wakeup
        var endError: (any Error)?
        var linger: Duration?
        loop: while let handle = socket.handle {
            let (wantRead, wantWrite, close) = shared.state.withLock { state in
                (state.buffered < limit, !state.sends.isEmpty, state.closeRequested)
            }
            if close { break }
            var items = [
                zmq_pollitem_t(
                    socket: handle, fd: 0,
                    events: Int16((wantRead ? ZMQ_POLLIN : 0) | (wantWrite ? ZMQ_POLLOUT : 0)), revents: 0),
                zmq_pollitem_t(socket: nil, fd: wakeup.readDescriptor, events: Int16(ZMQ_POLLIN), revents: 0),
            ]
            do {
                try zmqCall("poll \(socket.type) socket") { zmq_poll(&items, 2, -1) }
                if items[1].revents != 0 { wakeup.drain() }
                if items[0].revents & Int16(ZMQ_POLLIN) != 0 {
                    try receiveAvailable(socket, shared: shared)
                }
                if items[0].revents & Int16(ZMQ_POLLOUT) != 0 { try sendOne(socket, shared: shared) }
            } catch  where error.isTerminated {
                break loop
            } catch {
                endError = error
                break loop
            }
        }
        linger = shared.state.withLock { $0.closeLinger }
        try? socket.close(linger: linger)
        let (receiver, sends, closeWaiters, buffered) = shared.state.withLock { state in
            state.ended = true
            state.endError = endError
            let receiver = state.receiver
            state.receiver = nil
            let sends = state.sends
            state.sends = []
            let waiters = state.closeWaiters
            state.closeWaiters = []
            return (receiver, sends, waiters, state.buffered)
        }
        if let receiver {
            // A waiting receiver implies an empty buffer.
            assert(buffered == 0)
            if let endError { receiver.resume(throwing: endError) } else { receiver.resume(returning: nil) }
        }
        let sendError = endError ?? ZeroMQError(code: .notSocket, operation: "send: socket closed before queueing")
        for send in sends { send.continuation.resume(throwing: sendError) }
        for waiter in closeWaiters { waiter.resume() }
    }

    private static func receiveAvailable(_ socket: Socket, shared: Shared) throws(ZeroMQError) {
        let limit = shared.limit
        while shared.state.withLock({ $0.buffered < limit }) {
            guard let message = try socket.receiveWithMetadata(options: .dontWait) else { return }
            let receiver = shared.state.withLock { state -> CheckedContinuation<ReceivedMessage?, any Error>? in
                if let receiver = state.receiver {
                    state.receiver = nil
                    return receiver
                }
                state.buffer.append(message)
                return nil
            }
            receiver?.resume(returning: message)
        }
    }

    private static func sendOne(_ socket: Socket, shared: Shared) throws(ZeroMQError) {
        guard let pending = shared.state.withLock({ $0.sends.first }) else { return }
        do throws(ZeroMQError) {
            try socket.send(pending.frames, options: .dontWait)
        } catch {
            if error.isTryAgain { return }
            if error.isTerminated { throw error }
            // A failure of this message alone (e.g. hostUnreachable on a mandatory ROUTER): report it to its sender.
            let removed = shared.state.withLock { state in
                state.sends.firstIndex { $0.id == pending.id }.map { state.sends.remove(at: $0) }
            }
            removed?.continuation.resume(throwing: error)
            return
        }
        let removed = shared.state.withLock { state in
            state.sends.firstIndex { $0.id == pending.id }.map { state.sends.remove(at: $0) }
        }
        // A send cancelled after libzmq accepted it was already resumed by the cancellation handler.
        removed?.continuation.resume()
    }
}

extension AsyncSocket {
    /// The received messages of an `AsyncSocket` as an `AsyncSequence`; ends after close or context shutdown.
    public struct Messages: AsyncSequence, Sendable {
        /// Each element is one multipart message with its metadata.
        public typealias Element = ReceivedMessage
        /// Receiving fails with `ZeroMQError` or `CancellationError`.
        public typealias Failure = any Error

        let socket: AsyncSocket

        /// Creates the iterator.
        /// - Returns: An iterator that waits for each message.
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(socket: socket) }

        /// Waits for each message in turn.
        public struct AsyncIterator: AsyncIteratorProtocol {
            let socket: AsyncSocket

            /// Waits for the next message.
            /// - Returns: The message, or `nil` at the end.
            /// - Throws: `ZeroMQError` or `CancellationError`.
            public mutating func next() async throws -> ReceivedMessage? { try await socket.receive() }
        }
    }
}
