public import ArgumentParser
import JetbridgeLogging
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `--config`, `--home`, `--log-level` and `--log-format`: the options every command of a tool with a home takes,
/// declared once for both tools.
///
/// Each leaf command includes them with `@OptionGroup`, so that its `--help` lists them (argument-parser leaves a
/// `@ParentCommand`'s options out of a subcommand's help), and ``CommandLineMain`` moves them from before the
/// subcommand (`jetbridge-agent --home cart-1 status`) to behind it, where the leaf reads them.
public struct GlobalOptions<Tool: HomeTool>: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Configuration file (default: <home>/\(Tool.configurationFileName) if present, else built-in defaults).",
            valueName: "file"))
    public var config: String?

    @Option(
        help: ArgumentHelp("Home directory (default: $JETBRIDGE_HOME, else \(Tool.defaultHome)).", valueName: "dir"))
    public var home: String?

    @Option(
        name: .customLong("log-level"),
        help: ArgumentHelp(
            "Log level: trace, debug, info, notice, warning, error, critical (default: $JETBRIDGE_LOG_LEVEL, else the tool's default).",
            valueName: "level"))
    public var logLevel: String?

    @Option(
        name: .customLong("log-format"),
        help: ArgumentHelp(
            "Log format on standard error: text or json, one object per line (default: $JETBRIDGE_LOG_FORMAT, else text).",
            valueName: "format"))
    public var logFormat: String?

    public init() {}

    /// The options' names, which may stand before the subcommand.
    public static var names: [String] { ["--config", "--home", "--log-level", "--log-format"] }

    /// Resolves the log settings (flags over the environment) for ``CommandLineMain``'s bootstrap.
    /// - Throws: `ValidationError` (exit 64) naming the flag or variable with a bad value.
    public func validate() throws {
        do {
            let settings = try LogSettings.resolve(
                level: logLevel, format: logFormat, environment: ProcessInfo.processInfo.environment)
            CommandLineMain.resolvedLogSettings.withLock { $0 = settings }
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The home's path: `--home`, else `$JETBRIDGE_HOME`, else the tool's default (relative paths as given).
    public var homePath: String {
        HomeDirectory.path(flag: home, environment: ProcessInfo.processInfo.environment, defaultPath: Tool.defaultHome)
    }

    /// Whether the home is the tool's default (neither `--home` nor `$JETBRIDGE_HOME`): hints then leave `--home` out.
    public var homeIsDefault: Bool {
        HomeDirectory.isDefault(flag: home, environment: ProcessInfo.processInfo.environment)
    }
}
