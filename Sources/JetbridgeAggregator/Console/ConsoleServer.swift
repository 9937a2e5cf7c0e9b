import Foundation
import JetbridgeModel
import JetbridgeStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import SystemSupport

/// The operator's console of `serve --console HOST:PORT`: a read-only web board of flights, devices, bags and
/// receipts that updates itself (docs/AGGREGATOR.md, "Console").
///
/// Served by the same SwiftNIO HTTP/1 server as the metrics endpoint (``MetricsServer``, with its ``HTTPLimits``:
/// connection cap, request and idle timeouts, bounded pipelining and unsent output), on one event-loop thread of its
/// own. Every answer that reads the store runs on a pool of two threads (`NIOThreadPool`) and is written from the
/// future when it completes: a store call blocks (SQLite, or a wait on a PostgreSQL future, which SwiftNIO traps on an
/// event loop). The store is a reader of its own (``ConsoleReading``), opened for the console: its reads never take a
/// connection the store thread or the receipts thread uses, and in WAL mode they never block a commit.
///
/// Every answer but the sign-in and sign-out forms requires the operators' token (``ConsoleSignIn``, ``ConsoleToken``),
/// or the cookie of a browser session the sign-in form started (``ConsoleSessions``). Pages carry
/// their CSS and script inline (no external asset: it works on an airport LAN with no internet), under a
/// Content-Security-Policy that allows only those, by a nonce drawn per page; every other answer carries a policy that
/// allows nothing (``ConsolePage/secured(_:)``). Each page polls its JSON endpoint
/// (`/api/…`) every few seconds and redraws without a reload; device text reaches the page through `textContent`
/// only, escaped by ``InertText`` first.
final class ConsoleServer: Sendable {
    /// The address actually bound, `HOST:PORT`.
    let endpoint: String
    private let http: MetricsServer
    private let pool: NIOThreadPool
    /// Set at shutdown: the background read of today's flights stops after the flight it is reading.
    private let stopping = Locked(false)
    let api: ConsoleAPI
    /// The reader the start-up read of today's flights uses (``ConsoleAPI/warm(using:until:)``): a second reader of
    /// the store sharing the answers' kept totals (``ConsoleKept``), so that on PostgreSQL, where a reader is one
    /// connection, the first answers do not wait for it; `nil` reads on the answers' reader.
    private let warmStore: (any ConsoleReading)?
    /// The token every answer but the sign-in page requires.
    let signIn: ConsoleSignIn

    /// The metrics endpoint's limits, and bodies of at most ``ConsoleSignIn/maxBodyBytes`` (the sign-in form's).
    static var limits: HTTPLimits {
        var limits = HTTPLimits()
        limits.maxRequestBodyBytes = ConsoleSignIn.maxBodyBytes
        return limits
    }

    /// How many store reads may run at once: the console must not take the machine's two cores from the store
    /// thread; a third request waits in the pool's queue.
    static let readThreads = 2

    /// Binds `endpoint` and opens nothing else; ``start()`` answers.
    /// - Parameters:
    ///   - endpoint: `HOST:PORT`, as ``endpoint(_:)`` normalised it.
    ///   - store: The console's own reader.
    ///   - warmStore: Another reader of the same store for the start-up read of today's flights; closed with the
    ///     console.
    ///   - home: Where the allow list is (the devices page shows revoked devices).
    ///   - insecure: `--insecure`: there is no allow list to show.
    ///   - token: The operators' token (``ConsoleToken/load(in:made:)``).
    ///   - limits: The bounds on clients (the metrics endpoint's, and a sign-in form's body of at most 4 KiB).
    ///   - logger: Where the connection cap biting and wrong tokens are logged.
    /// - Throws: ``AggregatorError`` as ``MetricsServer/init(endpoint:limits:name:logger:finishing:)``.
    init(
        endpoint: String, store: any ConsoleReading, warmStore: (any ConsoleReading)? = nil, home: AggregatorHome,
        insecure: Bool, token: ConsoleToken, limits: HTTPLimits = ConsoleServer.limits, logger: Logger
    ) throws {
        http = try MetricsServer(
            endpoint: endpoint, limits: limits, name: "console", logger: logger, finishing: ConsolePage.secured)
        signIn = ConsoleSignIn(token: token, logger: logger)
        self.endpoint = http.endpoint
        pool = NIOThreadPool(numberOfThreads: Self.readThreads)
        api = ConsoleAPI(store: store, devicesFile: home.devicesFile, insecure: insecure)
        if let warmStore {
            let kept = ConsoleKept()
            store.keepConsoleTotals(in: kept)
            warmStore.keepConsoleTotals(in: kept)
        }
        self.warmStore = warmStore
    }

    /// Starts answering.
    func start() {
        pool.start()
        let pool = pool
        let api = api
        // The landing page's flights decoded once before anyone asks (a big flight's orders take a while the first
        // time; later answers use the kept totals): one pool thread, in the background.
        let stopping = stopping
        let reader = warmStore ?? api.store
        pool.submit { state in
            guard state == .active else { return }
            api.warm(using: reader, until: { stopping.withLock { $0 } })
        }
        let signIn = signIn
        http.start(answering: { request, eventLoop in
            Self.answer(request, eventLoop: eventLoop, signIn: signIn, pool: pool, api: api).map(ConsolePage.secured)
        })
    }

    /// Every answer of the console: the sign-in page without the token, the rest only with it.
    private static func answer(
        _ request: MetricsServer.Request, eventLoop: any EventLoop, signIn: ConsoleSignIn, pool: NIOThreadPool,
        api: ConsoleAPI
    ) -> EventLoopFuture<MetricsServer.Response> {
        if request.path == ConsoleSignIn.path {
            return eventLoop.makeSucceededFuture(signIn.answer(request))
        }
        if request.path == ConsoleSignIn.signOutPath {
            return eventLoop.makeSucceededFuture(signIn.signOut(request))
        }
        if let refusal = signIn.refusal(request) {
            return eventLoop.makeSucceededFuture(refusal)
        }
        guard request.method == .GET || request.method == .HEAD else {
            return eventLoop.makeSucceededFuture(
                .init(
                    status: .methodNotAllowed, body: "the console is read-only: GET and HEAD only\n",
                    headers: [("Allow", "GET, HEAD")]))
        }
        if let page = ConsolePage(path: request.path) {
            return eventLoop.makeSucceededFuture(page.response())
        }
        guard request.path.hasPrefix("/api/") else {
            return eventLoop.makeSucceededFuture(
                .init(status: .notFound, body: "not found; the console's pages are /, /flight, /devices, /bag and /receipt\n"))
        }
        // Queued for the two read threads without a bound on how many: a client that asks and goes away (a script
        // with a short timeout, in a loop) left reads of up to a second each that ran for nobody, and the console
        // answered no one else meanwhile. A read starts only while its client still waits.
        return pool.runIfActive(eventLoop: eventLoop) {
            guard request.isWanted() else {
                return MetricsServer.Response(status: .serviceUnavailable, body: "the client has gone\n")
            }
            return api.answer(request)
        }
    }

    /// Stops answering, closes the socket, the pool and the console's store readers; blocks until done.
    func shutdown() {
        stopping.withLock { $0 = true }
        http.shutdown()
        try? pool.syncShutdownGracefully()
        try? api.store.close()
        try? warmStore?.close()
    }

    /// `HOST:PORT` from the `console` setting: a port alone (`9570`, `:9570`) is loopback's, `127.0.0.1:9570`.
    /// - Throws: ``AggregatorError`` `.dataError` naming the value.
    static func endpoint(_ value: String) throws -> String {
        let trimmed = value.hasPrefix(":") ? String(value.dropFirst()) : value
        let endpoint = Int(trimmed) != nil ? "127.0.0.1:\(trimmed)" : value
        _ = try MetricsServer.parse(endpoint, what: "the console endpoint", port: 9570)
        return endpoint
    }
}
