import Foundation
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Every ZeroMQ test, run one at a time: they share two CPU cores with the libzmq I/O threads they start.
@Suite(.serialized) struct ZeroMQTests {}

/// A wait that took far longer than any healthy run; only bounds a hang, never measures speed.
struct TimedOut: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Runs `body`, failing with `TimedOut` if it has not finished after `seconds`.
func withTimeout<T: Sendable>(
    _ what: String,
    seconds: Double = 20,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() else { throw TimedOut(what: what) }
        return result
    }
}

/// Waits for the first monitor event that `matches`.
func firstEvent(
    in events: AsyncStream<MonitorEvent>,
    _ what: String,
    where matches: @escaping @Sendable (MonitorEvent) -> Bool
) async throws -> MonitorEvent {
    try await withTimeout(what) {
        for await event in events where matches(event) { return event }
        throw TimedOut(what: "\(what) (monitor ended)")
    }
}

/// A fresh context, sockets bounded so a broken test fails instead of hanging.
func makeSocket(_ context: ZeroMQContext, _ type: SocketType) throws -> Socket {
    let socket = try context.socket(type)
    try socket.set(.linger, .zero)
    try socket.set(.receiveTimeout, .seconds(20))
    try socket.set(.sendTimeout, .seconds(20))
    return socket
}

/// Binds to a free loopback port and returns the resolved endpoint.
func bindLoopback(_ socket: Socket) throws -> String {
    try socket.bind("tcp://127.0.0.1:*")
    return try socket.lastEndpoint
}

/// A per-test temporary directory for ipc endpoints, removed afterwards.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    let directory = URL(fileURLWithPath: "/tmp").appendingPathComponent("zmqt-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// The `zeromq-test-peer` helper process, which SwiftPM builds next to the test bundle.
final class Peer {
    let process = Process()
    private let output = Pipe()
    private var pending = ""

    static func executable() throws -> URL {
        var directories: [URL] = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
        if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        for directory in directories {
            var candidate = directory
            for _ in 0..<4 {
                let peer = candidate.appendingPathComponent("zeromq-test-peer")
                if FileManager.default.isExecutableFile(atPath: peer.path) { return peer }
                candidate.deleteLastPathComponent()
            }
        }
        // Last resort: the package's own build directory, found from this source file.
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { root.deleteLastPathComponent() }
        let fallback = root.appendingPathComponent(".build/debug/zeromq-test-peer")
        guard FileManager.default.isExecutableFile(atPath: fallback.path) else {
            throw TimedOut(what: "zeromq-test-peer executable (build it with `swift build`)")
        }
        return fallback
    }

    init(_ arguments: [String]) throws {
        process.executableURL = try Self.executable()
        process.arguments = arguments
        process.standardOutput = output
        try process.run()
    }

    /// Blocks until the peer prints `line`; false if it exits first.
    func waitForLine(_ line: String) -> Bool {
        while true {
            if let range = pending.range(of: line + "\n") {
                pending.removeSubrange(pending.startIndex..<range.upperBound)
                return true
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return false }
            pending += String(decoding: chunk, as: UTF8.self)
        }
    }

    func killHard() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { killHard() }
    }
}
