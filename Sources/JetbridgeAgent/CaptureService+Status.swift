import FileQueue
public import Foundation
import JetbridgeModel
import SystemSupport

/// What `status` shows: this device's configuration, its queue, and how sync last went.
/// Every key is written, an absent value as `null` (``NullWhenAbsent``).
public struct AgentStatus: Codable, Sendable, Hashable {
    public var device: String
    public var flight: String
    public var home: String
    /// The configuration file read, or `null` for built-in defaults.
    @NullWhenAbsent public var configuration: String?
    public var inventory: String
    public var queue: String
    /// Records in the queue's segment files (acknowledged ones stay until their segment is deleted).
    public var records: Int
    /// Records the ground has not acknowledged yet: what sync still has to send.
    public var unacknowledged: Int
    public var acknowledgedThrough: UInt64
    @NullWhenAbsent public var firstSequence: UInt64?
    @NullWhenAbsent public var lastSequence: UInt64?
    /// Damaged byte ranges copied out of segments (see FILEQUEUE.md).
    public var quarantined: Int
    /// Damage found that the next open will repair.
    public var unrepaired: Int
    public var segments: Int
    public var bytes: Int64
    /// Records the ground refused, set aside by sync in `<home>/rejected/`.
    public var rejected: Int
    public var rejectedDirectory: String
    /// When sync last ended, or `null` for never.
    @NullWhenAbsent public var lastSyncAt: Date?
    @NullWhenAbsent public var lastSyncResult: String?
    /// The last finished sync: `drained`, `stopped`, `timed-out` or `failed`; `null` for none.
    @NullWhenAbsent public var lastSyncOutcome: String?
    /// Its duration in seconds.
    @NullWhenAbsent public var lastSyncDurationSeconds: Double?
    /// Records the ground acknowledged during it.
    @NullWhenAbsent public var lastSyncAcknowledged: Int?
    /// Acknowledged records per second over it.
    @NullWhenAbsent public var lastSyncRecordsPerSecond: Double?

    enum CodingKeys: String, CodingKey {
        case device, flight, home, configuration, inventory, queue, records, unacknowledged, acknowledgedThrough
        case firstSequence, lastSequence, quarantined, unrepaired, segments, bytes, rejected, rejectedDirectory
        case lastSyncAt, lastSyncResult, lastSyncOutcome, lastSyncDurationSeconds, lastSyncAcknowledged
        case lastSyncRecordsPerSecond
    }
}

extension CaptureService {
    /// Reads the queue (without changing it) and the files sync keeps.
    /// - Throws: ``AgentError`` when the queue cannot be read.
    public func status() throws(AgentError) -> AgentStatus {
        let queueURL = configuration.queueDirectory
        // Reading changes no data, but a home an earlier version left readable by others is tightened here too.
        if FileManager.default.fileExists(atPath: configuration.home.url.path) {
            try configuration.home.prepare(queueDirectory: queueURL)
        }
        let queueStatus: FileQueueStatus
        if FileManager.default.fileExists(atPath: queueURL.path) {
            do {
                queueStatus = try FileQueue.check(directory: queueURL).status
            } catch {
                throw AgentError(.failure, "cannot read the queue \(queueURL.path): \(error)")
            }
        } else {
            queueStatus = FileQueueStatus(
                records: 0, bytes: 0, unacknowledged: 0, firstSequence: nil, lastSequence: nil,
                acknowledgedThrough: 0, quarantined: 0, segments: 0, unrepaired: 0)
        }
        let rejectedURL = configuration.home.rejectedDirectory
        let rejected =
            ((try? FileManager.default.contentsOfDirectory(atPath: rejectedURL.path)) ?? [])
            .filter { !$0.hasPrefix(".") }.count
        let syncState = try SyncState.load(from: configuration.home.syncStateFile)
        return AgentStatus(
            device: configuration.device, flight: configuration.flight.rawValue, home: configuration.home.url.path,
            configuration: configuration.file?.path, inventory: configuration.inventory.description,
            queue: queueURL.path, records: queueStatus.records, unacknowledged: queueStatus.unacknowledged,
            acknowledgedThrough: queueStatus.acknowledgedThrough, firstSequence: queueStatus.firstSequence,
            lastSequence: queueStatus.lastSequence, quarantined: queueStatus.quarantined,
            unrepaired: queueStatus.unrepaired, segments: queueStatus.segments, bytes: queueStatus.bytes,
            rejected: rejected, rejectedDirectory: rejectedURL.path, lastSyncAt: syncState?.lastSyncAt,
            lastSyncResult: syncState?.lastResult, lastSyncOutcome: syncState?.lastOutcome,
            lastSyncDurationSeconds: syncState?.lastDurationSeconds, lastSyncAcknowledged: syncState?.lastAcknowledged,
            lastSyncRecordsPerSecond: syncState?.lastRecordsPerSecond)
    }
}
