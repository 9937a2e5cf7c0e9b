public import Logging

/// How log lines look (`--log-format`, `JETBRIDGE_LOG_FORMAT`).
public enum LogFormat: String, CaseIterable, Sendable {
    /// `2026-11-24T14:47:10.123Z info jetbridge-aggregator: key=value [JetbridgeAggregator] message`, as swift-log's
    /// StreamLogHandler lays it out, control characters escaped.
    case text
    /// One JSON object per line: `time`, `level`, `label`, `message`, `metadata`.
    case json
}

/// The log level and format a command runs with: `--log-level` and `--log-format`, with `JETBRIDGE_LOG_LEVEL` and
/// `JETBRIDGE_LOG_FORMAT` under them, the same in every tool. A bad value, from a flag or from the environment, is an
/// error (the command line makes it a usage error, exit 64), never ignored.
public struct LogSettings: Hashable, Sendable {
    public static let levelVariable = "JETBRIDGE_LOG_LEVEL"
    public static let formatVariable = "JETBRIDGE_LOG_FORMAT"

    /// The level, nil when neither a flag nor the environment gives one (the tool's default applies).
    public var level: Logger.Level?
    /// The format, nil when neither a flag nor the environment gives one (text).
    public var format: LogFormat?

    public init(level: Logger.Level? = nil, format: LogFormat? = nil) {
        self.level = level
        self.format = format
    }

    /// A value that is not a level or a format, and where it came from.
    public struct Invalid: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// Resolves `--log-level` and `--log-format` values (nil: not given) over the environment.
    /// - Throws: ``Invalid`` naming the flag or variable and the values it takes.
    public static func resolve(
        level: String?, format: String?, environment: [String: String]
    ) throws(Invalid) -> LogSettings {
        func given(_ flag: String?, _ name: String, _ variable: String) -> (value: String, source: String)? {
            if let flag { return (flag, name) }
            if let value = environment[variable], !value.isEmpty { return (value, "$" + variable) }
            return nil
        }
        var settings = LogSettings()
        if let (value, source) = given(level, "--log-level", levelVariable) {
            guard let parsed = Logger.Level(rawValue: value.lowercased()) else {
                throw Invalid(
                    description: "\(source): '\(value)' is not a log level; use one of "
                        + Logger.Level.allCases.map(\.rawValue).joined(separator: ", "))
            }
            settings.level = parsed
        }
        if let (value, source) = given(format, "--log-format", formatVariable) {
            guard let parsed = LogFormat(rawValue: value.lowercased()) else {
                throw Invalid(description: "\(source): '\(value)' is not a log format; use text or json")
            }
            settings.format = parsed
        }
        return settings
    }
}
