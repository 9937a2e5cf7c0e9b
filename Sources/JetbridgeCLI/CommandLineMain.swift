public import ArgumentParser
import JetbridgeLogging
import JetbridgeModel
public import Logging
public import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// The one `main` of the Jetbridge executables: parse, bootstrap logging, run, and end with the right status.
///
/// - Global options written before the subcommand move behind it (``movingGlobalOptions(_:names:)``).
/// - A first word that is no subcommand exits 64 with a "did you mean" (``suggestion(for:among:)``).
/// - Logging is bootstrapped after parsing, from `--log-level`/`--log-format` over the environment over the
///   command's default level (``GlobalOptions``).
/// - An ``ExitStatusError`` (the agent's and the aggregator's errors) ends the process with its message on standard
///   error and its ``ExitStatus``; argument-parser's own errors (usage: 64) and `--help` are argument-parser's.
public enum CommandLineMain {
    /// What ``GlobalOptions/validate()`` resolved, for the bootstrap after parsing.
    static let resolvedLogSettings = Locked<LogSettings?>(nil)

    /// Parses the process's arguments for `root`, runs the command, and exits.
    /// - Parameters:
    ///   - root: The root command.
    ///   - tool: The executable (its name and error prefix).
    ///   - globalOptions: The options that may stand before the subcommand (``GlobalOptions/names``; none for the
    ///     queue tool).
    ///   - defaultLogLevel: The level when neither a flag nor the environment gives one, by command.
    public static func run<Tool: CommandLineTool>(
        _ root: any ParsableCommand.Type, tool: Tool.Type, globalOptions: [String] = [],
        defaultLogLevel: @Sendable (any ParsableCommand) -> Logger.Level = { _ in .warning }
    ) async -> Never {
        let arguments = movingGlobalOptions(Array(CommandLine.arguments.dropFirst()), names: globalOptions)
        // Until parsing has resolved --log-format, what the command line and the environment say, for the lines
        // written before (a suggestion, argument-parser's own errors).
        let early = peekLogFormat(arguments, environment: ProcessInfo.processInfo.environment)
        let names = root.configuration.subcommands.map { $0._commandName }
        if let message = suggestion(for: arguments, among: names) {
            finish(message, prefix: "Error: ", status: .usage, label: Tool.name, format: early)
        }
        do {
            var command = try root.parseAsRoot(arguments)
            let leaf = type(of: command).configuration.subcommands.isEmpty && type(of: command)._commandName != "help"
            if leaf, resolvedLogSettings.withLock({ $0 }) == nil {
                // A command without log options (the queue tool's) follows the environment: a value there that is
                // not a level or a format is a usage error too, never ignored (before, the queue tool wrote text).
                // Help, asked for or shown by a command group, is printed whatever the environment says.
                do {
                    let settings = try LogSettings.resolve(
                        level: nil, format: nil, environment: ProcessInfo.processInfo.environment)
                    resolvedLogSettings.withLock { $0 = settings }
                } catch {
                    finish(error.description, prefix: Tool.errorPrefix, status: .usage, label: Tool.name, format: early)
                }
            }
            bootstrapLogging(defaultLevel: defaultLogLevel(command))
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as any ExitStatusError {
            finish(error.message, prefix: Tool.errorPrefix, status: error.exitStatus, label: Tool.name)
        } catch {
            // argument-parser's own: usage errors (64), `ExitCode`, and --help and --version (0, on standard output).
            let code = root.exitCode(for: error)
            let format = resolvedLogSettings.withLock { $0?.format } ?? early
            guard format == .json, code != .success else { root.exit(withError: error) }
            let message = root.message(for: error)
            if !message.isEmpty {
                StandardError.clearStatus()
                LogOutput.write(
                    message, level: .error, label: Tool.name,
                    metadata: ["exitCode": .stringConvertible(Int(code.rawValue))], format: .json)
            }
            root.exit(withError: code)
        }
        exit(.success)
    }

    /// Ends the command with its last line on standard error and `status`: `prefix` and the message in text, one
    /// JSON object (level `error`, `metadata.exitCode`) with `--log-format json`. A status line still on screen (a
    /// progress bar) is cleared for good first. The text is inert (``InertText``, line by line): a message can
    /// quote what a store or a file holds, and a terminal must not act on an escape sequence in it.
    static func finish(
        _ message: String, prefix: String, status: ExitStatus, label: String, format: LogFormat? = nil
    ) -> Never {
        StandardError.clearStatus()
        let inert = message.split(separator: "\n", omittingEmptySubsequences: false)
            .map { InertText.escape(String($0)) }.joined(separator: "\n")
        LogOutput.write(
            message, text: prefix + inert, level: .error, label: label,
            metadata: ["exitCode": .stringConvertible(Int(status.exitCode))], format: format)
        exit(status)
    }

    /// The log format the command line or the environment asks for, before parsing: `--log-format X` or
    /// `--log-format=X`, else `$JETBRIDGE_LOG_FORMAT`; text when neither says json.
    static func peekLogFormat(_ arguments: [String], environment: [String: String]) -> LogFormat {
        var value: String?
        for (index, argument) in arguments.enumerated() {
            if argument == "--" { break }
            if argument == "--log-format", index + 1 < arguments.count { value = arguments[index + 1] }
            if argument.hasPrefix("--log-format=") { value = String(argument.dropFirst("--log-format=".count)) }
        }
        // The format alone: a bad `$JETBRIDGE_LOG_LEVEL` beside `JETBRIDGE_LOG_FORMAT=json` is reported in JSON.
        var formatOnly = environment
        formatOnly[LogSettings.levelVariable] = nil
        let settings = try? LogSettings.resolve(level: nil, format: value, environment: formatOnly)
        return settings?.format ?? .text
    }

    /// Ends the process with `status`.
    public static func exit(_ status: ExitStatus) -> Never {
        Glibc.exit(status.exitCode)
    }

    /// Bootstraps swift-log once, from what parsing resolved (or the environment alone when the command has no log
    /// options, such as the queue tool's: ``run(_:tool:globalOptions:defaultLogLevel:)`` resolves it first) over
    /// `defaultLevel` and the text format.
    static func bootstrapLogging(defaultLevel: Logger.Level) {
        let settings = resolvedLogSettings.withLock { $0 } ?? LogSettings()
        LogOutput.bootstrap(level: settings.level ?? defaultLevel, format: settings.format ?? .text)
    }

    /// `arguments` with the global options written before the subcommand (`--home DIR serve`) moved behind it:
    /// every leaf command declares them (``GlobalOptions``), and argument-parser reads a command's options only after
    /// its name. They go in front of a `--` terminator (`devices allow cart-1 -- -KEY`: Z85 keys may start with
    /// '-'), not behind it.
    /// - Parameters:
    ///   - arguments: The command line without the program's name.
    ///   - names: The global options (`--home`, …); each takes a value, as `--home DIR` or `--home=DIR`.
    public static func movingGlobalOptions(_ arguments: [String], names: [String]) -> [String] {
        var leading: [String] = []
        var rest = arguments[...]
        while let first = rest.first, names.contains(where: { first == $0 || first.hasPrefix($0 + "=") }) {
            leading.append(rest.removeFirst())
            if !first.contains("="), let value = rest.first {
                leading.append(value)
                rest.removeFirst()
            }
        }
        var moved = Array(rest)
        moved.insert(contentsOf: leading, at: moved.firstIndex(of: "--") ?? moved.endIndex)
        return moved
    }

    /// The message for a first word that is not a subcommand (`stauts`), with the nearest name: argument-parser would
    /// only say "Unexpected argument". Nil when the first word is a subcommand, an option, `help`, or absent.
    /// - Parameters:
    ///   - arguments: The command line after ``movingGlobalOptions(_:names:)``.
    ///   - names: The root's subcommands.
    public static func suggestion(for arguments: [String], among names: [String]) -> String? {
        guard !names.isEmpty, let word = arguments.first, !word.hasPrefix("-"), word != "help", !names.contains(word)
        else { return nil }
        let hint = Spelling.closest(to: word, among: names).map { "; did you mean '\($0)'?" } ?? "."
        return "unknown command '\(word)'\(hint) Commands: \(names.joined(separator: ", "))."
    }
}

extension ExitCode {
    /// argument-parser's exit code for `status`.
    public init(_ status: ExitStatus) {
        self.init(status.exitCode)
    }
}
