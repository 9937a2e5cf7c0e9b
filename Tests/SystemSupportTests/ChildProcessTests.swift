import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The test kit's process runner, which every suite that starts a program goes through: what it passes to the child
/// and what it reports of its end.
@Suite("Test kit: ChildProcess")
struct ChildProcessTests {
    static let shell = URL(fileURLWithPath: "/bin/sh")

    /// Runs `script` with /bin/sh to its end and answers the child and what it printed.
    static func shell(
        _ script: String, in directory: URL? = nil, environment: [String: String]? = nil
    ) throws -> (child: ChildProcess, output: String) {
        let directoryForOutput = try TemporaryDirectory()
        defer { directoryForOutput.remove() }
        let file = directoryForOutput.url.appendingPathComponent("out")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let handle = try FileHandle(forWritingTo: file)
        let child = try ChildProcess(
            shell, ["-c", script], in: directory, environment: environment, stdout: .handle(handle),
            stderr: .handle(handle))
        try handle.close()
        child.waitUntilExit()
        return (child, try String(contentsOf: file, encoding: .utf8))
    }

    @Test func passesArgumentsDirectoryAndEnvironmentAndReportsTheExitStatus() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (child, output) = try Self.shell(
            #"pwd; printf '%s|' "$GREETING" "$HOME"; exit 3"#, in: directory.url,
            environment: ["GREETING": "hello world", "PATH": "/usr/bin:/bin"])
        #expect(child.terminationReason == .exit)
        #expect(child.terminationStatus == 3)
        let lines = output.split(separator: "\n")
        #expect(lines.first.map { URL(fileURLWithPath: String($0)).resolvingSymlinksInPath() }
            == directory.url.resolvingSymlinksInPath())
        #expect(lines.dropFirst().first == "hello world||", "only the environment given: \(output)")
    }

    @Test func reportsTheSignalThatEndedIt() throws {
        let (child, _) = try Self.shell("kill -9 $$")
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(child.terminationStatus == SIGKILL)
    }

    @Test func theChildInheritsOnlyItsStandardStreams() throws {
        // A descriptor this process opened without O_CLOEXEC, as another thread's file or socket may be.
        let leaked = open("/dev/null", O_RDONLY)
        try #require(leaked > 2)
        defer { close(leaked) }
        let (child, output) = try Self.shell("ls /proc/$$/fd")
        #expect(child.terminationStatus == 0)
        #expect(output.split(separator: "\n").sorted() == ["0", "1", "2"], "\(output)")
    }

    @Test func isRunningUntilTerminated() throws {
        let child = try ChildProcess(URL(fileURLWithPath: "/bin/sleep"), ["30"])
        #expect(child.isRunning)
        child.terminate()
        child.waitUntilExit()
        #expect(!child.isRunning)
        #expect(child.terminationReason == .uncaughtSignal)
        #expect(child.terminationStatus == SIGTERM)
    }

    @Test func aMissingProgramIsAnErrorNamingIt() {
        #expect {
            try ChildProcess(URL(fileURLWithPath: "/nonexistent/program"), [])
        } throws: { error in
            "\(error)".contains("/nonexistent/program") && "\(error)".contains("No such file")
        }
    }

    /// The case Foundation's `Process.run()` crashed on now and then: many threads starting programs at once, with
    /// many descriptors open. Every start succeeds and every status is collected, by the thread that waits for it.
    @Test func manyThreadsStartingAtOnce() async throws {
        let files = (0..<200).map { _ in open("/dev/null", O_RDONLY | O_CLOEXEC) }
        defer { for file in files where file >= 0 { close(file) } }
        let statuses = Statuses()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let group = DispatchGroup()
            for thread in 0..<8 {
                group.enter()
                Thread {
                    for run in 0..<25 {
                        let child = try? ChildProcess(Self.shell, ["-c", "exit \((thread + run) % 7)"])
                        child?.waitUntilExit()
                        statuses.add(child.map { $0.terminationStatus == Int32((thread + run) % 7) } ?? false)
                    }
                    group.leave()
                }.start()
            }
            group.notify(queue: .global()) { continuation.resume() }
        }
        #expect(statuses.values.count == 200)
        #expect(statuses.values.allSatisfy { $0 })
    }

    private final class Statuses: @unchecked Sendable {
        private let lock = NSLock()
        private var stored: [Bool] = []
        func add(_ value: Bool) { lock.withLock { stored.append(value) } }
        var values: [Bool] { lock.withLock { stored } }
    }
}
