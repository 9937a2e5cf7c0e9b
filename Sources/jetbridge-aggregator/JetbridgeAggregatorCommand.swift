import ArgumentParser
import Foundation
import JetbridgeAggregator
import JetbridgeCLI
import JetbridgeProtocol
import Logging
import SystemSupport
import JetbridgeStore

/// `jetbridge-aggregator`: the ground side of Jetbridge. Real work lives in JetbridgeAggregator.
@main
struct JetbridgeAggregatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-aggregator",
        abstract: "Receive device batches over ZeroMQ, store them once, write receipts and reports.",
        usage: "jetbridge-aggregator [--config <file>] [--home <dir>] [--log-level <level>] [--log-format <format>] <subcommand>",
        discussion: """
            --config, --home, --log-level and --log-format may come before or after the subcommand. Home: --home, else $JETBRIDGE_HOME, else \
            .jetbridge/aggregator. Configuration: --config FILE, else <home>/aggregator.json if present, else \
            built-in defaults (see docs/AGGREGATOR.md).

            Examples:
              jetbridge-aggregator --home ground keys generate
              jetbridge-aggregator --home ground devices allow cart-1 -- 'KEY'
              jetbridge-aggregator --home ground serve
              jetbridge-aggregator --home ground report flights --format html
              jetbridge-aggregator --home ground receipts rebuild
              jetbridge-aggregator store migrate --store postgres://jetbridge@db/jetbridge

            Exit codes (sysexits; the same as jetbridge-agent's for the same situation, docs/EXIT-CODES.md): \
            0 done, 64 usage, 65 bad input data (also a home another user owns that others may write), 66 missing \
            input file (--config, no key pair for serve), 69 unavailable (no store yet, endpoint in use), 73 cannot \
            create (a key pair exists without --force, --output into a missing directory, a symbolic link where a \
            file is written), 75 try again later (store busy, disk full), 1 other failures.

            The home is kept 0700: one that group or others may enter is tightened when this user owns it, refused \
            when another user owns it and others may write it. No file is ever written through a symbolic link.
            """,
        version: JetbridgeVersion.line(for: AggregatorTool.name),
        subcommands: [Serve.self, Status.self, Report.self, Receipts.self, StoreCommand.self, Keys.self, Devices.self])

    /// Parses and runs the command (JetbridgeCLI's `main`): an ``AggregatorError`` ends it with its message on
    /// standard error and its exit status.
    static func main() async {
        // A crash (or a fatal signal from outside) ends the process after its backtrace, so a supervisor restarts it.
        FatalSignals.install(program: AggregatorTool.name)
        // Everything the ground writes (store, receipts, allow list, reports) is private to its account, like the
        // agent's files (captured data is private: docs/SECURITY.md, "2. A careless operator"): 0600 files, 0700 directories, whatever the caller's umask.
        umask(0o077)
        await CommandLineMain.run(
            Self.self, tool: AggregatorTool.self, globalOptions: GroundOptions.names,
            defaultLogLevel: { $0 is Serve ? .info : .warning })
    }
}

/// The aggregator, as the command-line scaffold knows it.
enum AggregatorTool: HomeTool {
    static let name = "jetbridge-aggregator"
    static let errorPrefix = "jetbridge-aggregator: "
    static let defaultHome = AggregatorHome.defaultPath
    static let configurationFileName = "aggregator.json"
}

/// `--config`, `--home`, `--log-level`, `--log-format`: every leaf command includes them (`@OptionGroup`).
typealias GroundOptions = GlobalOptions<AggregatorTool>

extension GlobalOptions where Tool == AggregatorTool {
    var aggregatorHome: AggregatorHome { AggregatorHome(flag: home) }

    func configuration() throws -> AggregatorConfiguration {
        try aggregatorHome.configuration(file: config)
    }
}
