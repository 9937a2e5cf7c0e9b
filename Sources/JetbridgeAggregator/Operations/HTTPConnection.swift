import NIOCore
import NIOHTTP1

/// One HTTP connection's timers and pipelined requests (``HTTPLimits``), kept on its event loop by two handlers in
/// its pipeline: ``HTTPInputWatch`` sees the bytes as they arrive, ``HTTPRequestWatch`` the requests the decoder makes
/// of them and the answers going out.
///
/// One deadline at a time, one timer:
/// - a request under way (from the accept for the first; from the first byte after the last answer for later ones)
///   must be in by ``HTTPLimits/requestTimeout``;
/// - with requests read and answers waiting for the client to read, or with nothing begun after the last answer, the
///   connection is closed after ``HTTPLimits/idleTimeout`` without an answer written.
///
/// Not thread-safe: used on the connection's event loop only.
final class HTTPConnection {
    let channel: any Channel
    /// When the connection last made progress (its accept, or an answer written to the socket): the one that made
    /// none for longest makes room at the cap (``HTTPConnections``).
    private(set) var lastProgress = NIODeadline.now()
    private let limits: HTTPLimits
    /// Requests read and not yet answered.
    private var pending = 0
    /// Whether the next request has not begun: all answered, and no byte since.
    private var betweenRequests = false
    private var deadline: NIODeadline
    private var timer: (task: Scheduled<Void>, at: NIODeadline)?
    private(set) var isClosed = false

    /// Starts the clock on the first request. On the channel's event loop, before the channel is active.
    init(channel: any Channel, limits: HTTPLimits) {
        self.channel = channel
        self.limits = limits
        deadline = .now() + TimeAmount(limits.requestTimeout)
        arm()
        channel.closeFuture.assumeIsolated().whenComplete { [self] _ in closed() }
    }

    /// Bytes came in: a request begins if none was under way.
    func bytesArrived() {
        guard betweenRequests else { return }
        betweenRequests = false
        setDeadline(.now() + TimeAmount(limits.requestTimeout))
    }

    /// The decoder made a whole request of the bytes.
    /// - Returns: false when it is one too many waiting for answers: the connection is closed.
    func requestRead() -> Bool {
        pending += 1
        guard pending <= limits.maxPipelinedRequests else {
            close()
            return false
        }
        setDeadline(.now() + TimeAmount(limits.idleTimeout))
        return true
    }

    /// An answer goes out (handed to the channel; ``answerWritten()`` follows once the socket took it).
    func answered() {
        pending = max(0, pending - 1)
        if pending == 0 { betweenRequests = true }
        setDeadline(.now() + TimeAmount(limits.idleTimeout))
    }

    /// The socket took an answer: progress.
    func answerWritten() {
        lastProgress = .now()
        setDeadline(lastProgress + TimeAmount(limits.idleTimeout))
    }

    /// Closes the connection (the timer, the cap, too many pipelined requests).
    func close() {
        guard !isClosed else { return }
        closed()
        channel.close(promise: nil)
    }

    /// The channel closed, by either side: no timer any more.
    private func closed() {
        isClosed = true
        timer?.task.cancel()
        timer = nil
    }

    /// Moves the deadline; the timer is re-armed only when it must fire sooner (a later deadline is seen when it
    /// fires), so a busy connection costs no timer work per request.
    private func setDeadline(_ new: NIODeadline) {
        deadline = new
        if let timer, timer.at <= new { return }
        arm()
    }

    private func arm() {
        guard !isClosed else { return }
        timer?.task.cancel()
        let at = deadline
        let task = channel.eventLoop.assumeIsolated().scheduleTask(deadline: at) { [self] in
            timer = nil
            if NIODeadline.now() >= deadline { close() } else { arm() }
        }
        timer = (task, at)
    }
}

/// First in an HTTP connection's pipeline: tells its ``HTTPConnection`` when bytes arrive.
final class HTTPInputWatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let connection: HTTPConnection

    init(_ connection: HTTPConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.bytesArrived()
        context.fireChannelRead(data)
    }
}

/// Right after the HTTP decoder (before NIO's pipelining handler, which holds requests back while an answer is
/// pending): counts requests in and answers out for its ``HTTPConnection``, and drops what comes in once the
/// connection is closed.
final class HTTPRequestWatch: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    private let connection: HTTPConnection

    init(_ connection: HTTPConnection) {
        self.connection = connection
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The decoder goes on with the bytes it holds after a close; what it makes of them is dropped here.
        guard !connection.isClosed else { return }
        if case .end = unwrapInboundIn(data), !connection.requestRead() { return }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        connection.answered()
        let written = promise ?? context.eventLoop.makePromise()
        let connection = connection
        written.futureResult.assumeIsolated().whenSuccess { connection.answerWritten() }
        context.write(data, promise: written)
    }
}
