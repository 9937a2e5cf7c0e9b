import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Testing

/// The PostgreSQL server the store tests use: `JETBRIDGE_TEST_POSTGRES` names a database on it
/// (`postgres://user@host:port/database`; `.ci/run` and `Tests/postgres/start-throwaway.sh` start a throwaway one).
///
/// Without the variable the tests that need it are skipped with that reason, except in CI (`CI=true`), where they
/// run and fail: a CI run never passes by skipping them.
enum TestPostgres {
    static let url = ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"].flatMap { $0.isEmpty ? nil : $0 }
    static let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
    /// Whether tests that need PostgreSQL run (and, in CI without a server, fail).
    static let enabled = url != nil || inCI

    /// A new, empty database on the test server for one test (so tests run in parallel), and how to drop it.
    static func freshDatabase() throws -> FreshDatabase {
        guard let url else {
            throw TestPostgresError(
                "CI=true but JETBRIDGE_TEST_POSTGRES is not set: .ci/run must start PostgreSQL "
                    + "(Tests/postgres/start-throwaway.sh) so that the PostgreSQL store tests run")
        }
        let name = "jb_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try admin(url, "CREATE DATABASE \(name)")
        var components = URLComponents(string: url)!
        components.path = "/\(name)"
        return FreshDatabase(url: components.string!, name: name, adminURL: url)
    }

    /// A connection of its own to the database `url` names.
    static func connect(_ url: String) throws -> PostgresConnection {
        let components = URLComponents(string: url)!
        let configuration = PostgresConnection.Configuration(
            host: components.host!, port: components.port ?? 5432, username: components.user!,
            password: components.password ?? ProcessInfo.processInfo.environment["PGPASSWORD"],
            database: String(components.path.dropFirst()), tls: .disable)
        return try PostgresConnection.connect(
            on: MultiThreadedEventLoopGroup.singleton.next(), configuration: configuration, id: 0,
            logger: Logger(label: "test-admin")
        ).wait()
    }

    /// Sessions of `database` waiting for a lock.
    static func lockWaiters(_ database: FreshDatabase) throws -> Int {
        let connection = try connect(database.adminURL)
        defer { try? connection.close().wait() }
        let rows = try connection.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = \(database.name) AND wait_event_type = 'Lock'",
            logger: Logger(label: "test-admin")
        ).wait()
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// The store's sessions on `database` (their `application_name` is `jetbridge host:pid`): each server process's
    /// pid and the client's TCP port (nil over a Unix socket).
    static func storeSessions(_ database: FreshDatabase) throws -> [(pid: Int32, port: Int?)] {
        let connection = try connect(database.adminURL)
        defer { try? connection.close().wait() }
        let rows = try connection.query(
            """
            SELECT pid, client_port FROM pg_stat_activity
            WHERE datname = \(database.name) AND application_name LIKE 'jetbridge %' ORDER BY backend_start
            """,
            logger: Logger(label: "test-admin")
        ).wait()
        return try rows.map { row in
            let (pid, port) = try row.decode((Int32, Int32?).self)
            return (pid, port.map(Int.init))
        }
    }

    /// Runs one statement on the database `url` names, over its own connection.
    static func admin(_ url: String, _ sql: String) throws {
        let connection = try connect(url)
        defer { try? connection.close().wait() }
        _ = try connection.query(PostgresQuery(unsafeSQL: sql), logger: Logger(label: "test-admin")).wait()
    }
}

struct FreshDatabase {
    let url: String
    let name: String
    let adminURL: String

    func drop() { try? TestPostgres.admin(adminURL, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
}

struct TestPostgresError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` on a thread of its own and returns what it returns: the stores block on their engines, and Swift's
/// cooperative pool (two threads here) must stay free for the async tests that run beside these.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}
