import ArgumentParser
import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeOperations
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
              jetbridge-aggregator --home ground store migrate --store postgres://jetbridge@db:5432/jetbridge

            Exit codes (sysexits; the same as jetbridge-agent's for the same situation, docs/EXIT-CODES.md): \
            0 done, 64 usage, 65 bad input data (also a home another user owns that others may write), 66 missing \
            input file (--config, no key pair for serve), 69 unavailable (no store yet, endpoint in use), 73 cannot \
            create (a key pair exists without --force, --output into a missing directory, a symbolic link where a \
            file is written), 75 try again later (store busy, disk full), 1 other failures.

            The home is kept 0700: one that group or others may enter is tightened when this user owns it, refused \
            when another user owns it and others may write it. No file is ever written through a symbolic link.
            """,
        version: JetbridgeVersion.line(for: "jetbridge-aggregator"),
        subcommands: [Serve.self, Status.self, Report.self, Receipts.self, StoreCommand.self, Keys.self, Devices.self])

    /// Runs the command; an ``AggregatorError`` becomes its message on stderr and its sysexits code.
    static func main() async {
        // A crash (or a fatal signal from outside) ends the process after its backtrace, so a supervisor restarts it.
        FatalSignals.install(program: "jetbridge-aggregator")
        // Everything the ground writes (store, receipts, allow list, reports) is private to its account, like the
        // agent's files (DESIGN: captured data is private): 0600 files, 0700 directories, whatever the caller's umask.
        umask(0o077)
        let arguments = movingGlobalOptions(Array(CommandLine.arguments.dropFirst()))
        suggestSubcommand(arguments)
        do {
            var command = try parseAsRoot(arguments)
            // After parsing: --log-level and --log-format are options of the command.
            LoggingOptions.bootstrap(defaultLevel: command is Serve ? .info : .warning)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as AggregatorError {
            FileHandle.standardError.write(Data("jetbridge-aggregator: \(error.message)\n".utf8))
            Foundation.exit(error.exitCode)
        } catch {
            exit(withError: error)
        }
    }
}

/// Exits 64 with a "did you mean" when the first word is not a subcommand (`reprot`); argument-parser would only
/// say "Unexpected argument".
func suggestSubcommand(_ arguments: [String]) {
    let names = JetbridgeAggregatorCommand.configuration.subcommands.map { $0._commandName }
    guard let word = arguments.first, !word.hasPrefix("-"), word != "help", !names.contains(word) else { return }
    let hint = Spelling.closest(to: word, among: names).map { "; did you mean '\($0)'?" } ?? "."
    FileHandle.standardError.write(
        Data("Error: unknown command '\(word)'\(hint) Commands: \(names.joined(separator: ", ")).\n".utf8))
    exit(64)
}

/// Moves `--home`/`--config` written before the subcommand (`jetbridge-aggregator --home DIR serve`) behind it:
/// every leaf command declares them through ``GlobalOptions``, and argument-parser reads a command's options only
/// after its name.
func movingGlobalOptions(_ arguments: [String]) -> [String] {
    var leading: [String] = []
    var rest = arguments[...]
    while let first = rest.first, ["--home", "--config", "--log-level", "--log-format"].contains(where: { first == $0 || first.hasPrefix($0 + "=") }) {
        leading.append(rest.removeFirst())
        if !first.contains("="), let value = rest.first {
            leading.append(value)
            rest.removeFirst()
        }
    }
    // In front of a `--` terminator (`devices allow cart-1 -- -KEY`: Z85 keys may start with '-'), not behind it.
    var arguments = Array(rest)
    arguments.insert(contentsOf: leading, at: arguments.firstIndex(of: "--") ?? arguments.endIndex)
    return arguments
}

/// Options every command takes.
struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Configuration file (default: <home>/aggregator.json if present, else built-in defaults).",
            valueName: "file"))
    var config: String?

    @Option(
        help: ArgumentHelp("Home directory (default: $JETBRIDGE_HOME, else .jetbridge/aggregator).", valueName: "dir"))
    var home: String?

    @OptionGroup var logging: LoggingOptions

    var aggregatorHome: AggregatorHome { AggregatorHome(flag: home) }

    func configuration() throws -> AggregatorConfiguration {
        try aggregatorHome.configuration(file: config)
    }
}

/// The command's logger; `main` bootstrapped logging from `--log-level`/`--log-format` (`defaultLevel` is the level
/// it used when neither they nor the environment give one).
func bootstrapLogging(_ defaultLevel: Logger.Level) -> Logger {
    Logger(label: "jetbridge-aggregator")
}
