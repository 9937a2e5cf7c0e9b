public import Foundation
public import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The scale-out store: a PostgreSQL database that several aggregators may share (docs/STORE.md, "PostgreSQL
/// engine"), chosen with `store` / `--store postgres://…` (``StoreLocation``); the parity tests hold it to
/// ``SQLiteStore``'s outcomes, reads, reports and receipts.
///
/// Exactly once comes from the database's own rules, not from locks in the aggregator: primary keys on order and
/// scan ids (a plain insert of an id another aggregator stored meanwhile fails with 23505 and the round falls back
/// from a savepoint), stored orders locked before a higher revision of the owning device replaces them, rows locked
/// in one fixed order by every transaction (flights, orders and scans by id, devices, receipt marks by key) so that
/// two transactions never wait on each other in a cycle, and a serialization failure or deadlock (SQLSTATE 40001,
/// 40P01) retried.
///
/// No aggregator may hold the others: every wait is bounded (``Timeouts``). The server gives up a lock wait after 5 s
/// and a statement after 30 s, and ends a session that sits in an open transaction for 10 s (an aggregator stopped
/// or cut off mid-transaction), which frees its locks; `serve` ends another aggregator's session that froze in the
/// middle of a statement, which the server never ends (``endStalledSessions()``); TCP keepalives on both ends find a
/// peer that vanished; and this side waits for each statement's answer at most 35 s (a frozen server answers nothing). No transaction spans
/// file I/O: the receipt walk claims seats, commits, writes the files, then clears the marks.
///
/// One connection, serialised by a lock. Calls block on postgres-nio futures (run on SwiftNIO's event loops), so they
/// belong on the store's own thread, never on Swift's cooperative pool.
///
/// A lost connection (the server restarted, stopped, unreachable or not answering in time) fails the call in progress
/// with an error that says so (``PostgresStoreError/unreachable``); the next call connects again, at most once per
/// backoff interval (0.1 s doubling to 5 s while attempts fail; calls in between fail at once without waiting on the
/// network). The outage is logged once when it begins and once when it ends, never per call.

public final class PostgresStore: StoreWriter, @unchecked Sendable {
    /// Attempts of one transaction that fails with a serialization failure or deadlock.
    static let maximumAttempts = 20

    /// The first wait after a failed connection attempt, and the longest.
    static let firstBackoff: Duration = .milliseconds(100)
    static let longestBackoff: Duration = .seconds(5)

    /// Every bound on a wait, on the server (session settings sent with each connection's start-up) and on this side.
    /// `serve`'s connections take ``serving``; `report` and `receipts rebuild` take ``reading``, whose whole-table
    /// reads may take longer than any transaction should.
    public struct Timeouts: Sendable {
        /// `lock_timeout`: a statement waiting this long for a row another session holds fails (SQLSTATE 55P03).
        var lock: Duration
        /// `idle_in_transaction_session_timeout`: the server ends a session that sits this long in an open
        /// transaction without sending a statement (SQLSTATE 25P03), which rolls it back and frees its locks. No
        /// transaction of the store waits for anything but the server between its statements.
        var idleInTransaction: Duration
        /// `statement_timeout`: the server cancels a statement that runs this long (SQLSTATE 57014); nil: none.
        var statement: Duration?
        /// How long this side waits for the server's answer to one statement before it gives the connection up as
        /// lost: a frozen server cancels nothing. Above `statement`, so that the server cancels a slow statement
        /// first. Nil: as long as it takes.
        var answer: Duration?
        /// How long ``probe()`` waits for `SELECT 1`.
        var probe: Duration
        /// How long one connection attempt may take (TCP connect and start-up): an unreachable host must not hold
        /// the store thread for long.
        var connect: Duration
        /// How long a receipt claim lasts unless renewed: a seat claimed by an aggregator that stopped is rendered by
        /// another once it ends.
        var claimLease: Duration
        /// TCP keepalive, both ends: the first probe after this long idle, then every `keepaliveInterval`, and the
        /// connection is dropped after `keepaliveCount` unanswered probes (about 25 s for a vanished peer).
        var keepaliveIdle: Duration = .seconds(10)
        var keepaliveInterval: Duration = .seconds(5)
        var keepaliveCount = 3

        init(
            lock: Duration = .seconds(5), idleInTransaction: Duration = .seconds(10),
            statement: Duration? = .seconds(30), answer: Duration? = .seconds(35), probe: Duration = .seconds(5),
            connect: Duration = .seconds(5), claimLease: Duration = .seconds(20)
        ) {
            self.lock = lock
            self.idleInTransaction = idleInTransaction
            self.statement = statement
            self.answer = answer
            self.probe = probe
            self.connect = connect
            self.claimLease = claimLease
        }

        /// `serve` and `store migrate`.
        public static let serving = Timeouts()
        /// `report` and `receipts rebuild`: no statement or answer timeout (a report reads whole tables); the lock
        /// and idle-in-transaction bounds stay.
        public static let reading = Timeouts(statement: nil, answer: nil)

        /// A duration as PostgreSQL's milliseconds; nil is 0 (no limit).
        static func milliseconds(_ duration: Duration?) -> String {
            guard let duration else { return "0" }
            return "\(max(1, Int(duration / .milliseconds(1))))"
        }

        /// The start-up parameters that set the server's side.
        var sessionSettings: [(String, String)] {
            let milliseconds = Self.milliseconds
            return [
                ("lock_timeout", milliseconds(lock)),
                ("idle_in_transaction_session_timeout", milliseconds(idleInTransaction)),
                ("statement_timeout", milliseconds(statement)),
                // Seconds; ignored on a Unix socket.
                ("tcp_keepalives_idle", "\(keepaliveIdle.components.seconds)"),
                ("tcp_keepalives_interval", "\(keepaliveInterval.components.seconds)"),
                ("tcp_keepalives_count", "\(keepaliveCount)"),
            ]
        }
    }

    /// Where the store is (shown without its password).
    public let location: PostgresLocation
    let timeouts: Timeouts
    let lock = NSLock()
    let logger: Logger
    /// Who this store is among the sessions on the database: `host:pid:random`. Its receipt claims carry it, and
    /// `pg_stat_activity.application_name` shows `jetbridge host:pid`.
    let session: String
    /// The waits for the server in progress, a statement's answer or a connection (``busySince``): read without
    /// `lock`, which the thread that waits holds.
    let waits = StoreCalls()
    /// Pairs whose rows a summary read since their kept digest changed (``deliverySummary(device:flight:expected:)``).
    let rowReads = RowReadDigests()
    /// Sessions ``endStalledSessions()`` found waiting on their client, by server pid: since when their message (its
    /// `state_change`, as seconds since 1970), and when it first found them so.
    private let stallSightings = Locked<[Int32: StallSighting]>([:])
    /// The console's kept totals (``ConsoleKept``): its decoded sales per flight while the flight's orders are
    /// unchanged, its bag counts and scans per device per flight.
    private let kept = Locked(ConsoleKept())
    var consoleSales: ConsoleSales { kept.withLock { $0.sales } }
    var consoleTallies: ConsoleTallies { kept.withLock { $0.tallies } }

    public func keepConsoleTotals(in kept: ConsoleKept) { self.kept.withLock { $0 = kept } }

    /// Which server a connection keeps (the URL's `target_session_attrs`, else the command's default).
    public let target: PostgresLocation.TargetSessionAttributes
    // Guarded by `lock` (hence @unchecked Sendable).
    var connection: PostgresConnection
    /// The server `connection` is on.
    var server: Server
    /// Set when the connection failed (rather than the server refusing a statement): the next call reconnects.
    var broken = false
    var backoff = PostgresStore.firstBackoff
    var nextAttempt = ContinuousClock.now
    /// When the current outage began, if one is going on.
    var outageSince: Date?
    /// How long the current call waits for each answer (``Timeouts/answer``, a probe's shorter), or nil for no limit.
    var answerLimit: Duration?

    /// Connects to the database at `url` and brings its schema up to date.
    ///
    /// - Parameters:
    ///   - url: `postgres://user[:password]@host[:port]/database` (see ``PostgresLocation``).
    ///   - logger: Where the store logs; never the password.
    ///   - environment: Where `PGPASSWORD` is looked up.
    ///   - timeouts: ``Timeouts/serving`` for `serve`, ``Timeouts/reading`` for reports.
    ///   - defaultTarget: Which server to keep when the URL gives no `target_session_attrs`: `read-write` for `serve`
    ///     and `store migrate`, `any` for `report` and `receipts rebuild` (libpq's default).
    /// - Throws: ``PostgresStoreError`` naming the URL without its password.
    public convenience init(
        url: String, logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment,
        timeouts: Timeouts = .serving, defaultTarget: PostgresLocation.TargetSessionAttributes = .readWrite
    ) throws {
        try self.init(
            location: PostgresLocation(url, environment: environment), logger: logger, timeouts: timeouts,
            defaultTarget: defaultTarget)
    }

    init(
        location: PostgresLocation, logger: Logger, timeouts: Timeouts,
        defaultTarget: PostgresLocation.TargetSessionAttributes = .readWrite
    ) throws {
        self.location = location
        self.logger = logger
        self.timeouts = timeouts
        session = "\(ThisProcess.hostLabel):\(ThisProcess.pid):\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        self.target = location.targetSessionAttributes ?? defaultTarget
        (connection, server) = try Self.connect(location, target: target, timeouts: timeouts, logger: logger)
        do {
            // A standby's schema is its primary's: it cannot be migrated there, only checked.
            if server.readOnly {
                let version = try schemaVersion()
                guard version >= Self.migrations.count else {
                    throw PostgresStoreError(
                        "the store \(location.redacted) is served read-only by \(server) at schema version \(version) "
                            + "of \(Self.migrations.count); run `store migrate` against the primary first")
                }
            } else {
                try migrate()
            }
        } catch {
            try? connection.close().wait()
            throw error
        }
        logger.debug(
            "store open", metadata: ["store": "\(location.redacted)", "server": "\(server)", "session": "\(session)"])
    }

    // MARK: Statements

    /// The server a connection was kept on, and what it is.
    public struct Server: Sendable, CustomStringConvertible {
        /// Its host and port; nil for a Unix socket.
        public var endpoint: PostgresLocation.Endpoint?
        /// Whether it is a hot standby (`pg_is_in_recovery()`).
        public var standby: Bool
        /// Whether its sessions may not write (`SHOW transaction_read_only`).
        public var readOnly: Bool

        public var description: String {
            "\(endpoint?.description ?? "Unix socket") (\(standby ? "standby" : readOnly ? "read-only" : "primary"))"
        }
    }

    /// Connects to the first server of `location` that matches `target` (libpq's `target_session_attrs`), trying
    /// them in order; `prefer-standby` tries for a standby first, then for any.
    /// - Throws: ``PostgresStoreError``: one server's own failure, or for several one that lists each host's.
    static func connect(
        _ location: PostgresLocation, target: PostgresLocation.TargetSessionAttributes, timeouts: Timeouts,
        logger: Logger
    ) throws -> (PostgresConnection, Server) {
        let candidates: [PostgresLocation.Endpoint?] = location.endpoints.isEmpty ? [nil] : location.endpoints
        // Each host's failure, and whether it answered but did not match (rather than failing).
        var failures: [(endpoint: PostgresLocation.Endpoint?, error: PostgresStoreError, mismatch: Bool)] = []
        let passes: [PostgresLocation.TargetSessionAttributes] = target == .preferStandby ? [.standby, .any] : [target]
        for pass in passes {
            failures = []
            for endpoint in candidates {
                let connection: PostgresConnection
                do {
                    connection = try connect(location, endpoint: endpoint, timeouts: timeouts, logger: logger)
                } catch {
                    failures.append((endpoint, connectFailure(error, location: location), false))
                    continue
                }
                do {
                    let server = try describeServer(connection, endpoint: endpoint, timeouts: timeouts, logger: logger)
                    let matches =
                        switch pass {
                        case .any, .preferStandby: true
                        case .readWrite: !server.readOnly
                        case .readOnly: server.readOnly
                        case .primary: !server.standby
                        case .standby: server.standby
                        }
                    if matches { return (connection, server) }
                    try? connection.close().wait()
                    let what = server.standby ? "a standby" : server.readOnly ? "read-only" : "a primary accepting writes"
                    failures.append((endpoint, PostgresStoreError("it is \(what)", unreachable: true), true))
                } catch {
                    // Local (the channel's socket), and before the connection is released: postgres-nio asserts it.
                    try? connection.close().wait()
                    failures.append((endpoint, connectFailure(error, location: location), false))
                }
            }
        }
        if candidates.count == 1, let only = failures.first, !only.mismatch {
            var failure = only.error
            failure.message = "cannot connect to \(location.redacted): \(failure.message)"
            throw failure
        }
        let each = failures.map { "\($0.endpoint?.description ?? "the Unix socket"): \($0.error.message)" }
        let wanted =
            switch target {
            case .any, .preferStandby: "answers"
            case .readWrite: "accepts writes (target_session_attrs=read-write)"
            case .readOnly: "is read-only (target_session_attrs=read-only)"
            case .primary: "is a primary (target_session_attrs=primary)"
            case .standby: "is a standby (target_session_attrs=standby)"
            }
        // Only configuration failures (a certificate, a refused login): waiting will not help. Otherwise an outage,
        // a failover under way included.
        let configuration = failures.allSatisfy { $0.error.misconfigured || $0.error.sqlState?.hasPrefix("28") == true }
        throw PostgresStoreError(
            "no server of \(location.redacted) \(wanted): " + each.joined(separator: "; "),
            sqlState: configuration ? failures.first?.error.sqlState : nil, unreachable: !configuration,
            misconfigured: configuration && failures.contains { $0.error.misconfigured })
    }

    /// One host's connection failure, its message naming what failed (never the password).
    static func connectFailure(_ error: any Error, location: PostgresLocation) -> PostgresStoreError {
        if let error = error as? PostgresStoreError { return error }
        if let error = error as? PSQLError {
            switch error.code {
            case .sslUnsupported:
                return PostgresStoreError(
                    "the server does not offer TLS and sslmode=\(location.sslMode.rawValue) requires it (no plaintext "
                        + "fallback)", misconfigured: true)
            case .failedToAddSSLHandler:
                return PostgresStoreError("TLS could not start: \(String(reflecting: error.underlying))", misconfigured: true)
            default:
                if let underlying = error.underlying, let tls = tlsFailure(underlying) { return tls }
            }
        }
        if let tls = tlsFailure(error) { return tls }
        var failure = describe(error, doing: "connection failed")
        failure.unreachable = failure.sqlState == nil || failure.isConnectionState
        return failure
    }

    /// A TLS handshake failure (NIOSSL's), as a configuration error: a certificate that does not verify.
    static func tlsFailure(_ error: any Error) -> PostgresStoreError? {
        let text = String(reflecting: error)
        guard error is NIOSSLError || text.contains("NIOSSL") || text.contains("certificate") else { return nil }
        return PostgresStoreError(
            "TLS failed: the server's certificate does not verify (\(text)); check sslrootcert and that the "
                + "certificate names the host", misconfigured: true)
    }

    /// Asks a new connection's server whether it is a standby and whether its sessions may write, within
    /// ``Timeouts/probe``; in the same statement, turns `synchronous_commit` back on for the session when the server,
    /// the database or the role turned it `off` (a common tuning): `COMMIT` would then return before the batch is in
    /// the write-ahead log on disk, and the ack that follows it could be lost with the server (docs/AGGREGATOR.md,
    /// "What an ack means"). Any other value (`local`, `remote_write`, `on`, `remote_apply`) is kept.
    static func describeServer(
        _ connection: PostgresConnection, endpoint: PostgresLocation.Endpoint?, timeouts: Timeouts, logger: Logger
    ) throws -> Server {
        let rows = try waitAtMost(
            timeouts.probe,
            connection.query(
                """
                SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),
                  CASE WHEN current_setting('synchronous_commit') = 'off'
                    THEN set_config('synchronous_commit', 'on', false) END
                """, logger: logger))
        guard let rows, let row = rows.first else {
            throw PostgresStoreError("it did not say within \(timeouts.probe) whether it accepts writes", unreachable: true)
        }
        let (standby, readOnly, _) = try row.decode((Bool, String, String?).self)
        return Server(endpoint: endpoint, standby: standby, readOnly: readOnly == "on")
    }

    /// The TLS of `location`'s `sslmode` and `sslrootcert` for a connection to `host`.
    /// - Throws: ``PostgresStoreError`` when the sslrootcert file does not load.
    static func tls(_ location: PostgresLocation, host: String) throws -> PostgresConnection.Configuration.TLS {
        var configuration = TLSConfiguration.makeClientConfiguration()
        switch location.sslMode {
        case .disable: return .disable
        case .prefer, .require:
            // libpq: require with a root certificate checks it as verify-ca does.
            configuration.certificateVerification = location.sslRootCertificate == nil ? .none : .noHostnameVerification
        case .verifyCA: configuration.certificateVerification = .noHostnameVerification
        case .verifyFull: configuration.certificateVerification = .fullVerification
        }
        if let file = location.sslRootCertificate, file != "system" {
            do {
                configuration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
            } catch {
                throw PostgresStoreError(
                    "the sslrootcert file '\(file)' of \(location.redacted) holds no PEM certificate: \(error)",
                    misconfigured: true)
            }
        }
        let context: NIOSSLContext
        do { context = try NIOSSLContext(configuration: configuration) } catch {
            throw PostgresStoreError("cannot set up TLS for \(location.redacted): \(error)", misconfigured: true)
        }
        return location.sslMode == .prefer ? .prefer(context) : .require(context)
    }

    /// Opens one connection to one server with the session settings of `timeouts`. Over TCP the socket is connected
    /// here, with keepalive on (postgres-nio's own bootstrap sets no socket options), and handed to postgres-nio for
    /// the start-up (and TLS, which it negotiates on the channel); a Unix socket needs none.
    static func connect(
        _ location: PostgresLocation, endpoint: PostgresLocation.Endpoint?, timeouts: Timeouts, logger: Logger
    ) throws -> PostgresConnection {
        let eventLoop = MultiThreadedEventLoopGroup.singleton.next()
        let connectTimeout = TimeAmount.nanoseconds(Int64(timeouts.connect / .nanoseconds(1)))
        var configuration: PostgresConnection.Configuration
        if let endpoint {
            let tls = try tls(location, host: endpoint.host)
            let channel = try ClientBootstrap(group: eventLoop)
                .connectTimeout(connectTimeout)
                .channelOption(ChannelOptions.socketOption(.so_keepalive), value: 1)
                .channelOption(
                    ChannelOptions.tcpOption(.init(rawValue: TCP_KEEPIDLE)),
                    value: Int(timeouts.keepaliveIdle.components.seconds))
                .channelOption(
                    ChannelOptions.tcpOption(.init(rawValue: TCP_KEEPINTVL)),
                    value: Int(timeouts.keepaliveInterval.components.seconds))
                .channelOption(
                    ChannelOptions.tcpOption(.init(rawValue: TCP_KEEPCNT)), value: timeouts.keepaliveCount)
                .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
                .connect(host: endpoint.host, port: endpoint.port).wait()
            configuration = .init(
                establishedChannel: channel, tls: tls, username: location.user, password: location.password,
                database: location.database)
            // The name checked in the certificate (verify-full) and sent as SNI; never an address.
            if !PostgresLocation.isIPAddress(endpoint.host) { configuration.options.tlsServerName = endpoint.host }
        } else {
            configuration = .init(
                unixSocketPath: "\(location.socketDirectory ?? "")/.s.PGSQL.\(location.port)", username: location.user,
                password: location.password, database: location.database)
        }
        configuration.options.connectTimeout = connectTimeout
        configuration.options.additionalStartupParameters =
            [("application_name", "jetbridge \(ThisProcess.hostLabel):\(ThisProcess.pid)")] + timeouts.sessionSettings
        let started = PostgresConnection.connect(
            on: eventLoop, configuration: configuration, id: Int.random(in: 1...Int(Int32.max)), logger: logger)
        do {
            return try started.wait()
        } catch {
            // A start-up that failed on a channel of ours leaves it to us.
            if let channel = configuration.establishedChannel { channel.close(promise: nil) }
            throw error
        }
    }

    /// The value of `future`, or nil when it has not come within `limit`.
    static func waitAtMost<T: Sendable>(_ limit: Duration, _ future: EventLoopFuture<T>) throws -> T? {
        let box = AnswerBox<T>()
        let answered = DispatchSemaphore(value: 0)
        future.whenComplete { result in
            box.result = result
            answered.signal()
        }
        guard answered.wait(timeout: .now() + .nanoseconds(Int(limit / .nanoseconds(1)))) == .success,
            let result = box.result
        else { return nil }
        return try result.get()
    }

    @discardableResult
    func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        do {
            return try answer(connection.query(query, logger: logger))
        } catch {
            var failure = Self.describe(error, doing: "\(location.redacted)")
            // No answer from the server (the connection closed, failed or timed out), or the server going away
            // (57P01 admin shutdown, 57P02, 57P03 starting up, 25P03 idle in a transaction too long) or a
            // connection exception (08xxx): reconnect before the next call.
            // A write refused as read-only (25006): this server became a standby; connect again to the one that
            // accepts writes.
            if failure.sqlState == nil || failure.isConnectionState || failure.isReadOnlyState || connection.isClosed {
                broken = true
                failure.unreachable = true
                noteOutage(failure)
            }
            throw failure
        }
    }

    /// The value of `future`, waiting at most ``answerLimit``, as one wait for the server (``busySince``). Past the
    /// limit the connection is closed (its state is unknown: the statement may still run) and the call fails as
    /// unreachable; the next call connects again.
    /// - Throws: What the future failed with, or ``PostgresStoreError`` when the server did not answer in time.
    func answer<T: Sendable>(_ future: EventLoopFuture<T>) throws -> T {
        try waits.measure { try wait(for: future) }
    }

    private func wait<T: Sendable>(for future: EventLoopFuture<T>) throws -> T {
        guard let limit = answerLimit else { return try future.wait() }
        let deadline = ContinuousClock.now + limit
        let box = AnswerBox<T>()
        let answered = DispatchSemaphore(value: 0)
        future.whenComplete { result in
            box.result = result
            answered.signal()
        }
        let remaining = max(.zero, deadline - .now)
        if answered.wait(timeout: .now() + .nanoseconds(Int(remaining / .nanoseconds(1)))) == .success,
            let result = box.result
        {
            return try result.get()
        }
        broken = true
        Self.closeInBackground(connection)
        throw PostgresStoreError(
            "the store \(location.redacted) did not answer within \(limit.components.seconds) s; the connection is "
                + "closed and opened again", unreachable: true)
    }

    /// Closes `connection` without waiting, keeping it alive until the close completes: a connection released while
    /// its close is still under way trips postgres-nio's "deinitialized before being closed" assertion (a crash in
    /// debug builds; it happened when `reconnectIfNeeded` replaced a connection whose close had just been asked).
    static func closeInBackground(_ connection: PostgresConnection) {
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// Connects again when the connection was lost, at most once per backoff interval; called with the lock held
    /// before every call's statements.
    /// - Throws: ``PostgresStoreError`` with `unreachable` set while the server cannot be reached.
    func reconnectIfNeeded() throws {
        guard broken || connection.isClosed else { return }
        let now = ContinuousClock.now
        guard now >= nextAttempt else {
            throw PostgresStoreError(
                "the store \(location.redacted) is unreachable; reconnecting (next attempt in "
                    + "\(Int(((nextAttempt - now) / .milliseconds(1)).rounded())) ms)", unreachable: true)
        }
        // Closing is local (the channel's socket): it never waits for the server.
        Self.closeInBackground(connection)
        do {
            (connection, server) = try waits.measure {
                try Self.connect(location, target: target, timeouts: timeouts, logger: logger)
            }
        } catch {
            var failure = Self.describe(error, doing: "the store \(location.redacted) is unreachable")
            failure.unreachable = true
            broken = true
            nextAttempt = now + backoff
            backoff = min(backoff * 2, Self.longestBackoff)
            noteOutage(failure)
            throw failure
        }
        broken = false
        backoff = Self.firstBackoff
        if let since = outageSince {
            outageSince = nil
            logger.notice(
                "store reachable again",
                metadata: [
                    "store": "\(location.redacted)", "server": "\(server)", "outageSeconds": .stringConvertible(Int(Date().timeIntervalSince(since).rounded())),
                ])
        }
    }

    /// Logs the start of an outage, once.
    func noteOutage(_ failure: PostgresStoreError) {
        guard outageSince == nil else { return }
        outageSince = Date()
        logger.warning(
            "store unreachable; reconnecting with backoff (up to \(Self.longestBackoff))",
            metadata: ["store": "\(location.redacted)", "error": "\(failure.message)"])
    }

    /// A message for `error` that never carries the password: the server's SQLSTATE and message, or what failed.
    static func describe(_ error: any Error, doing what: String) -> PostgresStoreError {
        if let error = error as? PostgresStoreError { return error }
        guard let error = error as? PSQLError else { return PostgresStoreError("\(what): \(error)") }
        if let info = error.serverInfo {
            let state = info[.sqlState]
            let message = info[.message] ?? "error"
            let detail = info[.detail].map { " (\($0))" } ?? ""
            return PostgresStoreError("\(what): \(message)\(detail) [SQLSTATE \(state ?? "?")]", sqlState: state)
        }
        return PostgresStoreError("\(what): \(error.code)")
    }

    /// Runs `body` in one transaction (`BEGIN` … `COMMIT`, or `ROLLBACK` when it says so or throws), again from the
    /// start after a serialization failure or deadlock.
    ///
    /// A lock wait past the lock timeout (55P03) or a statement past the statement timeout (57014) is not retried
    /// here: what held the lock or the statement is stuck (another aggregator stopped mid-transaction, a server too
    /// slow), and waiting again would hold this aggregator's batches behind it. The call fails, `serve` answers the
    /// batches `retry`, and the devices send them again later.
    func transaction<T>(_ body: () throws -> (value: T, commit: Bool)) throws -> T {
        var attempt = 1
        while true {
            do {
                try run("BEGIN")
                let (value, commit) = try body()
                try run(commit ? "COMMIT" : "ROLLBACK")
                return value
            } catch let error as PostgresStoreError {
                if !broken { _ = try? run("ROLLBACK") }
                guard error.sqlState == "40001" || error.sqlState == "40P01", attempt < Self.maximumAttempts else {
                    throw error
                }
                logger.debug(
                    "store transaction retried", metadata: ["sqlstate": "\(error.sqlState ?? "")", "attempt": .stringConvertible(attempt)])
                Thread.sleep(forTimeInterval: Double.random(in: 0.001...0.005) * Double(attempt))
                attempt += 1
            } catch {
                if !broken { _ = try? run("ROLLBACK") }
                throw error
            }
        }
    }

    /// Runs `body` as one call with the connection to itself, connecting again first if it was lost; each answer
    /// must come within `timeout` (``Timeouts/answer`` unless given; nil: no limit).
    func locked<T>(timeout: Duration?? = .none, _ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        answerLimit = timeout ?? timeouts.answer
        try reconnectIfNeeded()
        return try body()
    }

    /// When the oldest wait for the server still in progress began: a statement's answer or a connection attempt.
    /// A long transaction whose statements are answered is making progress and is not overdue; a server that
    /// answers nothing is, whatever the call.
    public var busySince: ContinuousClock.Instant? { waits.oldest }

    /// The server the store's connection is on now (the last one it connected to).
    public var currentServer: Server {
        lock.lock()
        defer { lock.unlock() }
        return server
    }

    /// Folds the kept digests' stale marks (docs/STORE.md, "Kept digests"): each marked pair is marked stale in
    /// `device_flights` and its marks removed, in one transaction, so marks of pairs nobody asks about again do not
    /// pile up. The pairs' rows are locked first in the lock order (by device, then flight); a mark added meanwhile is
    /// deleted too and its pair marked stale (safe), without its row locked first, so the fold can deadlock with an
    /// `apply` of that pair, and is then tried again (``transaction(_:)``, 40P01). PostgreSQL's own autovacuum and
    /// checkpointer keep the rest of the database in shape.
    public func idleMaintenance() throws {
        try locked {
            try transaction {
                try run(
                    """
                    SELECT 1 FROM device_flights
                    WHERE (device, flight) IN (SELECT device, flight FROM stale_digests)
                    ORDER BY device, flight FOR UPDATE
                    """)
                try run(
                    """
                    WITH gone AS (DELETE FROM stale_digests RETURNING device, flight)
                    UPDATE device_flights AS d SET digest_valid = false
                    FROM (SELECT DISTINCT device, flight FROM gone) AS g
                    WHERE d.device = g.device AND d.flight = g.flight AND d.digest_valid
                    """)
                return ((), true)
            }
        }
    }

    public func close() throws {
        lock.lock()
        defer { lock.unlock() }
        guard !connection.isClosed else { return }
        do { try connection.close().wait() } catch {
            // A connection the server already dropped has nothing left to close.
            if broken { return }
            throw Self.describe(error, doing: "closing \(location.redacted)")
        }
    }

    /// `SELECT 1`, answered within ``Timeouts/probe``; a server that does not answer in time is unreachable (the
    /// connection is closed and opened again).
    public func probe() -> String? {
        do {
            _ = try locked(timeout: .some(timeouts.probe)) { try run("SELECT 1") }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// Ends the sessions of Jetbridge processes on this database (`application_name` `jetbridge …`) that hold
    /// written or locked rows (`backend_xid`) and have been stopped on their client in the middle of a statement
    /// since a message that began more than ``Timeouts/idleInTransaction`` ago, and returns them.
    ///
    /// A process stopped (SIGSTOP, a paused VM, swapping) part-way through writing a statement (a group's insert
    /// sends its records in one message of several MB) leaves its server process reading the rest (`ClientRead`);
    /// one stopped before it read a statement's answer leaves it writing (`ClientWrite`) once the socket's buffers
    /// are full. Either way the session is `active` with its transaction's rows locked, and PostgreSQL's own bounds
    /// do not end it: `idle_in_transaction_session_timeout` applies between statements only, and a statement timeout
    /// is not acted on while the server reads a message or waits to send. A healthy client sends the rest of a
    /// statement (and the next) in the same write and reads answers as they come, so it never waits there for long.
    ///
    /// `state_change` is when the session's last message began (a Parse, a Bind, an Execute): it says how long the
    /// statement has been going, not how long it has waited. So a session is ended only when two calls (`serve`'s
    /// checks, 5 s apart; at least a quarter of the bound) both found it waiting on its client with the same
    /// `state_change`, the first more than half the bound and the second more than the bound after it: a statement
    /// that ran long and then waits an instant for its reader is not ended. Ending it rolls its transaction back and
    /// frees the rows (the process, once it resumes, finds its connection gone and connects again). A session without a transaction id holds no row: a report streaming a
    /// large answer to a slow reader is never ended. Only sessions this role may see and end are considered: its own
    /// and those of roles it is a member of (a superuser's only from a superuser). Asked within ``Timeouts/probe``,
    /// as ``probe()`` is.
    public func endStalledSessions() throws -> [StalledSession] {
        let half = timeouts.idleInTransaction / 2
        let bound = Double(timeouts.idleInTransaction / .milliseconds(1)) / 1000
        return try locked(timeout: .some(timeouts.probe)) {
            let waiting = try run(
                """
                SELECT a.pid, a.application_name, EXTRACT(EPOCH FROM a.state_change)::float8,
                    EXTRACT(EPOCH FROM clock_timestamp() - a.state_change)::float8
                FROM pg_stat_activity AS a JOIN pg_roles AS r ON r.oid = a.usesysid
                WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
                    AND a.application_name LIKE 'jetbridge %'
                    AND (NOT r.rolsuper OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))
                    AND pg_has_role(a.usesysid, 'USAGE')
                    AND a.backend_xid IS NOT NULL AND a.state = 'active' AND a.wait_event_type = 'Client'
                    AND a.wait_event IN ('ClientRead', 'ClientWrite')
                    AND a.state_change < clock_timestamp() - \(Int(half / .milliseconds(1))) * interval '1 millisecond'
                """
            ).map { row in
                let (pid, name, began, seconds) = try row.decode((Int32, String, Double, Double).self)
                return (session: StalledSession(pid: pid, applicationName: name, seconds: seconds), began: began)
            }
            let now = ContinuousClock.now
            let due = stallSightings.withLock { seen in
                var sightings: [Int32: StallSighting] = [:]
                var due: [(session: StalledSession, began: Double)] = []
                for (session, began) in waiting {
                    if let first = seen[session.pid], first.began == began {
                        sightings[session.pid] = first
                        if now - first.at >= half / 2 && session.seconds > bound { due.append((session, began)) }
                    } else {
                        sightings[session.pid] = StallSighting(began: began, at: now)
                    }
                }
                seen = sightings
                return due
            }
            guard !due.isEmpty else { return [] }
            // Ended only if still waiting in the same message: not one that went on since, nor a new session that
            // took its pid.
            let ended = Set(
                try run(
                    """
                    WITH still AS MATERIALIZED (
                        SELECT a.pid FROM unnest(\(due.map(\.session.pid))::int4[], \(due.map(\.began))::float8[])
                            AS d(pid, began)
                        JOIN pg_stat_activity AS a ON a.pid = d.pid
                        WHERE EXTRACT(EPOCH FROM a.state_change)::float8 = d.began AND a.state = 'active'
                            AND a.wait_event_type = 'Client' AND a.wait_event IN ('ClientRead', 'ClientWrite')
                    )
                    SELECT pid FROM still WHERE pg_terminate_backend(pid)
                    """
                ).map { try $0.decode(Int32.self) })
            return due.map(\.session).filter { ended.contains($0.pid) }
        }
    }

    /// A session setting as the server reports it (`SHOW name`), for tests.
    func setting(_ name: String) throws -> String {
        try locked {
            try run(PostgresQuery(unsafeSQL: "SHOW \(name)")).first.map { try $0.decode(String.self) } ?? ""
        }
    }
}

/// A future's result handed from the event loop to the waiting thread: written once, before the semaphore is
/// signalled, and read only after the wait saw the signal.
private final class AnswerBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// A session ``PostgresStore/endStalledSessions()`` found waiting on its client in the middle of a statement.
struct StallSighting {
    /// Its `state_change`, as seconds since 1970: a new message makes it another sighting.
    var began: Double
    /// When it was first found so.
    var at: ContinuousClock.Instant
}
