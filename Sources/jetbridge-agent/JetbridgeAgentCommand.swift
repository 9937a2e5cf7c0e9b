import ArgumentParser
import Foundation
import JetbridgeAgent
import JetbridgeModel
import JetbridgeOperations
import Logging
import SystemSupport

/// `jetbridge-agent`: capture sales and bag scans on a device, and (later) sync them to the ground.
@main
struct JetbridgeAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-agent",
        abstract: "Capture sales and bag scans on a device, durably, for sync to the ground.",
        discussion: """
            Home: --home, else $JETBRIDGE_HOME, else .jetbridge/agent. Configuration: --config FILE, else \
            <home>/agent.json if present, else built-in defaults (see docs/AGENT.md).

            Examples:
              jetbridge-agent --home cart-1 keys generate
              jetbridge-agent --home cart-1 order --seat 17B --item Peanuts=2 --item Chips
              jetbridge-agent --home cart-1 scan --at origin --tag-file tags.txt
              jetbridge-agent --home cart-1 sync --until-drained --timeout 60

            Exit codes (sysexits; the same as jetbridge-aggregator's for the same situation, \
            docs/EXIT-CODES.md): 0 done, 64 usage, 65 bad input data, 66 missing input file (--config, \
            --tag-file, inventory, no key pair for sync), 69 the ground is unavailable (another protocol \
            version), 73 cannot create (a key pair exists without --force), 75 try again later (disk full, \
            queue size cap, lock busy, sync stopped with records unacknowledged), 1 other failures.
            """,
        version: JetbridgeVersion.line(for: "jetbridge-agent"),
        subcommands: [OrderCommand.self, ScanCommand.self, StatusCommand.self, SyncCommand.self, KeysCommand.self]
    )

    @OptionGroup var options: AgentOptions

    /// Parses, runs, and turns an ``AgentError`` into its message on standard error and its exit code;
    /// argument-parser handles its own errors (usage: 64) and `--help`.
    static func main() async {
        // A crash (or a fatal signal from outside) ends the process after its backtrace: `sync` is long-running.
        FatalSignals.install(program: "jetbridge-agent")
        suggestSubcommand(Array(CommandLine.arguments.dropFirst()))
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

/// Exits 64 with a "did you mean" when the first word after the global options is not a subcommand (`stauts`).
private func suggestSubcommand(_ arguments: [String]) {
    var rest = arguments[...]
    while let first = rest.first, first.hasPrefix("--") {
        rest.removeFirst()
        if !first.contains("="), ["--home", "--config", "--log-level", "--log-format"].contains(first) {
            rest = rest.dropFirst()
        }
    }
    let names = JetbridgeAgentCommand.configuration.subcommands.map { $0._commandName }
    guard let word = rest.first, !word.hasPrefix("-"), word != "help", !names.contains(word) else { return }
    let hint = Spelling.closest(to: word, among: names).map { "; did you mean '\($0)'?" } ?? "."
    Output.error("unknown command '\(word)'\(hint) Commands: \(names.joined(separator: ", ")).")
    terminate(64)
}

/// Ends the process with `code`; a free function because inside a command `exit` names argument-parser's method.
private func terminate(_ code: Int32) -> Never {
    exit(code)
}
