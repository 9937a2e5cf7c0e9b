import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The README's usage walkthrough runs as written, in order, from a fresh directory, and prints what the README
/// shows.
///
/// Issue 10: the capture steps only worked from the checkout root. Issue 28: the walkthrough broke at its first ground
/// command (the README built only `jetbridge-agent`), used a `cart-9` it never created, left `--home ground` out of the
/// reports, and showed a `--help` that was no longer the tool's; the test then checked only the capture section's exit
/// statuses. Now every `$ ` command of every block between "## Usage" and "## Architecture" runs in one shell, as a
/// reader's terminal, with only the tools the README's build block builds on `PATH`, and each command's output is
/// compared line by line with the README's after ``Transcript/normalize(_:)``.
@Suite("README transcripts run as written")
struct ReadmeTranscriptTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The directory the README's commands work in; the test's own directory replaces it.
    static let shownDirectory = "/tmp/demo"

    /// The products the README's first `swift build` block builds: only these are on `PATH` for the walkthrough.
    static func builtProducts(_ readme: String) throws -> [String] {
        let blocks = try Transcript.blocks(in: readme, from: "## Usage", to: "## Architecture")
        let build = try #require(blocks.first { $0.lines.contains { $0.hasPrefix("swift build") } })
        return build.lines.joined(separator: " ").matches(of: /--product ([a-z-]+)/).map { String($0.output.1) }
    }

    @Test func theWalkthroughRunsAsWrittenAndPrintsWhatItShows() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let steps = try Transcript.steps(in: readme, from: "## Usage", to: "## Architecture")
        #expect(steps.count >= 40, "\(steps.count) commands")

        let sandbox = try TemporaryDirectory(prefix: "jetbridge-readme")
        let outputs = sandbox.url.appendingPathComponent("outputs")
        let bin = sandbox.url.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: outputs, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        // Only what the README builds: a tool it forgets to build is "command not found", as for its reader.
        for product in try Self.builtProducts(readme) {
            try FileManager.default.createSymbolicLink(
                at: bin.appendingPathComponent(product), withDestinationURL: try BuiltExecutable.url(product))
        }
        let demo = sandbox.url.appendingPathComponent("demo").path
        // The README's ports (255xx) become free ones, so that runs in parallel never meet.
        var ports: [String: String] = [:]
        for port in Set(readme.matches(of: /\b255\d\d\b/).map { String($0.output) }) {
            var actual: String
            repeat { actual = String(try Self.freePort()) } while ports.values.contains(actual)
            ports[port] = actual
        }
        func substitute(_ line: String) -> String {
            var line = line.replacingOccurrences(of: Self.shownDirectory, with: demo)
            for (shown, actual) in ports { line = line.replacingOccurrences(of: ":" + shown, with: ":" + actual) }
            return line
        }

        // One shell, as a reader's terminal: `cd`, variables and background jobs carry over.
        var script = "set +e\ncd \(sandbox.path)\n"
        for (index, step) in steps.enumerated() {
            script +=
                "{\n" + step.command.map(substitute).joined(separator: "\n") + "\n} >\(outputs.path)/\(index) 2>&1\n"
            script += "echo \"\(index) $?\" >>\(outputs.path)/statuses\n"
        }
        // Whatever the walkthrough left running.
        script += "kill $(jobs -p) 2>/dev/null; wait\n"
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin.path + ":/usr/local/bin:/usr/bin:/bin"
        environment["JETBRIDGE_SRC"] = Self.packageRoot.path
        environment["COLUMNS"] = "80"
        for variable in ["JETBRIDGE_HOME", "JETBRIDGE_LOG_LEVEL", "JETBRIDGE_LOG_FORMAT"] {
            environment[variable] = nil
        }
        let run = try AgentSandbox.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", script], in: sandbox.url, environment: environment)

        let statuses = try String(contentsOf: outputs.appendingPathComponent("statuses"), encoding: .utf8)
            .split(separator: "\n").map { Int32($0.split(separator: " ")[1])! }
        try #require(statuses.count == steps.count, "the script stopped early: \(run)")
        // JETBRIDGE_README_TRANSCRIPT=FILE writes what each command printed, as the README would show it: to bring a
        // transcript up to date after a change of output.
        var transcript = ""
        defer {
            if let file = ProcessInfo.processInfo.environment["JETBRIDGE_README_TRANSCRIPT"] {
                try? transcript.write(toFile: file, atomically: true, encoding: .utf8)
            }
        }
        for (index, step) in steps.enumerated() {
            var printed = try String(contentsOf: outputs.appendingPathComponent("\(index)"), encoding: .utf8)
                .replacingOccurrences(of: demo, with: Self.shownDirectory)
            for (shown, actual) in ports { printed = printed.replacingOccurrences(of: ":" + actual, with: ":" + shown) }
            transcript +=
                "$ " + step.command.joined(separator: "\n") + "\n" + printed
                + (statuses[index] == 0 ? "" : "(exit \(statuses[index]))\n")
            let actual = Transcript.normalize(printed).split(separator: "\n", omittingEmptySubsequences: false)
                .map(String.init)
            let expected = Transcript.normalize(step.output.map { $0 + "\n" }.joined())
                .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(statuses[index] == step.status, "\(step) exited \(statuses[index]):\n\(printed)")
            if actual != expected {
                let mismatch =
                    zip(expected, actual).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(expected.count, actual.count)
                Issue.record(
                    """
                    \(step) prints something else than README.md shows (first difference at its output line \
                    \(mismatch + 1)):
                    README:  \(mismatch < expected.count ? expected[mismatch] : "(nothing)")
                    printed: \(mismatch < actual.count ? actual[mismatch] : "(nothing)")
                    --- all it printed:
                    \(printed)
                    """)
            }
        }
    }

    /// A TCP port that was free a moment ago, below the kernel's ephemeral range: the walkthrough binds it up to two
    /// minutes later, and a port the kernel handed out for `bind(0)` could by then be another test's `tcp://…:*`
    /// (a full run saw "the acks endpoint … is in use"). Never one of the README's own 255xx ports, which the
    /// transcript maps back.
    static func freePort() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            guard !(25_500..<25_600).contains(port) else { continue }
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            if bound { return port }
        }
        throw TranscriptError(description: "no free port in 20000-31999 after 200 tries")
    }
}
