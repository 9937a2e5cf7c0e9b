public import Foundation

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

    public init(lastSyncAt: Date? = nil, lastResult: String? = nil, acknowledgedThrough: UInt64? = nil) {
        self.lastSyncAt = lastSyncAt
        self.lastResult = lastResult
        self.acknowledgedThrough = acknowledgedThrough
    }

    /// Reads the state file.
    /// - Returns: `nil` when there is no file (sync never ran).
    /// - Throws: ``AgentError`` when the file exists but cannot be read or decoded.
    public static func load(from url: URL) throws(AgentError) -> SyncState? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            return try decoder.decode(SyncState.self, from: Data(contentsOf: url))
        } catch {
            throw AgentError(.failure, "cannot read the sync state \(url.path): \(error)")
        }
    }

    /// The encoder sync should use to write the file.
    public static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        return encoder
    }
}
