public import Foundation

/// One run of a program as a separate process — the one process runner the suites share. Its standard output and
/// standard error go to files (a chatty child never blocks on a full pipe), together by default or apart
/// (``Output/separate``); `JETBRIDGE_HOME`, `JETBRIDGE_LOG_LEVEL` and `JETBRIDGE_LOG_FORMAT` are unset so the developer's
/// own settings never leak into a test, then `environment` is added. Waited for without blocking a thread of the
/// cooperative pool (``exit(within:)``), or to the end from a thread of its own (``finish()``,
/// ``run(_:_:in:stdin:environment:)``).
public struct ExecutableRun: Sendable {
    /// Where the output goes.
    public enum Output: Sendable {
        /// Standard output and standard error interleaved in one file (``log``), as a terminal would show them.
        case together
        /// Each in a file of its own (``log`` and ``errorLog``).
        case separate
    }

    /// What a finished run printed and how it ended.
    public struct Finished: Sendable, CustomStringConvertible {
        /// The exit status, or the signal's number when ``signaled``.
        public let status: Int32
        /// Whether a signal ended it.
        public let signaled: Bool
        /// Its standard output (with ``Output/together``, both streams).
        public let stdout: String
        /// Its standard error (empty with ``Output/together``).
        public let stderr: String

        public var description: String {
            "status \(status)\(signaled ? " (signal)" : "")\nstdout: \(stdout)\nstderr: \(stderr)"
        }
    }

    /// The variables a run never inherits from the test's own environment.
    public static let clearedVariables = ["JETBRIDGE_HOME", "JETBRIDGE_LOG_LEVEL", "JETBRIDGE_LOG_FORMAT"]

    /// The running (or finished) process; its `processIdentifier` is the pid.
    public let process: ChildProcess
    /// Where its standard output goes (and its standard error with ``Output/together``).
    public let log: URL
    /// Where its standard error goes with ``Output/separate``; else ``log``.
    public let errorLog: URL

    /// Starts the built executable `name` (``BuiltExecutable/expectedURL(_:)``) with `arguments` in `directory`.
    /// - Parameters:
    ///   - name: The executable of this package.
    ///   - arguments: Its arguments.
    ///   - directory: Its current directory; the logs and the standard input file are written there.
    ///   - stdin: Its standard input, if any (else `/dev/null`).
    ///   - environment: Added to the test's environment (after ``clearedVariables`` are removed).
    ///   - output: Both streams in one file, or apart.
    ///   - logs: Where the logs and the standard input file go (`directory` when nil).
    /// - Throws: What creating the files or starting the process throws.
    public init(
        _ name: String, _ arguments: [String], in directory: URL, stdin: String? = nil,
        environment: [String: String] = [:], output: Output = .together, logs: URL? = nil
    ) throws {
        try self.init(
            executable: BuiltExecutable.expectedURL(name), arguments, in: directory, stdin: stdin.map { Data($0.utf8) },
            environment: environment, output: output, logs: logs)
    }

    /// Starts the program at `executable` with `arguments` in `directory` (see ``init(_:_:in:stdin:environment:output:)``).
    public init(
        executable: URL, _ arguments: [String], in directory: URL, stdin: Data? = nil,
        environment: [String: String] = [:], output: Output = .together, logs: URL? = nil
    ) throws {
        let id = UUID().uuidString
        let logs = logs ?? directory
        log = logs.appendingPathComponent("run-\(id).log")
        errorLog = output == .together ? log : logs.appendingPathComponent("run-\(id).err")
        for file in Set([log, errorLog]) { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
        var merged = ProcessInfo.processInfo.environment
        for name in Self.clearedVariables { merged[name] = nil }
        merged.merge(environment) { $1 }
        let standardOutput = try FileHandle(forWritingTo: log)
        let standardError = output == .together ? standardOutput : try FileHandle(forWritingTo: errorLog)
        defer {
            try? standardOutput.close()
            if output == .separate { try? standardError.close() }
        }
        var input = ChildProcess.Stream.null
        var inputHandle: FileHandle?
        defer { try? inputHandle?.close() }
        if let stdin {
            let file = logs.appendingPathComponent("stdin-\(id)")
            try stdin.write(to: file)
            inputHandle = try FileHandle(forReadingFrom: file)
            input = .handle(inputHandle!)
        }
        process = try ChildProcess(
            executable, arguments, in: directory, environment: merged, stdin: input,
            stdout: .handle(standardOutput), stderr: .handle(standardError))
    }

    /// Runs the program at `executable` to its end, on the calling thread (call it from a thread of its own, or from a
    /// synchronous test), and answers what it printed; its logs are kept in a temporary directory of their own,
    /// removed at the end, so nothing is added to `directory`.
    public static func run(
        _ executable: URL, _ arguments: [String], in directory: URL, stdin: Data? = nil,
        environment: [String: String] = [:]
    ) throws -> Finished {
        let logs = FileManager.default.temporaryDirectory.appendingPathComponent("jetbridge-run-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: logs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: logs) }
        return try ExecutableRun(
            executable: executable, arguments, in: directory, stdin: stdin, environment: environment, output: .separate,
            logs: logs
        ).finish()
    }

    /// Everything it wrote so far to ``log``.
    public var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    /// Everything it wrote so far to standard error with ``Output/separate``; the same as ``output`` otherwise.
    public var errorOutput: String { (try? String(contentsOf: errorLog, encoding: .utf8)) ?? "" }

    /// Waits for its end on the calling thread and answers what it printed.
    public func finish() -> Finished {
        process.waitUntilExit()
        return Finished(
            status: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal,
            stdout: output, stderr: errorLog == log ? "" : errorOutput)
    }

    /// The exit status, or nil when it is still running after `within` (then it is terminated).
    public func exit(within: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + within
        while process.isRunning {
            if ContinuousClock.now > deadline {
                process.terminate()
                process.waitUntilExit()
                return nil
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }
}
