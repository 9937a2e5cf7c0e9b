import ArgumentParser
import Foundation
import JetbridgeAggregator
import JetbridgeOperations
import Logging

/// `jetbridge-aggregator`: the ground side of Jetbridge. Real work lives in JetbridgeAggregator.
@main
struct JetbridgeAggregatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-aggregator",
        abstract: "Receive device batches over ZeroMQ, store them once, write receipts and reports.",
        usage: "jetbridge-aggregator [--config FILE] [--home DIR] <subcommand>",
        discussion: "--config and --home may come before or after the subcommand.",
        version: JetbridgeVersion.line(for: "jetbridge-aggregator"),
        subcommands: [Serve.self, Status.self, Report.self, Receipts.self, Keys.self, Devices.self])

    /// Runs the command; an ``AggregatorError`` becomes its message on stderr and its sysexits code.
    static func main() async {
        do {
            var command = try parseAsRoot(movingGlobalOptions(Array(CommandLine.arguments.dropFirst())))
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
    @Option(help: "Configuration file (default: <home>/aggregator.json if present, else built-in defaults).")
    var config: String?

    @Option(help: "Home directory (default: $JETBRIDGE_HOME, else .jetbridge/aggregator).")
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
