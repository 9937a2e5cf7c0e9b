public import Logging
import SystemSupport

/// The lines a command writes to standard error itself, besides its loggers' (its final error, a warning banner,
/// rejected input lines, sync's plain progress lines): as they always were in text, and one JSON object each, the
/// loggers' shape, with `--log-format json`, so that a log shipper reading standard error line by line gets JSON for
/// every line.
public enum LogOutput {
    private static let current = Locked(LogFormat.text)

    /// The format standard error is written in, as bootstrapped (text until then).
    public static var format: LogFormat { current.withLock { $0 } }

    /// Bootstraps swift-log with ``JetbridgeLogHandler`` and remembers the format for ``write(_:text:level:label:metadata:)``.
    /// - Parameters:
    ///   - level: The lowest level logged.
    ///   - format: Text or JSON.
    public static func bootstrap(level: Logger.Level, format: LogFormat) {
        current.withLock { $0 = format }
        LoggingSystem.bootstrap { label in JetbridgeLogHandler(label: label, level: level, format: format) }
    }

    /// Writes one message to standard error whatever the log level: `text` (else the message) as it is, or with
    /// `--log-format json` one JSON object with `message` and `metadata`.
    /// - Parameters:
    ///   - message: The message (one line); the JSON object's `message`.
    ///   - text: What text output shows instead, whole lines without the last newline (a boxed banner).
    ///   - level: The JSON object's `level`.
    ///   - label: The JSON object's `label` (the program, or its logger's label).
    ///   - metadata: The JSON object's `metadata`.
    ///   - format: The format; the bootstrapped one unless given.
    public static func write(
        _ message: String, text: String? = nil, level: Logger.Level, label: String, metadata: Logger.Metadata = [:],
        format: LogFormat? = nil
    ) {
        switch format ?? self.format {
        case .text:
            StandardError.write(lines: (text ?? message) + "\n")
        case .json:
            StandardError.write(
                lines: LogLine.render(
                    .json, level: level, label: label, source: label, message: message, metadata: metadata))
        }
    }
}
