public import Logging
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where log lines go: one `write(2)` per line under a lock, so lines of several threads never interleave.
public final class LogSink: Sendable {
    private let lock = ConditionLock()
    private let write: @Sendable (String) -> Void

    /// A sink that passes each line (newline included) to `write`.
    public init(_ write: @escaping @Sendable (String) -> Void) {
        self.write = write
    }

    /// Standard error, through SystemSupport's `StandardError`: a status line on screen (sync's progress bar) is
    /// cleared before the line and drawn again after it, so a log line never continues it.
    public static let standardError = LogSink { line in StandardError.write(lines: line) }

    func emit(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        write(line)
    }
}

/// The log handler of every tool: text or JSON lines, with every control, bidi and zero-width character in messages
/// and metadata escaped, because devices send free text and a raw ESC or CR in a log would reach the operator's
/// terminal or split a line for the log shipper.
public struct JetbridgeLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let format: LogFormat
    private let sink: LogSink

    /// - Parameters:
    ///   - label: The logger's label.
    ///   - level: The lowest level written.
    ///   - format: Text or JSON.
    ///   - sink: Where lines go (standard error by default).
    public init(
        label: String, level: Logger.Level, format: LogFormat, sink: LogSink = .standardError,
        metadataProvider: Logger.MetadataProvider? = nil
    ) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.sink = sink
        self.metadataProvider = metadataProvider
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let own = event.metadata { merged.merge(own) { $1 } }
        if let error = event.error, merged["error"] == nil { merged["error"] = "\(error)" }
        sink.emit(
            LogLine.render(
                format, level: event.level, label: label, source: event.source,
                message: event.message.description, metadata: merged))
    }
}

/// One log line in either format, as the handler writes it; also for lines the command line writes itself (its final
/// error, a warning banner), so that with `--log-format json` every line on standard error is one JSON object.
public enum LogLine {
    /// The line, newline included.
    /// - Parameters:
    ///   - format: Text or JSON.
    ///   - level: The event's level.
    ///   - label: The logger's label (`jetbridge-agent.sync`).
    ///   - source: The module that logged it (text lines show it as `[JetbridgeAgent]`).
    ///   - message: The message.
    ///   - metadata: The metadata.
    public static func render(
        _ format: LogFormat, level: Logger.Level, label: String, source: String, message: String,
        metadata: Logger.Metadata
    ) -> String {
        let time = timestamp()
        switch format {
        case .text:
            let pairs = metadata.sorted { $0.key < $1.key }.map {
                LogEscaping.text($0.key) + "=" + MetadataLayout.text.render($0.value)
            }
            let fields = pairs.isEmpty ? "" : " " + pairs.joined(separator: " ")
            // StreamLogHandler's layout (so existing readers keep working), with escaping and UTC milliseconds.
            return "\(time) \(level) \(LogEscaping.text(label)):\(fields) [\(source)] \(LogEscaping.text(message))\n"
        case .json:
            var line = "{\"time\":\"\(time)\",\"level\":\"\(level)\",\"label\":"
            line += LogEscaping.jsonString(label)
            line += ",\"message\":" + LogEscaping.jsonString(message)
            line += ",\"metadata\":" + MetadataLayout.json.render(.dictionary(metadata)) + "}\n"
            return line
        }
    }

    /// UTC, milliseconds: `2026-11-24T14:47:10.123Z`.
    static func timestamp() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let millis = spec.tv_nsec / 1_000_000
        let ms = millis < 10 ? "00\(millis)" : millis < 100 ? "0\(millis)" : "\(millis)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):"
            + "\(two(parts.tm_min)):\(two(parts.tm_sec)).\(ms)Z"
    }
}

/// How a metadata value is written: in text lines `[a, b]` and `[key: value]`, in JSON lines `[a,b]` and
/// `{"key":value}`; dictionaries sorted by key, so a line does not depend on hashing order.
///
/// In JSON lines a number logged as a number (`.stringConvertible(count)`: an integer, a finite floating-point
/// value) is a JSON number and a `Bool` is `true`/`false`; everything else, text logged as text (`"\(count)"`
/// included), is a string. Text lines show both alike.
private struct MetadataLayout: Sendable {
    let json: Bool
    let escape: @Sendable (String) -> String
    let separator: String
    let keySeparator: String
    let dictionaryOpen: String
    let dictionaryClose: String

    static let text = MetadataLayout(
        json: false, escape: LogEscaping.text, separator: ", ", keySeparator: ": ", dictionaryOpen: "[",
        dictionaryClose: "]")
    static let json = MetadataLayout(
        json: true, escape: LogEscaping.jsonString, separator: ",", keySeparator: ":", dictionaryOpen: "{",
        dictionaryClose: "}")

    func render(_ value: Logger.MetadataValue) -> String {
        switch value {
        case .string(let string): escape(string)
        case .stringConvertible(let value): (json ? Self.jsonLiteral(value) : nil) ?? escape(value.description)
        case .array(let values): "[" + values.map(render).joined(separator: separator) + "]"
        case .dictionary(let values):
            dictionaryOpen
                + values.sorted { $0.key < $1.key }.map { escape($0.key) + keySeparator + render($0.value) }
                .joined(separator: separator) + dictionaryClose
        }
    }

    /// `value` as a JSON number or boolean, or nil when it is neither (then it is written as a string).
    private static func jsonLiteral(_ value: any CustomStringConvertible & Sendable) -> String? {
        switch value {
        case let value as any BinaryInteger: "\(value)"
        case let value as Double where value.isFinite: "\(value)"
        case let value as Float where value.isFinite: "\(value)"
        case let value as Bool: value ? "true" : "false"
        default: nil
        }
    }
}
