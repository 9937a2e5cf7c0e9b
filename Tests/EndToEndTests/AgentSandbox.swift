import FileQueue
import Foundation
import JetbridgeModel
import JetbridgeTestKit
import MessagePack
import Testing

/// A temporary directory in which tests run the built `jetbridge-agent` the way a person would.
final class AgentSandbox: Sendable {
    /// The result of one process run.
    struct Run: CustomStringConvertible, Sendable {
        var status: Int32
        var stdout: String
        var stderr: String

        var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }
    }

    /// The temporary working directory (the processes' current directory); removed at the end.
    let directory: URL
    /// The agent home that ``agent(_:stdin:environment:)`` passes with `--home`.
    var home: URL { directory.appendingPathComponent("home") }
    var queue: URL { home.appendingPathComponent("queue") }

    init() throws {
        directory = try TemporaryDirectory.create(prefix: "jetbridge-e2e")
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `jetbridge-agent --home <home> ARGS` in ``directory``.
    func agent(_ arguments: [String], stdin: Data? = nil, environment: [String: String] = [:]) throws -> Run {
        try Self.run(
            Self.executable("jetbridge-agent"), ["--home", home.path] + arguments, in: directory, stdin: stdin,
            environment: environment)
    }

    /// Runs `jetbridge-agent ARGS` without adding `--home`.
    func agentWithoutHome(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        try Self.run(Self.executable("jetbridge-agent"), arguments, in: directory, environment: environment)
    }

    /// Runs `jetbridge-aggregator ARGS` in ``directory`` (no home added).
    func aggregator(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        try Self.run(Self.executable("jetbridge-aggregator"), arguments, in: directory, environment: environment)
    }

    /// Runs `jetbridge-queue ARGS` in ``directory``.
    func queueTool(_ arguments: [String], environment: [String: String] = [:]) throws -> Run {
        try Self.run(Self.executable("jetbridge-queue"), arguments, in: directory, environment: environment)
    }

    /// Writes a file under ``directory``, creating its parents.
    @discardableResult
    func write(_ data: Data, to name: String) throws -> URL {
        let url = directory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url)
        return url
    }

    @discardableResult
    func write(_ text: String, to name: String) throws -> URL {
        try write(Data(text.utf8), to: name)
    }

    /// Every record in the home's queue, in sequence order (read-only; empty when there is no queue).
    func records() throws -> [FileQueue.Record] {
        guard FileManager.default.fileExists(atPath: queue.path) else { return [] }
        var records: [FileQueue.Record] = []
        try FileQueue.forEachRecord(directory: queue) { sequence, payload in
            records.append(FileQueue.Record(sequence: sequence, payload: Data(payload)))
        }
        return records
    }

    /// The queue's records decoded as Jetbridge records.
    func decodedRecords() throws -> [Record] {
        try records().map { try MessagePackDecoder().decode(Record.self, from: $0.payload) }
    }

    /// Runs a program to its end (the test kit's ``ExecutableRun``: output to files, the developer's settings unset).
    static func run(
        _ executable: URL, _ arguments: [String], in directory: URL, stdin: Data? = nil,
        environment: [String: String] = [:]
    ) throws -> Run {
        let finished = try ExecutableRun.run(
            executable, arguments, in: directory, stdin: stdin, environment: environment)
        return Run(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    /// A built executable of this package, found next to the test bundle (`.build/<config>/`) or above it.
    static func executable(_ name: String) throws -> URL { try BuiltExecutable.url(name) }
}

/// Luggage tag payloads for tests.
enum Tags {
    static func json(id: UUID = UUID(), initial: String = "D", family: String = "ZMU", weight: String = "42.0")
        -> String
    {
        #"{"id": "\#(id.uuidString)", "owner": ["\#(initial)", "\#(family)"], "weight": \#(weight)}"#
    }
}

extension AgentSandbox.Run {
    /// The order id printed by `order`.
    var orderID: String? {
        guard let range = stdout.range(of: #"order ([0-9A-F-]{36}) revision"#, options: .regularExpression) else {
            return nil
        }
        return String(stdout[range].dropFirst("order ".count).prefix(36))
    }
}
