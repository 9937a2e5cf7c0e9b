import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import SystemSupport

/// The HTTP endpoint of `serve --metrics HOST:PORT`: SwiftNIO's HTTP/1 server on one event-loop thread of its own
/// (the answers read the store, which blocks; nothing else runs there).
///
/// Bound in ``init(endpoint:limits:logger:)`` so a busy port fails at start with a clear error; answers 503 "starting"
/// until ``start(_:)`` gives it the responder. Its clients are held to ``HTTPLimits``: a capped number of
/// connections, each closed when slow or idle, with its pipelined requests and unsent answers bounded.
final class MetricsServer: Sendable {
    /// An answer: status, content type, body.
    struct Response: Sendable {
        var status: HTTPResponseStatus
        var contentType = "text/plain; charset=utf-8"
        var body: String
    }

    typealias Responder = @Sendable (_ method: HTTPMethod, _ path: String) -> Response

    /// The responder in a struct: a function stored as `Locked`'s generic value itself is wrapped in two more
    /// reabstraction thunks at every `inout` access, and every answer called through all of them: the stack grew by
    /// two frames per answer until, some 37,000 answers after start, the thread's stack overflowed (a crash).
    fileprivate struct Answering: Sendable {
        let respond: Responder
    }

    /// The address actually bound, `HOST:PORT` (a port 0 resolved).
    let endpoint: String
    /// Connections held at once: ``HTTPLimits/connectionCap(openFiles:)`` under the open-files limit at start.
    let connectionCap: Int
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let answering: Locked<Answering?>

    /// Binds `endpoint`.
    /// - Parameters:
    ///   - endpoint: `HOST:PORT`, e.g. `127.0.0.1:9560`, `0.0.0.0:9560`, `[::1]:9560`.
    ///   - limits: The bounds on clients (`serve` takes the defaults; tests make them small).
    ///   - logger: Where the connection cap biting is logged.
    /// - Throws: ``AggregatorError`` `.badConfiguration` for a malformed endpoint, `.unavailable` when it cannot be
    ///   bound (in use, no such address).
    init(endpoint: String, limits: HTTPLimits = HTTPLimits(), logger: Logger = Logger(label: "jetbridge-aggregator"))
        throws
    {
        let (host, port) = try Self.parse(endpoint)
        let answering = Locked<Answering?>(nil)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The cap leaves the devices' sockets, the store and the logs most of the process's file descriptors.
        let connections = HTTPConnections(
            cap: limits.connectionCap(openFiles: OpenFilesLimit.current), eventLoop: group.next(),
            what: "metrics endpoint", logger: logger)
        let decoderLimits = {
            var decoder = NIOHTTPDecoderLimitConfiguration()
            decoder.maxHeaderFieldSize = limits.maxRequestHeadBytes
            decoder.maxHeaderListSize = limits.maxRequestHeadBytes
            return decoder
        }()
        let output = limits.maxBufferedOutputBytes
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            // One read of a few kB per connection per turn: a client pipelining requests gets no more of the thread
            // per turn than the decoder makes of those bytes, and no more of them are decoded at once.
            .childChannelOption(.maxMessagesPerRead, value: 1)
            .childChannelOption(.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: HTTPLimits.readBytes))
            // Unsent answers: past `output` the channel is unwritable and HTTPHandler answers nothing more (so NIO's
            // pipelining handler reads nothing more) until the client has read; the kernel holds as much again.
            .childChannelOption(.writeBufferWaterMark, value: .init(low: output / 2, high: output))
            .childChannelOption(.socketOption(.so_sndbuf), value: output)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let connection = HTTPConnection(channel: channel, limits: limits)
                    connections.admit(connection)
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.configureHTTPServerPipeline(
                        withErrorHandling: true, withEncoderConfiguration: .init(),
                        withDecoderLimitConfiguration: decoderLimits)
                    try pipeline.addHandler(HTTPInputWatch(connection), position: .first)
                    let pipelining = try pipeline.handler(type: HTTPServerPipelineHandler.self)
                    try pipeline.addHandler(HTTPRequestWatch(connection), position: .before(pipelining))
                    try pipeline.addHandler(HTTPHandler(answering: answering))
                }
            }
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            // NIO's IOError describes the call (`bind(descriptor:ptr:bytes:)`); the operator needs the reason.
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            throw AggregatorError(.unavailable, "cannot bind the metrics endpoint \(endpoint): \(reason)")
        }
        let bound = channel.localAddress?.port ?? port
        self.endpoint = host.contains(":") ? "[\(host)]:\(bound)" : "\(host):\(bound)"
        self.group = group
        self.answering = answering
        self.connectionCap = connections.cap
    }

    /// Starts answering with `responder`.
    func start(_ responder: @escaping Responder) {
        answering.withLock { $0 = Answering(respond: responder) }
    }

    /// Closes the listening socket and stops the thread; blocks until done.
    func shutdown() {
        answering.withLock { $0 = nil }
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// Splits `HOST:PORT` (`[v6]:PORT` for IPv6).
    /// - Throws: ``AggregatorError`` `.badConfiguration` naming the value.
    static func parse(_ endpoint: String) throws -> (host: String, port: Int) {
        let bad = AggregatorError(
            .badConfiguration,
            "the metrics endpoint '\(endpoint)' is not HOST:PORT (e.g. 127.0.0.1:9560, 0.0.0.0:9560, [::1]:9560)")
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
            (0...65_535).contains(port)
        else { throw bad }
        var host = String(endpoint[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.contains(" ") else { throw bad }
        return (host, port)
    }
}

/// One connection's requests: answers each at its end, while the connection's unsent answers stay under
/// ``HTTPLimits/maxBufferedOutputBytes`` (a request that ends past it waits until the client has read, and NIO's
/// pipelining handler reads nothing more meanwhile); keep-alive as the client asks.
private final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answering: Locked<MetricsServer.Answering?>
    private var head: HTTPRequestHead?
    /// A whole request that waits for the output to drain.
    private var waiting: HTTPRequestHead?

    init(answering: Locked<MetricsServer.Answering?>) {
        self.answering = answering
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request):
            head = request
        case .body:
            break
        case .end:
            guard let request = head else { return }
            head = nil
            if context.channel.isWritable { answer(request, context: context) } else { waiting = request }
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let request = waiting {
            waiting = nil
            answer(request, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    private func answer(_ request: HTTPRequestHead, context: ChannelHandlerContext) {
        let path = String(request.uri.split(separator: "?", maxSplits: 1).first ?? "")
        let response =
            answering.withLock { $0 }?.respond(request.method, path)
            ?? MetricsServer.Response(status: .serviceUnavailable, body: "starting\n")
        let body = context.channel.allocator.buffer(string: response.body)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        let keepAlive = request.isKeepAlive
        headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
        let responseHead = HTTPResponseHead(version: request.version, status: response.status, headers: headers)
        context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
        if request.method != .HEAD {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            written.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
