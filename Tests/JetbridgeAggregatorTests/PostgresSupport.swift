import Foundation
import Logging
import NIOPosix
import PostgresNIO
import Testing

#if canImport(Glibc)
    import Glibc
#endif

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

/// A client that stops as a frozen process does (SIGSTOP, a paused VM), seen from the server: on a TCP connection of
/// its own (trust authentication, as the test server has), it runs `BEGIN` and `sql` (which may lock rows), then
/// either sends a Parse and the first half of a Bind and nothing more (`midStatement`: the server waits for the rest),
/// or sends a query with a large answer and reads none of it (`notReading`: the server waits to send once the
/// socket's buffers are full). Its own session bounds are 1 s, to show they do not end it.
final class StalledClient: Sendable {
    enum Stop { case midStatement, notReading }

    private let socket: Int32

    init(url: String, applicationName: String, holding sql: String, stops: Stop = .midStatement) throws {
        let components = try #require(URLComponents(string: url))
        socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw TestPostgresError("socket: errno \(errno)") }
        do {
            try start(components, applicationName: applicationName, holding: sql, stops: stops)
        } catch {
            Glibc.close(socket)
            throw error
        }
    }

    private func start(_ components: URLComponents, applicationName: String, holding sql: String, stops: Stop) throws {
        // Longer than the setup's own wait for its row (30 s).
        var timeout = timeval(tv_sec: 35, tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if stops == .notReading {
            var small: Int32 = 4_096
            setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(components.port ?? 5432).bigEndian
        address.sin_addr.s_addr = inet_addr(components.host == "localhost" ? "127.0.0.1" : components.host ?? "")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw TestPostgresError("connect to \(components.host ?? ""): errno \(errno)") }
        var parameters: [UInt8] = []
        for (key, value) in [
            ("user", components.user ?? "postgres"), ("database", String(components.path.dropFirst())),
            ("application_name", applicationName), ("idle_in_transaction_session_timeout", "1000"),
            ("statement_timeout", "1000"),
        ] {
            parameters += Array(key.utf8) + [0] + Array(value.utf8) + [0]
        }
        parameters.append(0)
        try send(Self.int32(Int32(parameters.count + 8)) + Self.int32(196_608) + parameters)
        try readUntilReady("start-up")
        // Its own 1 s statement timeout would fail `sql` should it wait a second for a row: the setup waits longer.
        try send(
            Self.message(
                "Q",
                Array("BEGIN; SET LOCAL statement_timeout = 30000; \(sql); SET LOCAL statement_timeout = 1000".utf8)
                    + [0]))
        try readUntilReady(sql)
        switch stops {
        case .midStatement:
            try send(Self.message("P", [0] + Array("SELECT $1::text".utf8) + [0, 0, 0]))
            let value = [UInt8](repeating: UInt8(ascii: "x"), count: 100_000)
            let bind = Self.message("B", [0, 0, 0, 0, 0, 1] + Self.int32(Int32(value.count)) + value + [0, 0])
            try send(Array(bind.prefix(bind.count / 2)))
        case .notReading:
            try send(Self.message("Q", Array("SELECT repeat('x', 1000) FROM generate_series(1, 100000)".utf8) + [0]))
        }
    }

    /// Whether the server closed the connection (it reads the end of the stream, or an error and then the end).
    func closedByServer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
        }
    }

    func close() { Glibc.close(socket) }

    private func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(socket, $0.baseAddress, $0.count, 0) }
            guard sent > 0 else { throw TestPostgresError("send: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads messages until ReadyForQuery; an ErrorResponse fails with its text.
    private func readUntilReady(_ what: String) throws {
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            while pending.count >= 5 {
                let length = Int(pending[1...4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                guard pending.count >= length + 1 else { break }
                let type = pending[0]
                if type == UInt8(ascii: "E") {
                    throw TestPostgresError("\(what): \(String(decoding: pending[5..<length + 1], as: UTF8.self))")
                }
                if type == UInt8(ascii: "Z") { return }
                pending.removeFirst(length + 1)
            }
            let count = recv(socket, &buffer, buffer.count, 0)
            guard count > 0 else { throw TestPostgresError("\(what): the server closed the connection") }
            pending += buffer[..<count]
        }
    }

    private static func int32(_ value: Int32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }

    private static func message(_ type: Character, _ body: [UInt8]) -> [UInt8] {
        [type.asciiValue!] + int32(Int32(body.count + 4)) + body
    }
}
