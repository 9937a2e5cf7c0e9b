public import Foundation
public import JetbridgeModel
import Logging
import NIOCore
public import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

// The floor for the PostgreSQL store: the rows `PostgresStore` keeps for a set of records (orders with their
// MessagePack bytes, at their highest revision; scans as columns), loaded into its schema with `COPY … FROM STDIN`
// in one transaction. COPY is the server's bulk path: no statement per row, no conflict checks, one round trip per
// table. Any failure stops the benchmark, naming the step (a benchmark has no one to hand an error to).

/// A PostgreSQL server a benchmark may create databases on (the one its URL names), and the helpers it needs there:
/// databases created and dropped, settings, the postmaster's process (for CPU figures), and the COPY floor.
///
/// Not `Sendable`: used from the benchmark's main thread. Calls block on postgres-nio futures; never call them on an
/// event loop or on Swift's cooperative pool.
public final class PostgresCopy {
    /// `postgres://user[:password]@host[:port]/database`, or a Unix socket with `?host=/directory`.
    public let url: String
    private let components: URLComponents
    private let logger = Logger(label: "benchmark-postgres")

    /// - Parameter url: A database the benchmark can connect to and create other databases from.
    public init(url: String) {
        guard let components = URLComponents(string: url), components.scheme?.hasPrefix("postgres") == true,
            components.user != nil
        else { fatalError("not a postgres://user@host:port/database URL: \(url)") }
        self.url = url
        self.components = components
    }

    /// The URL of database `name` on the same server (same user, host, port and query).
    public func url(database name: String) -> String {
        var other = components
        other.path = "/\(name)"
        return other.string!
    }

    /// `url` without a password, to print.
    public var shown: String {
        var other = components
        if other.password != nil { other.password = "***" }
        return other.string!
    }

    /// A connection of its own to `database` (the URL's when nil).
    public func connect(database: String? = nil) -> PostgresConnection {
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let name = database ?? String(components.path.drop { $0 == "/" })
        let password = components.password ?? ProcessInfo.processInfo.environment["PGPASSWORD"]
        let configuration: PostgresConnection.Configuration
        if let directory = query["host"], components.host?.isEmpty ?? true {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(components.port ?? 5432)", username: components.user!,
                password: password, database: name)
        } else {
            configuration = .init(
                host: components.host ?? "127.0.0.1", port: components.port ?? 5432, username: components.user!,
                password: password, database: name, tls: .disable)
        }
        do {
            return try PostgresConnection.connect(
                on: PostgresConnection.defaultEventLoopGroup.any(), configuration: configuration, id: 1, logger: logger
            ).wait()
        } catch {
            fatalError("cannot connect to database \(name) of \(shown): \(String(reflecting: error))")
        }
    }

    /// Runs `sql` over `connection`; an error stops the benchmark.
    @discardableResult
    public func run(_ connection: PostgresConnection, _ sql: String) -> PostgresQueryResult {
        do {
            return try connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait()
        } catch {
            fatalError("\(sql): \(String(reflecting: error))")
        }
    }

    /// The first column of the first row of `sql`, as text (`SHOW fsync`, a count cast to text).
    public func value(_ connection: PostgresConnection, _ sql: String) -> String? {
        try? run(connection, sql).first?.decode(String.self)
    }

    /// Creates database `name` (dropping a leftover of that name first) and returns its URL.
    public func createDatabase(_ name: String) -> String {
        let admin = connect()
        defer { try? admin.close().wait() }
        run(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        run(admin, "CREATE DATABASE \(name)")
        return url(database: name)
    }

    /// Drops database `name`, closing any connection still on it.
    public func dropDatabase(_ name: String) {
        let admin = connect()
        defer { try? admin.close().wait() }
        run(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// The server's setting `name` (`fsync`, `synchronous_commit`, `server_version`), to print beside figures.
    public func setting(_ name: String) -> String {
        let admin = connect()
        defer { try? admin.close().wait() }
        return value(admin, "SHOW \(name)") ?? "?"
    }

    /// The postmaster's process id when the server runs on this machine: the parent of this connection's backend.
    /// Nil when the backend is not a local process (a server on another host).
    public func postmaster() -> pid_t? {
        let admin = connect()
        defer { try? admin.close().wait() }
        guard let backend = value(admin, "SELECT pg_backend_pid()::text").flatMap({ pid_t($0) }),
            let fields = Self.statFields(backend), fields.count > 1, let parent = pid_t(fields[1])
        else { return nil }
        return parent
    }

    /// Loads the rows into database `name` (whose schema exists): orders, then scans, in one transaction. Formatting
    /// the rows (``PostgresCopyRows``) is the caller's to time, as binding is in the store.
    /// - Parameter postmaster: The server's postmaster, to measure its CPU (``serverCPU(postmaster:)``) while the
    ///   loading connection's backend is still alive: read after closing, a backend not yet reaped would be missed.
    /// - Returns: Wall seconds, from `BEGIN` to the commit's answer, and the server's CPU seconds over them.
    public func load(
        _ rows: PostgresCopyRows, into name: String, postmaster: pid_t? = nil
    ) -> (seconds: Double, serverCPU: Double?) {
        let connection = connect(database: name)
        defer { try? connection.close().wait() }
        let logger = self.logger
        let orders = rows.orders
        let scans = rows.scans
        let cpu0 = postmaster.map(Self.serverCPU)
        let start = now()
        do {
            try Self.blocking {
                _ = try await connection.query("BEGIN", logger: logger)
                try await Self.copy(orders: orders, scans: scans, over: connection, logger: logger)
                _ = try await connection.query("COMMIT", logger: logger)
            }
        } catch {
            fatalError("COPY into \(name) of \(shown): \(String(reflecting: error))")
        }
        let seconds = now() - start
        let cpu = postmaster.flatMap { pid in cpu0.map { Self.serverCPU(postmaster: pid) - $0 } }
        return (seconds, cpu)
    }

    /// Loads `rows` over `connection` inside the transaction the caller opened (store-benchmark copies group by group
    /// in one transaction, timing each group's formatting and COPY); an error stops the benchmark.
    public func copy(_ rows: PostgresCopyRows, over connection: PostgresConnection) {
        let (logger, orders, scans) = (self.logger, rows.orders, rows.scans)
        do {
            try Self.blocking { try await Self.copy(orders: orders, scans: scans, over: connection, logger: logger) }
        } catch {
            fatalError("COPY of \(rows.orderCount + rows.scanCount) rows: \(String(reflecting: error))")
        }
    }

    /// Two `COPY … FROM STDIN` statements, orders then scans.
    private static func copy(
        orders: ByteBuffer, scans: ByteBuffer, over connection: PostgresConnection, logger: Logger
    ) async throws {
        try await connection.copyFrom(
            table: "orders", columns: ["id", "revision", "flight", "seat", "device", "record"], logger: logger
        ) { try await $0.write(orders) }
        try await connection.copyFrom(
            table: "scans", columns: ["id", "flight", "tag", "point", "scanned_at", "owner", "weight", "device"],
            logger: logger
        ) { try await $0.write(scans) }
    }

    /// The one integer `sql` answers; anything else stops the benchmark.
    public func integer(_ connection: PostgresConnection, _ sql: String) -> Int {
        guard let value = try? run(connection, sql).first?.decode(Int.self) else { fatalError("\(sql): no integer") }
        return value
    }

    /// The server processes serving `database` (the backends of its connections), found from another connection.
    public func backends(of database: String) -> [pid_t] {
        let admin = connect()
        defer { try? admin.close().wait() }
        let rows = run(
            admin, "SELECT pid FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()")
        return rows.compactMap { try? $0.decode(Int32.self) }
    }

    /// User plus system CPU seconds of process `pid` alone (a backend), from /proc; 0 when it is gone.
    public static func processCPU(_ pid: pid_t) -> Double {
        // After "pid (comm)": the state is the first field; utime and stime are fields 14 and 15 of proc(5).
        guard let fields = statFields(pid), fields.count > 12, let user = Double(fields[11]),
            let system = Double(fields[12])
        else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// User plus system CPU seconds of the PostgreSQL server whose postmaster is `postmaster`: the postmaster, its
    /// live children (backends, writers, checkpointer, autovacuum) and, through the postmaster's `cutime`/`cstime`,
    /// the children it has already reaped (a backend whose client disconnected). Differences of two readings are the
    /// server's CPU in between.
    public static func serverCPU(postmaster: pid_t) -> Double {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        // After "pid (comm)": state, ppid, … utime is field 14, stime 15, cutime 16, cstime 17 (1-based in proc(5)).
        func times(_ fields: [Substring], children: Bool) -> Double {
            let wanted = children ? 11...14 : 11...12
            guard fields.count > wanted.upperBound else { return 0 }
            return wanted.reduce(0) { $0 + (Double(fields[$1]) ?? 0) } / ticks
        }
        guard let own = statFields(postmaster) else { return 0 }
        var total = times(own, children: true)
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in processes {
            guard let pid = pid_t(entry), pid != postmaster, let fields = statFields(pid), fields.count > 1,
                fields[1] == Substring(String(postmaster))
            else { continue }
            total += times(fields, children: false)
        }
        return total
    }

    /// The fields of /proc/`pid`/stat after "pid (comm)": state first, then ppid.
    static func statFields(_ pid: pid_t) -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    /// Waits for `body`, run as a task: postgres-nio's COPY is async only, and a benchmark's timing loop is not.
    private static func blocking(_ body: @escaping @Sendable () async throws -> Void) throws {
        final class Box: @unchecked Sendable { var error: (any Error)? }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        Task {
            do { try await body() } catch { box.error = error }
            done.signal()
        }
        done.wait()
        if let error = box.error { throw error }
    }
}

/// Rows in PostgreSQL's COPY text format (a tab between columns, a newline after each row) for the columns
/// `PostgresStore` writes: orders with their MessagePack bytes as `bytea` hex, scans as columns.
///
/// Built from a whole run (``init(_:)``), an order keeps its highest revision (a correction replaces the row, it does
/// not add one) and a record seen twice is one row; appended one by one (``append(_:bytes:)``), every record is a
/// row, for data with no repeats.
public struct PostgresCopyRows: Sendable {
    var orders = ByteBuffer()
    var scans = ByteBuffer()
    /// Rows written to each table.
    public private(set) var orderCount = 0
    public private(set) var scanCount = 0

    private static let hex = Array("0123456789abcdef".utf8)

    /// No rows yet, with room for about `capacity` of each kind.
    public init(capacity: Int) {
        orders.reserveCapacity(capacity * 300)
        scans.reserveCapacity(capacity * 130)
    }

    /// Appends the row of `record`.
    /// - Parameters:
    ///   - record: An order or a scan.
    ///   - bytes: Its MessagePack bytes (stored for an order).
    public mutating func append(_ record: Record, bytes: Data) {
        switch record {
        case .order(let order): appendOrder(order, bytes: bytes)
        case .scan(let scan): appendScan(scan)
        }
    }

    /// - Parameter records: Records with their MessagePack bytes, in any order.
    public init(_ records: [(record: Record, bytes: Data)]) {
        // The revision each order ends at, so that only that one is written (COPY has no ON CONFLICT).
        var latest: [UUID: Int] = [:]
        for (record, _) in records {
            if case .order(let order) = record, order.revision > latest[order.id] ?? 0 {
                latest[order.id] = order.revision
            }
        }
        let orderBytes = records.reduce(0) { $0 + $1.bytes.count }
        orders.reserveCapacity(orderBytes * 2 + records.count * 100)
        scans.reserveCapacity(records.count * 130)
        var seen: Set<UUID> = []
        seen.reserveCapacity(records.count)
        for (record, bytes) in records {
            switch record {
            case .order(let order):
                guard latest[order.id] == order.revision, seen.insert(order.id).inserted else { continue }
                appendOrder(order, bytes: bytes)
            case .scan(let scan):
                guard seen.insert(scan.id).inserted else { continue }
                appendScan(scan)
            }
        }
    }

    private mutating func appendOrder(_ order: Order, bytes: Data) {
        orderCount += 1
        orders.writeString(order.id.uuidString.lowercased())
        orders.writeString("\t\(order.revision)\t")
        Self.text(order.flight.rawValue, into: &orders)
        orders.writeInteger(UInt8(ascii: "\t"))
        Self.text(order.seat.rawValue, into: &orders)
        orders.writeInteger(UInt8(ascii: "\t"))
        Self.text(order.device, into: &orders)
        // bytea in hex form, its backslash doubled by the text format's escaping.
        orders.writeString("\t\\\\x")
        orders.writeWithUnsafeMutableBytes(minimumWritableBytes: bytes.count * 2) { target in
            bytes.withUnsafeBytes { source in
                for (n, byte) in source.enumerated() {
                    target[2 * n] = Self.hex[Int(byte >> 4)]
                    target[2 * n + 1] = Self.hex[Int(byte & 0x0F)]
                }
            }
            return bytes.count * 2
        }
        orders.writeInteger(UInt8(ascii: "\n"))
    }

    private mutating func appendScan(_ scan: Scan) {
        scanCount += 1
        scans.writeString(scan.id.uuidString.lowercased())
        scans.writeInteger(UInt8(ascii: "\t"))
        Self.text(scan.flight.rawValue, into: &scans)
        scans.writeString("\t\(scan.tag.id.uuidString.lowercased())\t\(scan.point == .origin ? 0 : 1)\t")
        // Double's description is the shortest text that reads back to the same value, as the store binds it.
        scans.writeString("\(scan.scannedAt.timeIntervalSinceReferenceDate)\t")
        Self.text(scan.tag.owner.initial + scan.tag.owner.family, into: &scans)
        scans.writeString("\t\(scan.tag.weight)\t")
        Self.text(scan.device, into: &scans)
        scans.writeInteger(UInt8(ascii: "\n"))
    }

    /// `text` with the COPY text format's escapes (backslash, tab, newline, carriage return).
    private static func text(_ text: String, into buffer: inout ByteBuffer) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): buffer.writeString("\\\\")
            case UInt8(ascii: "\t"): buffer.writeString("\\t")
            case UInt8(ascii: "\n"): buffer.writeString("\\n")
            case UInt8(ascii: "\r"): buffer.writeString("\\r")
            default: buffer.writeInteger(byte)
            }
        }
    }
}
