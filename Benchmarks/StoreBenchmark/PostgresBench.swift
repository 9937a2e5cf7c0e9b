import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import Logging
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

// The PostgreSQL half of store-benchmark (`--postgres [URL]`): the same groups applied through `PostgresStore.apply`,
// and the same rows loaded into the same schema with `COPY … FROM STDIN` (the floor for this engine), each in a
// database of its own created on the server the URL names and dropped afterwards.

/// A server the benchmark may create databases on, and the connections it opens there.
struct BenchmarkServer {
    let url: String
    let logger = Logger(label: "store-benchmark")

    /// The URL of database `name` on the same server.
    func url(database name: String) -> String {
        var components = URLComponents(string: url)!
        components.path = "/\(name)"
        return components.string!
    }

    /// A connection of its own to `database` (the URL's when `nil`).
    func connect(database: String? = nil) -> PostgresConnection {
        let components = URLComponents(string: url)!
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        let name = database ?? String(components.path.dropFirst())
        let password = components.password ?? ProcessInfo.processInfo.environment["PGPASSWORD"]
        let configuration: PostgresConnection.Configuration
        if let directory = query["host"], components.host?.isEmpty ?? true {
            configuration = .init(
                unixSocketPath: "\(directory)/.s.PGSQL.\(components.port ?? 5432)", username: components.user!,
                password: password, database: name)
        } else {
            configuration = .init(
                host: components.host!, port: components.port ?? 5432, username: components.user!,
                password: password, database: name, tls: .disable)
        }
        do {
            return try PostgresConnection.connect(
                on: PostgresConnection.defaultEventLoopGroup.any(), configuration: configuration, id: 1, logger: logger
            ).wait()
        } catch {
            fatalError("cannot connect to \(name) on the server of --postgres: \(String(reflecting: error))")
        }
    }

    /// Runs `sql` over `connection`, stopping the benchmark on an error.
    @discardableResult
    func run(_ connection: PostgresConnection, _ sql: String) -> PostgresQueryResult {
        do {
            return try connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).wait()
        } catch {
            fatalError("\(sql): \(String(reflecting: error))")
        }
    }

    /// The one integer `sql` answers.
    func integer(_ connection: PostgresConnection, _ sql: String) -> Int {
        guard let value = try? run(connection, sql).first?.decode(Int.self) else { fatalError("\(sql): no integer") }
        return value
    }

    func close(_ connection: PostgresConnection) {
        try? connection.close().wait()
    }

    /// Creates database `name` (dropping a leftover of that name first) and returns its URL.
    func createDatabase(_ name: String) -> String {
        let admin = connect()
        defer { try? admin.close().wait() }
        run(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        run(admin, "CREATE DATABASE \(name)")
        return url(database: name)
    }

    func dropDatabase(_ name: String) {
        let admin = connect()
        defer { try? admin.close().wait() }
        run(admin, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// The server's setting `name` (`fsync`, `synchronous_commit`, `server_version`), to print beside the figures.
    func setting(_ name: String) -> String {
        let admin = connect()
        defer { try? admin.close().wait() }
        return (try? run(admin, "SHOW \(name)").first?.decode(String.self)) ?? "?"
    }

    /// The server processes serving `database` (the backends of its connections), found from another connection.
    func backends(of database: String) -> [Int32] {
        let admin = connect()
        defer { try? admin.close().wait() }
        let rows = run(
            admin, "SELECT pid FROM pg_stat_activity WHERE datname = '\(database)' AND pid <> pg_backend_pid()")
        return rows.compactMap { try? $0.decode(Int32.self) }
    }
}

/// User plus system CPU seconds of process `pid` (a PostgreSQL backend on this machine), from /proc.
func processCPU(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let end = stat.lastIndex(of: ")")
    else { return 0 }
    // After "pid (comm)": field 3 is the state; utime and stime are fields 14 and 15.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Waits for `body`, run as a task: postgres-nio's COPY is async only, and the benchmark's timing loop is not.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// Where a task leaves its result for the thread that waits on it (written before the semaphore is signalled).
final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// Rows in PostgreSQL's COPY text format (tab between columns, a newline after each row, `\N` never needed here):
/// the columns `PostgresStore` writes for each record, orders with their MessagePack bytes as `bytea` hex.
struct CopyRows {
    var orders = ByteBuffer()
    var scans = ByteBuffer()

    private static let hex = Array("0123456789abcdef".utf8)

    init(capacity: Int) {
        orders.reserveCapacity(capacity * 300)
        scans.reserveCapacity(capacity * 130)
    }

    mutating func append(_ incoming: IncomingBatch.Element) {
        switch incoming.record {
        case .order(let order):
            orders.writeString(order.id.uuidString.lowercased())
            orders.writeString("\t\(order.revision)\t")
            Self.text(order.flight.rawValue, into: &orders)
            orders.writeInteger(UInt8(ascii: "\t"))
            Self.text(order.seat.rawValue, into: &orders)
            orders.writeInteger(UInt8(ascii: "\t"))
            Self.text(order.device, into: &orders)
            // bytea in hex form, its backslash doubled by the text format's escaping.
            orders.writeString("\t\\\\x")
            let bytes = incoming.bytes
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
        case .scan(let scan):
            scans.writeString(scan.id.uuidString.lowercased())
            scans.writeInteger(UInt8(ascii: "\t"))
            Self.text(scan.flight.rawValue, into: &scans)
            scans.writeString("\t\(scan.tag.id.uuidString.lowercased())\t\(scan.point == .origin ? 0 : 1)\t")
            scans.writeString("\(scan.scannedAt.timeIntervalSinceReferenceDate)\t")
            Self.text(scan.tag.owner.initial + scan.tag.owner.family, into: &scans)
            scans.writeString("\t\(scan.tag.weight)\t")
            Self.text(scan.device, into: &scans)
            scans.writeInteger(UInt8(ascii: "\n"))
        }
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

/// Loads `rows` with two `COPY … FROM STDIN` statements (orders, then scans) on `connection`.
func copy(_ rows: CopyRows, over connection: PostgresConnection, logger: Logger) throws {
    try blocking {
        try await connection.copyFrom(
            table: "orders", columns: ["id", "revision", "flight", "seat", "device", "record"], logger: logger
        ) { try await $0.write(rows.orders) }
        try await connection.copyFrom(
            table: "scans", columns: ["id", "flight", "tag", "point", "scanned_at", "owner", "weight", "device"],
            logger: logger
        ) { try await $0.write(rows.scans) }
    }
}
