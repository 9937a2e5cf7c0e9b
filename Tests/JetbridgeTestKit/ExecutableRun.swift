public import Foundation

/// One run of a built executable of this package (``BuiltExecutable``) as a separate process, standard output and
/// standard error together in a file (a chatty child never blocks on a full pipe), waited for without blocking a
/// thread of the cooperative pool.
public struct ExecutableRun: Sendable {
    /// The running (or finished) process; its `processIdentifier` is the pid.
    public let process: Process
    /// Where its output goes.
    public let log: URL

    /// Starts `name ARGUMENTS` in `directory`, with `JETBRIDGE_HOME` unset.
    /// - Parameters:
    ///   - name: The executable, found by ``BuiltExecutable/expectedURL(_:)``.
    ///   - arguments: Its arguments.
    ///   - directory: Its current directory; the log and the standard input file are written there.
    ///   - stdin: Its standard input, if any.
    /// - Throws: What creating the files or starting the process throws.
    public init(_ name: String, _ arguments: [String], in directory: URL, stdin: String? = nil) throws {
        log = directory.appendingPathComponent("run-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        let process = Process()
        process.executableURL = BuiltExecutable.expectedURL(name)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["JETBRIDGE_HOME"] = nil
        process.environment = environment
        process.currentDirectoryURL = directory
        let output = try FileHandle(forWritingTo: log)
        process.standardOutput = output
        process.standardError = output
        if let stdin {
            let input = directory.appendingPathComponent("stdin-\(UUID().uuidString)")
            try Data(stdin.utf8).write(to: input)
            process.standardInput = try FileHandle(forReadingFrom: input)
        }
        try process.run()
        self.process = process
    }

    /// Everything it wrote so far.
    public var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }

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
