import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import SystemSupport

/// The HTTP endpoint of `serve --metrics HOST:PORT`, and of `serve --console HOST:PORT` (``ConsoleServer``):
/// SwiftNIO's HTTP/1 server on one event-loop thread of its own.
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
        /// More header fields (the console's Content-Security-Policy, Cache-Control).
        var headers: [(name: String, value: String)] = []
    }

    /// A request as the responders see it: its method, its path and its query's parameters (percent-decoded; the
    /// first of a repeated name wins), its header fields, its body (only where ``HTTPLimits/maxRequestBodyBytes``
    /// allows one: empty otherwise) and the client's address.
    struct Request: Sendable {
        var method: HTTPMethod
        var path: String
        /// The path and query as sent.
        var uri: String
        var query: [String: String]
        var headers: HTTPHeaders
        var body: [UInt8]
        /// The client's `IP:PORT`, for logs.
        var client: String
        /// Whether the client's connection is still open: a slow answer (the console's store reads, queued for its
        /// read threads) asks before it starts, so that one nobody waits for any more costs nothing.
        var isWanted: @Sendable () -> Bool = { true }

        init(method: HTTPMethod, uri: String, headers: HTTPHeaders = [:], body: [UInt8] = [], client: String = "-") {
            self.method = method
            self.uri = uri
            self.headers = headers
            self.body = body
            self.client = client
            let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
            path = String(parts.first ?? "")
            var query: [String: String] = [:]
            if parts.count > 1 {
                for pair in parts[1].split(separator: "&") {
                    let field = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                    func decode(_ text: Substring) -> String {
                        String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
                    }
                    let name = decode(field[0])
                    if query[name] == nil { query[name] = field.count > 1 ? decode(field[1]) : "" }
                }
            }
            self.query = query
        }
    }

    /// Answers at once, on the event loop: nothing it calls may block (the metrics answers read memory only).
    typealias Responder = @Sendable (_ method: HTTPMethod, _ path: String) -> Response

    /// Answers later: the future completes when the answer is ready (the console reads the store on a thread pool,
    /// never on the event loop, where SwiftNIO traps a blocking wait). Requests on one connection are answered in
    /// order (NIO's pipelining handler holds the next until the answer's end is written).
    typealias FutureResponder = @Sendable (_ request: Request, _ eventLoop: any EventLoop) -> EventLoopFuture<Response>

    /// The responder in a struct: a function stored as `Locked`'s generic value itself is wrapped in two more
    /// reabstraction thunks at every `inout` access, and every answer called through all of them: the stack grew by
    /// two frames per answer until, some 37,000 answers after start, the thread's stack overflowed (a crash).
    fileprivate struct Answering: Sendable {
        let respond: FutureResponder
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
    ///   - name: The endpoint in errors and logs (`metrics endpoint`, `console`).
    ///   - logger: Where the connection cap biting is logged.
    ///   - finishing: Applied to every answer this endpoint writes, its own too (503 `starting`, 413, 500): the
    ///     console's security headers.
    /// - Throws: ``AggregatorError`` `.dataError` for a malformed endpoint, `.unavailable` when it cannot be
    ///   bound (in use, no such address).
    init(
        endpoint: String, limits: HTTPLimits = HTTPLimits(), name: String = "metrics endpoint",
        logger: Logger = Logger(label: "jetbridge-aggregator"),
        finishing: @escaping @Sendable (Response) -> Response = { $0 }
    ) throws {
        let (host, port) = try Self.parse(endpoint, what: "the \(name)")
        let answering = Locked<Answering?>(nil)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        // The cap leaves the devices' sockets, the store and the logs most of the process's file descriptors.
        let connections = HTTPConnections(
            cap: limits.connectionCap(openFiles: OpenFilesLimit.current), eventLoop: group.next(),
            what: name, logger: logger)
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
                    try pipeline.addHandler(HTTPHandler(answering: answering, maxBodyBytes: limits.maxRequestBodyBytes, finishing: finishing))
                }
            }
        do {
            channel = try bootstrap.bind(host: host, port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            // NIO's IOError describes the call (`bind(descriptor:ptr:bytes:)`); the operator needs the reason.
            let reason = (error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(error)"
            // As for the data and ack endpoints: a port in use is 69 (another process has it); an address this
            // host does not have, or a port it may not bind, is the setting to fix (65).
            let inUse = (error as? IOError)?.errnoCode == EADDRINUSE
            throw AggregatorError(inUse ? .unavailable : .dataError, "cannot bind the \(name) \(endpoint): \(reason)")
        }
        let bound = channel.localAddress?.port ?? port
        self.endpoint = host.contains(":") ? "[\(host)]:\(bound)" : "\(host):\(bound)"
        self.group = group
        self.answering = answering
        self.connectionCap = connections.cap
    }

    /// Starts answering with `responder`.
    func start(_ responder: @escaping Responder) {
        answering.withLock {
            $0 = Answering(respond: { request, loop in
                loop.makeSucceededFuture(responder(request.method, request.path))
            })
        }
    }

    /// Starts answering with `responder`, whose answers come later.
    func start(answering responder: @escaping FutureResponder) {
        answering.withLock { $0 = Answering(respond: responder) }
    }

    /// Closes the listening socket and stops the thread; blocks until done.
    func shutdown() {
        answering.withLock { $0 = nil }
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }

    /// Splits `HOST:PORT` (`[v6]:PORT` for IPv6).
    /// - Throws: ``AggregatorError`` `.dataError` naming the value.
    static func parse(_ endpoint: String, what: String = "the metrics endpoint", port example: Int = 9560) throws
        -> (host: String, port: Int)
    {
        let bad = AggregatorError(
            .dataError,
            "\(what) '\(endpoint)' is not HOST:PORT (e.g. 127.0.0.1:\(example), 0.0.0.0:\(example), [::1]:\(example))")
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
    /// ``HTTPLimits/maxRequestBodyBytes``: nil drops bodies unread.
    private let maxBodyBytes: Int?
    private var head: HTTPRequestHead?
    private var body: [UInt8] = []
    /// A body over the limit was answered 413 and the connection is closing: nothing more is read.
    private var refused = false
    /// A whole request that waits for the output to drain.
    private var waiting: (head: HTTPRequestHead, body: [UInt8])?

    /// Applied to every answer written (``MetricsServer/init(endpoint:limits:name:logger:finishing:)``).
    private let finishing: @Sendable (MetricsServer.Response) -> MetricsServer.Response

    init(
        answering: Locked<MetricsServer.Answering?>, maxBodyBytes: Int?,
        finishing: @escaping @Sendable (MetricsServer.Response) -> MetricsServer.Response
    ) {
        self.answering = answering
        self.maxBodyBytes = maxBodyBytes
        self.finishing = finishing
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        switch unwrapInboundIn(data) {
        case .head(var request):
            // A request that asks to switch protocols (an `Upgrade` header, such as curl's h2c, or `CONNECT`) makes
            // NIO's decoder stop parsing and keep every byte that follows, unread and unbounded: it is answered as
            // any request, then the connection closes, and nothing more is read from it meanwhile.
            if request.method == .CONNECT || request.headers.contains(name: "Upgrade") {
                request.headers.replaceOrAdd(name: "Connection", value: "close")
                context.channel.setOption(ChannelOptions.autoRead, value: false).whenFailure { _ in }
            }
            head = request
            body = []
            // A body announced over the limit is refused before any of it is read.
            if let maxBodyBytes, let length = request.headers.first(name: "Content-Length").flatMap({ Int($0) }),
                length > maxBodyBytes
            {
                refuse(request, context: context)
            }
        case .body(var part):
            guard let maxBodyBytes, let request = head else { break }
            guard body.count + part.readableBytes <= maxBodyBytes else {
                refuse(request, context: context)
                return
            }
            body += part.readBytes(length: part.readableBytes) ?? []
        case .end:
            guard let request = head else { return }
            head = nil
            let received = body
            body = []
            if context.channel.isWritable {
                answer(request, body: received, context: context)
            } else {
                waiting = (request, received)
            }
        }
    }

    /// Answers 413 to a request whose body is over ``maxBodyBytes`` and closes the connection (the rest of the body is
    /// never read).
    private func refuse(_ request: HTTPRequestHead, context: ChannelHandlerContext) {
        refused = true
        head = nil
        body = []
        var closing = request
        closing.headers.replaceOrAdd(name: "Connection", value: "close")
        write(
            MetricsServer.Response(
                status: .payloadTooLarge, body: "the request's body is over \(maxBodyBytes ?? 0) bytes\n"),
            to: closing, context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, let request = waiting {
            waiting = nil
            answer(request.head, body: request.body, context: context)
        }
        context.fireChannelWritabilityChanged()
    }

    private func answer(_ request: HTTPRequestHead, body: [UInt8], context: ChannelHandlerContext) {
        guard let answering = answering.withLock({ $0 }) else {
            write(MetricsServer.Response(status: .serviceUnavailable, body: "starting\n"), to: request, context: context)
            return
        }
        let client = context.channel.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "-"
        var incoming = MetricsServer.Request(
            method: request.method, uri: request.uri, headers: request.headers, body: body, client: client)
        let channel = context.channel
        incoming.isWanted = { channel.isActive }
        let future = answering.respond(incoming, context.eventLoop)
        // Mostly completed already (the metrics); the console's complete on a pool thread and hop back here.
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        future.hop(to: context.eventLoop).whenComplete { result in
            let (handler, context) = bound.value
            let response: MetricsServer.Response
            switch result {
            case .success(let answer): response = answer
            case .failure(let error):
                response = MetricsServer.Response(status: .internalServerError, body: "failed: \(error)\n")
            }
            handler.write(response, to: request, context: context)
        }
    }

    private func write(_ response: MetricsServer.Response, to request: HTTPRequestHead, context: ChannelHandlerContext) {
        guard context.channel.isActive else { return }
        let response = finishing(response)
        let body = context.channel.allocator.buffer(string: response.body)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: response.contentType)
        for field in response.headers { headers.add(name: field.name, value: field.value) }
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
