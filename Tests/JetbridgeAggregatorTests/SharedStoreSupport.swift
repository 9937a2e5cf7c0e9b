import Foundation
import JetbridgeTestKit
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeProtocol
import Logging
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// A `jetbridge-aggregator serve` process (the built executable) on a store given by `--store`, in a home of its own,
/// insecure, on loopback ports the kernel chooses; its log (JSON lines) in the home.
final class ServeProcess: @unchecked Sendable {
    let process: ChildProcess
    let home: URL
    let log: URL
    let dataEndpoint: String
    let acksEndpoint: String
    let metricsEndpoint: String?
    /// `HOST:PORT` of its console (`console: true`).
    let consoleEndpoint: String?

    /// Starts it and waits for its start-up line.
    /// - Parameters:
    ///   - openFiles: When set, the process starts with this open-files limit (`serve` raises the soft one to the
    ///     hard one), through util-linux's `prlimit`, which execs it (the pid is serve's).
    ///   - environment: Added to this process's environment for `serve`.
    ///   - configuration: When set, written as the home's `aggregator.json` first.
    init(
        store: String, in parent: URL, name: String, metrics: Bool = false, console: Bool = false, openFiles: (soft: Int, hard: Int)? = nil,
        environment extra: [String: String] = [:], configuration: String? = nil
    ) async throws {
        home = parent.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        if let configuration {
            try Data(configuration.utf8).write(to: home.appendingPathComponent("aggregator.json"))
        }
        let arguments =
            [
                "serve", "--home", home.path, "--store", store, "--insecure", "--log-format", "json",
                "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*",
            ] + (metrics ? ["--metrics", "127.0.0.1:0"] : []) + (console ? ["--console", "127.0.0.1:0"] : [])
        let environment = ["JETBRIDGE_LOG_LEVEL": "info"].merging(extra) { $1 }
        let run =
            if let openFiles {
                try ExecutableRun(
                    executable: URL(fileURLWithPath: "/usr/bin/prlimit"),
                    ["--nofile=\(openFiles.soft):\(openFiles.hard)", "--", AggregatorCLITests.binary.path] + arguments,
                    in: home, environment: environment)
            } else {
                try ExecutableRun(executable: AggregatorCLITests.binary, arguments, in: home, environment: environment)
            }
        process = run.process
        log = run.log
        var text = ""
        let process = process
        let log = log
        try await waitUntil("serve logs its start-up line") {
            text = try String(contentsOf: log, encoding: .utf8)
            return text.contains(#""message":"aggregator serving""#) || !process.isRunning
        }
        guard process.isRunning else {
            throw TestPostgresError("serve exited \(process.terminationStatus) at start: \(text)")
        }
        dataEndpoint = String(try #require(text.firstMatch(of: /"data":"(tcp:\/\/[0-9.]+:[0-9]+)"/)?.output.1))
        acksEndpoint = String(try #require(text.firstMatch(of: /"acks":"(tcp:\/\/[0-9.]+:[0-9]+)"/)?.output.1))
        metricsEndpoint = text.firstMatch(of: /"metrics":"http:\/\/([0-9.]+:[0-9]+)\/metrics"/).map { String($0.output.1) }
        consoleEndpoint = text.firstMatch(of: /"console":"http:\/\/([0-9.]+:[0-9]+)\/"/).map { String($0.output.1) }
    }

    var logText: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

    var pid: Int32 { process.processIdentifier }

    /// The local ports of this process's TCP connections to `port` (its PostgreSQL sessions, as
    /// `pg_stat_activity.client_port` shows them): its socket inodes from `/proc/<pid>/fd`, matched in
    /// `/proc/<pid>/net/tcp` and `tcp6`.
    func localPorts(connectedTo port: Int) -> Set<Int> {
        let fds = "/proc/\(pid)/fd"
        var inodes: Set<String> = []
        for fd in (try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? [] {
            // readlink(2) itself: Foundation's destinationOfSymbolicLink makes a path of `socket:[…]`.
            var buffer = [UInt8](repeating: 0, count: 256)
            let count = readlink("\(fds)/\(fd)", &buffer, buffer.count)
            guard count > 0 else { continue }
            let target = String(decoding: buffer[..<count], as: UTF8.self)
            guard target.hasPrefix("socket:[") else { continue }
            inodes.insert(String(target.dropFirst(8).dropLast()))
        }
        var ports: Set<Int> = []
        for table in ["tcp", "tcp6"] {
            let text = procText("/proc/\(pid)/net/\(table)")
            for line in text.split(separator: "\n").dropFirst() {
                let columns = line.split(separator: " ")
                guard columns.count > 9, inodes.contains(String(columns[9])),
                    let local = columns[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                    let remote = columns[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }), remote == port
                else { continue }
                ports.insert(local)
            }
        }
        return ports
    }

    /// How many log lines carry `message`.
    func count(_ message: String) -> Int {
        logText.split(separator: "\n").filter { $0.contains(#""message":"\#(message)"#) }.count
    }

    /// SIGTERM, then waits (at most 20 s) for the exit; SIGKILL after that.
    func stop() async throws {
        guard process.isRunning else { return }
        process.terminate()
        let process = process
        try await waitUntil("serve exits") { !process.isRunning }
    }

    /// SIGKILL now, if it still runs: for a test that may end while objects still refer to it (its deinit would
    /// not run, and the process would outlive the test run).
    func killNow() { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

    deinit { killNow() }
}

/// A file under `/proc` read to its end: they show a size of 0, and reading by size reads nothing.
func procText(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
}

/// A device on raw ZeroMQ sockets (insecure), connected to one aggregator: PUSH for batches, DEALER for acks.
final class RawDevice: @unchecked Sendable {
    let context: ZeroMQContext
    let push: Socket
    let dealer: Socket
    let id: String

    init(id: String, to serve: ServeProcess) throws {
        self.id = id
        context = try ZeroMQContext()
        push = try context.socket(.push)
        dealer = try context.socket(.dealer)
        for socket in [push, dealer] { try socket.set(.linger, .zero) }
        try dealer.set(.routingID, Data(id.utf8))
        try dealer.connect(serve.acksEndpoint)
        try push.connect(serve.dataEndpoint)
        try dealer.send(WireCoding.encode(Hello(device: id)))
    }

    func send(_ batch: OutgoingBatch) throws { try push.send(batch.frames()) }

    /// The next ack, or nil after `timeout`.
    func ack(timeout: Duration = .seconds(20)) throws -> Ack? {
        let ready = try poll([PollItem(dealer, .readable)], timeout: timeout)
        guard ready[0].contains(.readable), let frame = try dealer.receive() else { return nil }
        return try WireCoding.decode(Ack.self, from: frame)
    }

    /// Sends `batch` until the ground answers something other than `retry`, as the agent does: again after 0.1 s on
    /// `retry`, and when no answer comes in 10 s; at most 400 sends.
    /// - Returns: The answer, and how many `retry` answers came before it.
    func store(_ batch: OutgoingBatch) throws -> (ack: Ack, retries: Int) {
        var retries = 0
        for _ in 0..<400 {
            try send(batch)
            guard let ack = try ack(timeout: .seconds(10)) else { continue }
            if ack.status == .retry {
                retries += 1
                usleep(100_000)
                continue
            }
            return (ack, retries)
        }
        throw TestPostgresError("batch \(batch.header.label) never stored")
    }

    func close() {
        try? push.close(linger: .zero)
        try? dealer.close(linger: .zero)
        context.terminate()
    }
}

/// An HTTP GET on loopback; the status code, or nil when nothing answers.
func httpStatus(_ endpoint: String, _ path: String) -> Int? {
    let parts = endpoint.split(separator: ":")
    guard parts.count == 2, let port = UInt16(parts[1]) else { return nil }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    let request = "GET \(path) HTTP/1.1\r\nHost: \(endpoint)\r\nConnection: close\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = recv(fd, &buffer, buffer.count, 0)
    guard count > 12 else { return nil }
    return Int(String(decoding: buffer[9..<12], as: UTF8.self))
}

/// A PostgreSQL cluster of the test's own (Tests/postgres/start-throwaway.sh), for a test that stops and starts the
/// server: the shared test cluster must stay up for the tests that run beside it.
struct OwnPostgresCluster {
    let url: String
    let directory: String
    static let bin = ProcessInfo.processInfo.environment["PG_BIN"] ?? "/usr/lib/postgresql/15/bin"

    init() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("postgres/start-throwaway.sh").path
        let output = try Self.shell([script])
        guard let url = output.firstMatch(of: /JETBRIDGE_TEST_POSTGRES=(\S+)/)?.output.1,
            let directory = output.firstMatch(of: /JETBRIDGE_TEST_POSTGRES_DIR=(\S+)/)?.output.1
        else { throw TestPostgresError("start-throwaway.sh printed no URL: \(output)") }
        self.url = String(url)
        self.directory = String(directory)
    }

    /// `pg_ctl stop -m fast` (connections are terminated, as in a restart for an upgrade) or `start`.
    func pgctl(_ action: String) throws {
        var arguments = ["\(Self.bin)/pg_ctl", "-D", "\(directory)/data", "-w"]
        // A start takes the options start-throwaway.sh gave (pg_ctl keeps them for `restart` only).
        let port = URLComponents(string: url)?.port ?? 5432
        let options = "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        arguments += action == "stop" ? ["-m", "fast", "stop"] : ["-l", "\(directory)/server.log", "-o", options, "start"]
        if getuid() == 0 { arguments = ["runuser", "-u", "postgres", "--"] + arguments }
        _ = try Self.shell(arguments)
    }

    /// Sends `signal` to every process of the cluster: the postmaster (from `postmaster.pid`) and its children
    /// (SIGSTOP freezes the server as a hung host would: connections stay open, nothing answers).
    /// - Returns: The pids signalled.
    @discardableResult
    func signalAll(_ signal: Int32) throws -> [Int32] {
        let text = try String(contentsOfFile: "\(directory)/data/postmaster.pid", encoding: .utf8)
        guard let postmaster = text.split(separator: "\n").first.flatMap({ Int32($0) }) else {
            throw TestPostgresError("no pid in \(directory)/data/postmaster.pid")
        }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry),
                case let stat = procText("/proc/\(entry)/stat"),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // pid (comm) state ppid …: the fields after the command's closing parenthesis.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, Int32(fields[1]) == postmaster { pids.append(pid) }
        }
        // Children first when stopping (the postmaster cannot start new ones meanwhile), the postmaster first when
        // continuing.
        for pid in signal == SIGCONT ? pids : pids.reversed() { kill(pid, signal) }
        return pids
    }

    func remove() {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("postgres/stop-throwaway.sh").path
        _ = try? Self.shell([script, directory])
    }

    /// Runs a program to its end and returns its output, with none of this process's descriptors but its output.
    /// posix_spawn and waitpid rather than Foundation's Process: `pg_ctl start` leaves a server behind, and Process did
    /// not see the script end (it stayed a zombie).
    @discardableResult
    static func shell(_ arguments: [String]) throws -> String {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("jb-pg-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        // `pg_ctl start` leaves a server running: it must not hold this process's sockets open.
        let closing = ChildProcess.closeInheritedDescriptors(&actions)
        guard closing == 0 else { throw TestPostgresError("cannot close inherited descriptors: \(closing)") }
        let argv = (["/usr/bin/env"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, environ)
        guard spawned == 0 else { throw TestPostgresError("cannot run \(arguments): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw TestPostgresError("\(arguments.joined(separator: " ")) exited with status \(status): \(text)")
        }
        return text
    }
}
