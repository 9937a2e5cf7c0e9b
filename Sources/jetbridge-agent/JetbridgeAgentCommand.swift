import ArgumentParser
import Foundation
import JetbridgeAgent
import JetbridgeOperations
import Logging

/// `jetbridge-agent`: capture sales and bag scans on a device, and (later) sync them to the ground.
@main
struct JetbridgeAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-agent",
        abstract: "Capture sales and bag scans on a device, durably, for sync to the ground.",
        discussion: """
            Home: --home, else $JETBRIDGE_HOME, else .jetbridge/agent. Configuration: --config FILE, else \
            <home>/agent.json if present, else built-in defaults (see docs/AGENT.md).

            Exit codes (sysexits): 0 done, 64 usage, 65 bad input data, 66 missing input file, \
            75 try again later (disk full, queue size cap, lock busy), 1 other failures.
            """,
        version: JetbridgeVersion.line(for: "jetbridge-agent"),
        subcommands: [OrderCommand.self, ScanCommand.self, StatusCommand.self, SyncCommand.self, KeysCommand.self]
    )

    @OptionGroup var options: AgentOptions

    /// Parses, runs, and turns an ``AgentError`` into its message on standard error and its exit code;
    /// argument-parser handles its own errors (usage: 64) and `--help`.
    static func main() async {
        do {
            var command = try parseAsRoot()
            // After parsing: --log-level and --log-format are root options.
            LoggingOptions.bootstrap(defaultLevel: .warning)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as AgentError {
            Output.error(error.message)
            terminate(error.code.exitCode)
        } catch {
            exit(withError: error)
        }
    }
}

/// Ends the process with `code`; a free function because inside a command `exit` names argument-parser's method.
private func terminate(_ code: Int32) -> Never {
    exit(code)
}
