import Foundation
import JetbridgeTestKit
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Every ZeroMQ test, run one at a time: they share two CPU cores with the libzmq I/O threads they start.
@Suite(.serialized) struct ZeroMQTests {}

/// Runs `body`, failing with `TimedOut` if it has not finished after `seconds` (the test kit's `withTimeout`).
func withTimeout<T: Sendable>(
    _ what: String, seconds: Double = 20, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await JetbridgeTestKit.withTimeout(what, seconds: seconds, body)
}

/// Waits for the first monitor event that `matches` (the test kit's `firstEvent`, under this target's name).
func firstEvent(
    in events: AsyncStream<MonitorEvent>,
    _ what: String,
    where matches: @escaping @Sendable (MonitorEvent) -> Bool
) async throws -> MonitorEvent {
    try await JetbridgeTestKit.firstEvent(in: events, what, where: matches)
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

/// A per-test temporary directory for ipc endpoints, removed afterwards: under /tmp, with a short prefix, because an
/// ipc path may be 107 bytes at most.
func withTemporaryDirectory<T>(_ body: (URL) async throws -> T) async throws -> T {
    try await JetbridgeTestKit.withTemporaryDirectory(prefix: "zmqt", in: URL(fileURLWithPath: "/tmp"), body)
}

/// The `zeromq-test-peer` helper process, which SwiftPM builds next to the test bundle.
final class Peer {
    let process: ChildProcess
    private let output = Pipe()
    private var pending = ""

    static func executable() throws -> URL { try BuiltExecutable.url("zeromq-test-peer") }

    init(_ arguments: [String]) throws {
        process = try ChildProcess(try Self.executable(), arguments, stdout: .pipe(output))
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
