public import Foundation
public import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// The scale-out store: a PostgreSQL database that several aggregators may share (docs/STORE.md, "PostgreSQL
/// engine"), chosen with `store` / `--store postgres://…` (``StoreLocation``); the parity tests hold it to
/// ``SQLiteStore``'s outcomes, reads, reports and receipts.
///
/// Exactly once comes from the database's own rules, not from locks in the aggregator: primary keys on order and
/// scan ids, `INSERT … ON CONFLICT` clauses (the highest revision wins, only for the owning device), rows written in
/// a fixed order (flights, orders and scans by id, devices, receipt marks by key) so that two transactions never
/// wait on each other in a cycle, and a serialization failure or deadlock (SQLSTATE 40001, 40P01) retried.
///
/// One connection, serialised by a lock. Calls block on postgres-nio futures (run on SwiftNIO's event loops), so they
/// belong on the store's own thread, never on Swift's cooperative pool.
///
/// A lost connection (the server restarted, stopped or unreachable) fails the call in progress with an error that
/// says so (``PostgresStoreError/unreachable``); the next call connects again, at most once per backoff interval
/// (0.1 s doubling to 5 s while attempts fail; calls in between fail at once without waiting on the network). The
/// outage is logged once when it begins and once when it ends, never per call.
public final class PostgresStore: StoreWriter, @unchecked Sendable {
    /// Attempts of one transaction that fails with a serialization failure or deadlock.
    static let maximumAttempts = 20

    /// The first wait after a failed connection attempt, and the longest.
    static let firstBackoff: Duration = .milliseconds(100)
    static let longestBackoff: Duration = .seconds(5)
    /// How long one connection attempt may take: an unreachable host must not hold the store thread for long.
    static let connectTimeout: Int64 = 5

    /// Where the store is (shown without its password).
    public let location: PostgresLocation
    let configuration: PostgresConnection.Configuration
    let lock = NSLock()
    let logger: Logger
    // Guarded by `lock` (hence @unchecked Sendable).
    var connection: PostgresConnection
    /// Set when the connection failed (rather than the server refusing a statement): the next call reconnects.
    var broken = false
    var backoff = PostgresStore.firstBackoff
    var nextAttempt = ContinuousClock.now
    /// When the current outage began, if one is going on.
    var outageSince: Date?

    /// Connects to the database at `url` and brings its schema up to date.
    ///
    /// - Parameters:
    ///   - url: `postgres://user[:password]@host[:port]/database` (see ``PostgresLocation``).
    ///   - logger: Where the store logs; never the password.
    ///   - environment: Where `PGPASSWORD` is looked up.
    /// - Throws: ``PostgresStoreError`` naming the URL without its password.
    public init(
        url: String, logger: Logger, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        let location = try PostgresLocation(url, environment: environment)
        self.location = location
        self.logger = logger
        var configuration: PostgresConnection.Configuration
        if let directory = location.socketDirectory {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(location.port)", username: location.user,
                password: location.password, database: location.database)
        } else {
            configuration = .init(
                host: location.host!, port: location.port, username: location.user, password: location.password,
                database: location.database, tls: .disable)
        }
        configuration.options.connectTimeout = .seconds(Self.connectTimeout)
        self.configuration = configuration
        do {
            connection = try Self.connect(configuration, logger: logger)
        } catch {
            var failure = Self.describe(error, doing: "cannot connect to \(location.redacted)")
            failure.unreachable = failure.sqlState == nil || failure.isConnectionState
            throw failure
        }
        do {
            try migrate()
        } catch {
            try? connection.close().wait()
            throw error
        }
        logger.debug("store open", metadata: ["store": "\(location.redacted)"])
    }

    // MARK: Statements

    static func connect(
        _ configuration: PostgresConnection.Configuration, logger: Logger
    ) throws -> PostgresConnection {
        try PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration,
            id: Int.random(in: 1...Int(Int32.max)), logger: logger
        ).wait()
    }

    @discardableResult
    func run(_ query: PostgresQuery) throws -> PostgresQueryResult {
        do {
            return try connection.query(query, logger: logger).wait()
        } catch {
            var failure = Self.describe(error, doing: "\(location.redacted)")
            // No answer from the server (the connection closed or failed), or the server going away (57P01 admin
            // shutdown, 57P02, 57P03 starting up) or a connection exception (08xxx): reconnect before the next call.
            if failure.sqlState == nil || failure.isConnectionState {
                broken = true
                failure.unreachable = true
                noteOutage(failure)
            }
            throw failure
        }
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
        _ = try? connection.close().wait()
        do {
            connection = try Self.connect(configuration, logger: logger)
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
                    "store": "\(location.redacted)", "outageSeconds": "\(Int(Date().timeIntervalSince(since).rounded()))",
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
    func transaction<T>(_ body: () throws -> (value: T, commit: Bool)) throws -> T {
        var attempt = 1
        while true {
            do {
                try run("BEGIN")
                let (value, commit) = try body()
                try run(commit ? "COMMIT" : "ROLLBACK")
                return value
            } catch let error as PostgresStoreError {
                if !broken { _ = try? connection.query("ROLLBACK", logger: logger).wait() }
                guard error.sqlState == "40001" || error.sqlState == "40P01", attempt < Self.maximumAttempts else {
                    throw error
                }
                logger.debug(
                    "store transaction retried", metadata: ["sqlstate": "\(error.sqlState ?? "")", "attempt": "\(attempt)"])
                Thread.sleep(forTimeInterval: Double.random(in: 0.001...0.005) * Double(attempt))
                attempt += 1
            } catch {
                if !broken { _ = try? connection.query("ROLLBACK", logger: logger).wait() }
                throw error
            }
        }
    }

    /// Runs `body` with the connection to itself, connecting again first if it was lost.
    func locked<T>(_ body: () throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        try reconnectIfNeeded()
        return try body()
    }

    /// Nothing to do: PostgreSQL's own autovacuum and checkpointer keep the database in shape.
    public func idleMaintenance() throws {}

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

    public func probe() -> String? {
        do {
            _ = try locked { try run("SELECT 1") }
            return nil
        } catch {
            return "\(error)"
        }
    }

}

