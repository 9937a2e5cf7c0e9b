import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SystemSupport

/// The HTTP endpoint of `serve --metrics HOST:PORT`: SwiftNIO's HTTP/1 server on one event-loop thread of its own
/// (the answers read the store, which blocks; nothing else runs there).
///
/// Bound in ``init(endpoint:)`` so a busy port fails at start with a clear error; answers 503 "starting" until
/// ``start(_:)`` gives it the responder.
final class MetricsServer: Sendable {
    /// An answer: status, content type, body.
    struct Response: Sendable {
        var status: HTTPResponseStatus
        var contentType = "text/plain; charset=utf-8"
        var body: String
    }

    typealias Responder = @Sendable (_ method: HTTPMethod, _ path: String) -> Response

    /// The address actually bound, `HOST:PORT` (a port 0 resolved).
    let endpoint: String
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    private let responder: Locked<Responder?>

    /// Binds `endpoint`.
    /// - Parameter endpoint: `HOST:PORT`, e.g. `127.0.0.1:9560`, `0.0.0.0:9560`, `[::1]:9560`.
    /// - Throws: ``AggregatorError`` `.badConfiguration` for a malformed endpoint, `.unavailable` when it cannot be
    ///   bound (in use, no such address).
    init(endpoint: String) throws {
        let (host, port) = try Self.parse(endpoint)
        let responder = Locked<Responder?>(nil)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(HTTPHandler(responder: responder))
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
        self.responder = responder
    }

    /// Starts answering with `responder`.
    func start(_ responder: @escaping Responder) {
        self.responder.withLock { $0 = responder }
    }

    /// Closes the listening socket and stops the thread; blocks until done.
    func shutdown() {
        responder.withLock { $0 = nil }
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

/// One connection's requests: answers each at its end; keep-alive as the client asks.
private final class HTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let responder: Locked<MetricsServer.Responder?>
    private var head: HTTPRequestHead?

    init(responder: Locked<MetricsServer.Responder?>) {
        self.responder = responder
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
            let path = String(request.uri.split(separator: "?", maxSplits: 1).first ?? "")
            let response =
                responder.withLock { $0 }?(request.method, path)
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
}
