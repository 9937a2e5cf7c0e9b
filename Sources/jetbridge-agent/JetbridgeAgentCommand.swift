import ArgumentParser
import JetbridgeAgent
import JetbridgeCLI
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `jetbridge-agent`: capture sales and bag scans on a device, and (later) sync them to the ground.
@main
struct JetbridgeAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-agent",
        abstract: "Capture sales and bag scans on a device, durably, for sync to the ground.",
        usage: "jetbridge-agent [--config <file>] [--home <dir>] [--log-level <level>] [--log-format <format>] <subcommand>",
        discussion: """
            --config, --home, --log-level and --log-format may come before or after the subcommand. Home: --home, \
            else $JETBRIDGE_HOME, else .jetbridge/agent. Configuration: --config FILE, else \
            <home>/agent.json if present, else built-in defaults (see docs/AGENT.md).

            Examples:
              jetbridge-agent --home cart-1 keys generate
              jetbridge-agent --home cart-1 order --seat 17B --item Peanuts=2 --item Chips
              jetbridge-agent --home cart-1 scan --at origin --tag-file tags.txt
              jetbridge-agent --home cart-1 sync --until-drained --timeout 60
              jetbridge-agent --home cart-1 set-aside list

            Exit codes (sysexits; the same as jetbridge-aggregator's for the same situation, \
            docs/EXIT-CODES.md): 0 done, 64 usage, 65 bad input data, 66 missing input file (--config, \
            --tag-file, inventory, no key pair or no home for sync), 69 the ground is unavailable (another protocol \
            version), 73 cannot create (a key pair exists without --force), 75 try again later (disk full, \
            queue size cap, lock busy, sync stopped with records unacknowledged), 1 other failures.
            """,
        version: JetbridgeVersion.line(for: AgentTool.name),
        subcommands: [
            OrderCommand.self, ScanCommand.self, StatusCommand.self, SyncCommand.self, SetAsideCommand.self,
            KeysCommand.self,
        ]
    )

    /// Parses and runs the command (JetbridgeCLI's `main`): an ``AgentError`` ends it with its message on standard
    /// error and its exit status; argument-parser handles its own errors (usage: 64) and `--help`.
    static func main() async {
        // A crash (or a fatal signal from outside) ends the process after its backtrace: `sync` is long-running.
        FatalSignals.install(program: AgentTool.name)
        await CommandLineMain.run(Self.self, tool: AgentTool.self, globalOptions: AgentOptions.names)
    }
}
