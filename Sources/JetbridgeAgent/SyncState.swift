import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What `sync` last did, kept in `<home>/sync-state.json` so that `status` can show it.
///
/// Written by the sync command (atomically); read leniently: unknown keys are ignored, so sync may add more.
/// Dates are ISO 8601 strings in UTC.
public struct SyncState: Codable, Sendable, Hashable {
    /// When the last sync ended.
    public var lastSyncAt: Date?
    /// How it ended, for people: such as `drained`, `stopped with 12 records unacknowledged`.
    public var lastResult: String?
    /// The queue position the ground had acknowledged at that time.
    public var acknowledgedThrough: UInt64?
    /// How the last finished sync ended, for scripts: `drained`, `stopped`, `timed-out`, `failed`
    /// (``SyncOutcome/outcome``); nil while none has finished.
    public var lastOutcome: String?
    /// Its exit code.
    public var lastExitCode: Int32?
    /// How long it ran, in seconds.
    public var lastDurationSeconds: Double?
    /// Records the ground acknowledged during it.
    public var lastAcknowledged: Int?
    /// Acknowledged records per second over its whole run.
    public var lastRecordsPerSecond: Double?

    public init(lastSyncAt: Date? = nil, lastResult: String? = nil, acknowledgedThrough: UInt64? = nil) {
        self.lastSyncAt = lastSyncAt
        self.lastResult = lastResult
        self.acknowledgedThrough = acknowledgedThrough
    }

    /// The state after a finished run.
    public init(finished outcome: SyncOutcome, at date: Date = Date()) {
        self.init(lastSyncAt: date, lastResult: outcome.result, acknowledgedThrough: outcome.acknowledgedThrough)
        lastOutcome = outcome.outcome
        lastExitCode = outcome.exitCode
        lastDurationSeconds = outcome.statistics.elapsed
        lastAcknowledged = outcome.statistics.acknowledged
        lastRecordsPerSecond = outcome.recordsPerSecond
    }

    /// Reads the state file.
    /// - Returns: `nil` when there is no file (sync never ran).
    /// - Throws: ``AgentError`` when the file exists but cannot be read or decoded, or cannot be examined (no
    ///   permission on its directory: `FileManager.fileExists` answered that as "never synced").
    public static func load(from url: URL) throws(AgentError) -> SyncState? {
        guard try Files.isPresent(url) else { return nil }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return try decoder.decode(SyncState.self, from: Data(contentsOf: url))
        } catch {
            throw AgentError(.failure, "cannot read the sync state \(url.path): \(error)")
        }
    }

    /// The decoder for the files sync writes with ``encoder``.
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// The encoder sync should use to write the file.
    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }
}
