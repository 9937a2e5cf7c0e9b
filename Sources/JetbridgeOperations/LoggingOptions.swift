public import ArgumentParser
public import Foundation
public import Logging
import SystemSupport

/// `--log-level` and `--log-format`, with `JETBRIDGE_LOG_LEVEL` and `JETBRIDGE_LOG_FORMAT` under them: the same on
/// both tools. A bad value, from a flag or from the environment, is a usage error (exit 64), never ignored.
///
/// `validate()` records what it resolved, so `@main` can bootstrap logging after parsing with
/// ``LoggingOptions/bootstrap(defaultLevel:)``: the options sit on different commands in the two tools.
public struct LoggingOptions: ParsableArguments {
    public static let levelVariable = "JETBRIDGE_LOG_LEVEL"
    public static let formatVariable = "JETBRIDGE_LOG_FORMAT"

    @Option(
        name: .customLong("log-level"),
        help: ArgumentHelp(
            "Log level: trace, debug, info, notice, warning, error, critical (default: $JETBRIDGE_LOG_LEVEL, else the tool's default).",
            valueName: "level"))
    public var level: String?

    @Option(
        name: .customLong("log-format"),
        help: ArgumentHelp(
            "Log format on standard error: text or json, one object per line (default: $JETBRIDGE_LOG_FORMAT, else text).",
            valueName: "format"))
    public var format: String?

    public init() {}

    /// What the flags and the environment say, each nil when neither gives it.
    public struct Settings: Hashable, Sendable {
        public var level: Logger.Level?
        public var format: LogFormat?

        public init(level: Logger.Level? = nil, format: LogFormat? = nil) {
            self.level = level
            self.format = format
        }
    }

    /// Resolves the flags over the environment.
    /// - Throws: `ValidationError` naming the flag or variable and the values it takes.
    public func settings(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> Settings {
        try Self.settings(level: level, format: format, environment: environment)
    }

    /// Resolves `--log-level` and `--log-format` values (nil: not given) over the environment.
    /// - Throws: `ValidationError` naming the flag or variable and the values it takes.
    public static func settings(level: String?, format: String?, environment: [String: String]) throws -> Settings {
        func given(_ flag: String?, _ name: String, _ variable: String) -> (value: String, source: String)? {
            if let flag { return (flag, name) }
            if let value = environment[variable], !value.isEmpty { return (value, "$" + variable) }
            return nil
        }
        var settings = Settings()
        if let (value, source) = given(level, "--log-level", levelVariable) {
            guard let parsed = Logger.Level(rawValue: value.lowercased()) else {
                throw ValidationError(
                    "\(source): '\(value)' is not a log level; use one of "
                        + Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))
            }
            settings.level = parsed
        }
        if let (value, source) = given(format, "--log-format", formatVariable) {
            guard let parsed = LogFormat(rawValue: value.lowercased()) else {
                throw ValidationError("\(source): '\(value)' is not a log format; use text or json")
            }
            settings.format = parsed
        }
        return settings
    }

    public func validate() throws {
        let settings = try settings()
        Self.resolved.withLock { $0 = settings }
    }

    private static let resolved = Locked<Settings?>(nil)

    /// Bootstraps swift-log once, for `@main`, from what parsing resolved (or the environment alone when the command
    /// has no logging options) over `defaultLevel` and the text format.
    /// - Parameter defaultLevel: The tool's default level.
    public static func bootstrap(defaultLevel: Logger.Level) {
        let settings = resolved.withLock { $0 } ?? (try? settings(level: nil, format: nil, environment: ProcessInfo.processInfo.environment)) ?? Settings()
        let level = settings.level ?? defaultLevel
        let format = settings.format ?? .text
        LoggingSystem.bootstrap { label in JetbridgeLogHandler(label: label, level: level, format: format) }
    }
}
