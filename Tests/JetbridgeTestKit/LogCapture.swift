import Foundation
public import Logging

/// A logger that prints nothing: for code under test whose lines the test does not read.
public let quietLogger = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

/// Keeps every log line as `StreamLogHandler` would print it (level, message, then metadata sorted by key), under a
/// key of the test's choosing, so a test can read what the code it runs logged — the one log capture the suites share.
public final class CapturingLogHandler: LogHandler, @unchecked Sendable {
    private static let lock = NSLock()
    nonisolated(unsafe) private static var storage: [String: [String]] = [:]
    /// Whose lines these are.
    public let key: String
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(key: String) { self.key = key }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let line =
            "\(event.level) \(event.message) "
            + all.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " ")
        Self.lock.withLock { Self.storage[key, default: []].append(line) }
    }

    /// A logger whose lines go under `key` (a fresh UUID string keeps tests apart).
    public static func logger(_ key: String) -> Logger {
        Logger(label: "test", factory: { _ in CapturingLogHandler(key: key) })
    }

    /// The lines logged under `key` so far.
    public static func lines(_ key: String) -> [String] { lock.withLock { storage[key] ?? [] } }

    /// Whether a line logged under `key` contains `text`.
    public static func logged(_ key: String, _ text: String) -> Bool { lines(key).contains { $0.contains(text) } }
}
