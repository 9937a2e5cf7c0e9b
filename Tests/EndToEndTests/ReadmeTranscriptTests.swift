import Foundation
import Testing

/// Issue 10: the README's capture steps only worked from the checkout root (`../../config/Inventory.plist`). This runs
/// every `$ ` command of the README's capture section in a fresh directory, as a reader would paste them, and checks
/// each exit status against the transcript (`(exit N)`, else 0).
@Suite("README transcripts run as written")
struct ReadmeTranscriptTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Command {
        var lines: [String]
        var expectedStatus: Int32
    }

    /// The `$ ` commands of the code blocks between `start` and `end`, with heredoc bodies, and their exit status.
    static func commands(in readme: String, from start: String, to end: String) throws -> [Command] {
        let lower = try #require(readme.range(of: start))
        let upper = try #require(readme.range(of: end, range: lower.upperBound..<readme.endIndex))
        var commands: [Command] = []
        var inBlock = false
        var heredoc: String?
        for line in readme[lower.upperBound..<upper.lowerBound].split(separator: "\n", omittingEmptySubsequences: false)
        {
            let text = String(line)
            if text.hasPrefix("```") {
                inBlock.toggle()
                continue
            }
            guard inBlock else { continue }
            if let terminator = heredoc {
                commands[commands.count - 1].lines.append(text)
                if text == terminator { heredoc = nil }
            } else if text.hasPrefix("$ ") {
                let command = String(text.dropFirst(2))
                commands.append(Command(lines: [command], expectedStatus: 0))
                if let marker = command.range(of: "<<'") {
                    heredoc = String(command[marker.upperBound...].prefix { $0 != "'" })
                }
            } else if let last = commands.indices.last, text.hasPrefix("(exit "),
                let code = Int32(text.dropFirst(6).dropLast())
            {
                commands[last].expectedStatus = code
            }
        }
        return commands
    }

    @Test func captureStepsRunFromAFreshDirectory() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let commands = try Self.commands(
            in: readme, from: "Every block from here on runs as written", to: "### Sync: from the device to the ground")
        #expect(commands.count >= 12)
        let sandbox = try AgentSandbox()
        let demo = sandbox.directory.appendingPathComponent("demo").path
        // One shell, as a reader's terminal: `cd` and variables carry over; each command's status is printed.
        var script = "set +e\n"
        for (index, command) in commands.enumerated() {
            script += command.lines.joined(separator: "\n").replacingOccurrences(of: "/tmp/demo", with: demo) + "\n"
            script += "echo \"__status \(index) $?\" >&2\n"
        }
        let bin = try AgentSandbox.executable("jetbridge-agent").deletingLastPathComponent().path
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["JETBRIDGE_SRC"] = Self.packageRoot.path
        environment["JETBRIDGE_HOME"] = nil
        let run = try AgentSandbox.run(
            URL(fileURLWithPath: "/bin/bash"), ["-c", script], in: sandbox.directory, environment: environment)
        let statuses = run.stderr.split(separator: "\n").filter { $0.hasPrefix("__status ") }.map {
            Int32($0.split(separator: " ")[2])!
        }
        #expect(statuses.count == commands.count, "\(run)")
        for (command, status) in zip(commands, statuses) {
            #expect(status == command.expectedStatus, "\(command.lines[0]) exited \(status)\n\(run)")
        }
        #expect(run.stdout.contains("inventory       \(demo)/.jetbridge/agent/Inventory.plist"), "\(run.stdout)")
    }
}
