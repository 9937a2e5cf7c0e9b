import FileQueue
import JetbridgeModel
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

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
    /// Per flight this device holds records of: what was captured, acknowledged, confirmed by the ground, set aside
    /// (docs/AGENT.md, "Proof of delivery").
    public var flights: [FlightDelivery] = []
    /// One plain verdict over every flight: `all delivered and confirmed: safe to hand back`, or what is missing.
    public var verdict: String = ""
    /// Records the ground acknowledged during it.
    @NullWhenAbsent public var lastSyncAcknowledged: Int?
    /// Acknowledged records per second over it.
    @NullWhenAbsent public var lastSyncRecordsPerSecond: Double?
    /// The pid of the sync running on this home now (it holds `sync.lock`), `null` when none runs; 0 for one that
    /// has not written its pid yet.
    @NullWhenAbsent public var syncPID: Int32?

    enum CodingKeys: String, CodingKey {
        case device, flight, home, configuration, inventory, queue, records, unacknowledged, acknowledgedThrough
        case firstSequence, lastSequence, quarantined, unrepaired, segments, bytes, rejected, rejectedDirectory
        case lastSyncAt, lastSyncResult, lastSyncOutcome, lastSyncDurationSeconds, lastSyncAcknowledged
        case lastSyncRecordsPerSecond, syncPID, flights, verdict
    }
}

/// One flight's delivery as `status` shows it.
public struct FlightDelivery: Codable, Sendable, Hashable {
    public var flight: String
    /// Distinct records captured for the flight (orders once, at any revision; set-aside ones included).
    public var captured: Int
    /// Of those, acknowledged stored by the ground (each order at its highest acknowledged revision).
    public var acknowledged: Int
    /// Captured, not acknowledged yet: what sync still has to send.
    public var unacknowledged: Int
    /// Refused by the ground, set aside in `rejected/`: not delivered.
    public var setAside: Int
    /// Whether the ground confirmed that it holds every acknowledged record of the flight, as the device holds them now.
    public var confirmed: Bool
    /// When it confirmed them.
    @NullWhenAbsent public var confirmedAt: Date?
    /// What remains for this flight, or `delivered and confirmed`.
    public var verdict: String
}

extension CaptureService {
    /// Reads the queue (without changing it) and the files sync keeps.
    /// - Throws: ``AgentError`` when the queue cannot be read.
    public func status() throws(AgentError) -> AgentStatus {
        let queueURL = configuration.queueDirectory
        // Reading changes no data, but a home an earlier version left readable by others is tightened here too.
        // A home or a queue that cannot be examined is an error, not an empty device (before, a home this user may
        // not read showed nothing held, and exit 0).
        let hasHome = try Files.isPresent(configuration.home.url)
        if hasHome {
            try configuration.home.prepare(queueDirectory: queueURL, creatingQueue: false)
        }
        let queueStatus: FileQueueStatus
        let hasQueue = try Files.isPresent(queueURL)
        // A home that does not exist (nor a queue configured outside it) is most often a mistyped `--home`: shown as
        // an empty device, it read `nothing captured` with exit 0 for a device that may hold records elsewhere.
        // Capture and `keys generate` create the home; `sync` refuses it the same way.
        guard hasHome || hasQueue else {
            throw AgentError(
                .noInput,
                "no device home at \(configuration.home.url.path): nothing was captured there (check --home or JETBRIDGE_HOME; a new device's home is made by its first capture or `keys generate`)"
            )
        }
        if hasQueue {
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
        let rejected = try Files.entries(rejectedURL).filter { !$0.hasPrefix(".") }.count
        let flights = try deliveries(queue: hasQueue ? queueURL : nil, acknowledgedThrough: queueStatus.acknowledgedThrough)
        // The state and the lock's holder are read last, together. A state that says running with no holder is read
        // again: a sync that finished meanwhile wrote its last state before it let the lock go.
        var syncState = try SyncState.load(from: configuration.home.syncStateFile)
        let syncPID = FileLock.holder(of: configuration.home.syncLockFile.path)
        if syncPID == nil, syncState?.lastResult?.hasPrefix("running") == true {
            syncState = try SyncState.load(from: configuration.home.syncStateFile)
        }
        var status = AgentStatus(
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
        status.flights = flights
        status.syncPID = syncPID
        status.verdict = Self.verdict(
            flights, damaged: queueStatus.quarantined,
            quarantine: queueURL.appendingPathComponent("quarantine").path,
            unreadableSetAside: try setAsideRecords().count { $0.problem != nil },
            superseded: try Files.entries(rejectedURL).count { $0.contains(".json.superseded-") }, rejected: rejectedURL.path)
        return status
    }

    /// One verdict for a crew member: safe to hand back, or what is missing.
    ///
    /// Damage in the queue (`damaged`: entries quarantined) is missing too: bytes of records that could not be read
    /// back, so not delivered, and no flight's line counts them. Before, a device whose queue had quarantined damage
    /// read safe to hand back. (Damage found and not yet repaired is left out: most often the torn end of a capture a
    /// crash interrupted, which never returned, and the next capture or sync repairs it, quarantining what it must.)
    /// So is a set-aside file that cannot be read or decoded (`unreadableSetAside`): a refused record of no known
    /// flight.
    static func verdict(
        _ flights: [FlightDelivery], damaged: Int = 0, quarantine: String = "", unreadableSetAside: Int = 0,
        superseded: Int = 0,
        rejected: String = ""
    ) -> String {
        var open = flights.filter { !$0.confirmed || $0.unacknowledged > 0 || $0.setAside > 0 }
            .map { "\($0.flight) \($0.verdict)" }
        if damaged > 0 {
            open.append(
                "\(NumberText.grouped(damaged)) damaged entr\(damaged == 1 ? "y" : "ies") in the queue, not delivered (records that could not be read back; their bytes are kept in \(quarantine): look at them, see docs/FILEQUEUE.md, then move that file away)"
            )
        }
        if superseded > 0 {
            open.append(
                "\(NumberText.grouped(superseded)) superseded set-aside file\(superseded == 1 ? "" : "s") in \(rejected) (`<sequence>.json.superseded-…`: records the ground refused from a queue replaced since, not delivered and not resent by `set-aside`: look at them, then move them away)"
            )
        }
        if unreadableSetAside > 0 {
            open.append(
                "\(NumberText.grouped(unreadableSetAside)) set-aside file\(unreadableSetAside == 1 ? "" : "s") in \(rejected) that cannot be read or decoded (records the ground refused, of no known flight, not delivered; `set-aside list` names them)"
            )
        }
        guard !open.isEmpty else {
            return flights.isEmpty
                ? "nothing captured" : "all delivered and confirmed: safe to hand back"
        }
        return "NOT SAFE TO HAND BACK: " + open.joined(separator: "; ")
    }

    /// Per flight: captured (queue, archive, set aside), acknowledged and confirmed (``DeliveryArchive``), set aside.
    /// - Throws: ``AgentError`` when `delivered/` or `rejected/` exists and cannot be read: what they hold must not
    ///   read as nothing.
    func deliveries(queue: URL?, acknowledgedThrough: UInt64) throws(AgentError) -> [FlightDelivery] {
        let archive = DeliveryArchive(home: configuration.home)
        _ = try Files.entries(archive.directory)
        let confirmations = archive.confirmations()
        let held = try archive.heldRecords()
        let holdings = archive.holdings(held, confirmations: confirmations)
        let acknowledgedIDs = holdings.mapValues(\.ids)
        // A record past the queue's acknowledged position may have been acknowledged already (acks come in any
        // order): it has when `delivered/` holds it, a scan by its id, an order at its revision or a later one. An
        // amendment queued after its order was acknowledged is not delivered until its own revision is.
        // An order retention released is delivered too, at the revision released: before, a set-aside older revision
        // of an order released since read as not delivered, and the verdict went back to NOT SAFE.
        let released = archive.releasedRevisions(confirmations)
        func delivered(_ record: RecordIdentity) -> Bool {
            record.isOrder
                ? max(held.orders[record.id]?.revision ?? 0, released[record.id] ?? 0) >= record.revision
                : held.scans[record.id] != nil
        }
        let setAsideSequences = try SetAside.sequences(in: configuration.home)
        // Each file's record, read once (nil: it cannot be read or decoded).
        var setAsideEntries: [UInt64: SetAside.Entry?] = [:]
        for sequence in setAsideSequences {
            setAsideEntries[sequence] = try? SetAside.read(SetAside.file(for: sequence, in: configuration.home))
        }
        var pending: [String: Set<UUID>] = [:]
        if let queue {
            // Each record's identity (type, id, revision, flight) is all this needs, and it is read without decoding
            // the rest: a record still in the queue counts as not acknowledged even if the ground would refuse it.
            var stream = RecordCoding.Stream()
            try? FileQueue.forEachRecord(directory: queue, from: acknowledgedThrough + 1) { sequence, payload in
                // A set-aside file at this sequence stands for the queue's record only when it holds that record
                // (a file left by a queue replaced since holds another: this one is still to send).
                if let entry = setAsideEntries[sequence], entry.map({ $0.record.elementsEqual(payload) }) ?? true {
                    return
                }
                guard let record = try? stream.identity(payload), !delivered(record) else { return }
                pending[record.flight.rawValue, default: []].insert(record.id)
            }
        }
        var setAside: [String: Set<UUID>] = [:]
        for sequence in setAsideSequences {
            guard let entry = setAsideEntries[sequence] ?? nil,
                let record = try? RecordCoding.decode(entry.record), !delivered(RecordIdentity(record))
            else { continue }
            setAside[record.flight.rawValue, default: []].insert(record.id)
        }
        let names = Set(holdings.keys).union(pending.keys).union(setAside.keys).union(
            confirmations.filter { $0.value.releasedAt != nil }.keys)
        return names.sorted().map { flight in
            let acknowledged = acknowledgedIDs[flight] ?? []
            let unacknowledged = pending[flight] ?? []
            let refused = setAside[flight] ?? []
            // An amendment waiting is one more revision of an order already counted (held, or released by
            // retention), not one more record.
            let releasedIDs = Set((confirmations[flight]?.releasedOrders ?? [:]).keys.compactMap { UUID(uuidString: $0) })
            let capturedElsewhere = unacknowledged.union(refused).subtracting(acknowledged).subtracting(releasedIDs)
                .count
            let confirmation = confirmations[flight]
            let held = holdings[flight]?.summary ?? DeliverySummary()
            let released = confirmation?.releasedAt != nil && holdings[flight] == nil
            // A flight whose file holds only orders amended into other flights since holds nothing the ground counts
            // under it (those orders are delivered or not under their new flights): nothing of it waits for a
            // confirmation. Before, it read `NOT SAFE TO HAND BACK: <flight> delivered and confirmed` until retention
            // released its file.
            let emptied = holdings[flight] != nil && held.count == 0
            let confirmed = released || emptied || (confirmation?.summary == held && held.count > 0)
            let acknowledgedCount = released ? confirmation!.count : held.count
            var missing: [String] = []
            if !unacknowledged.isEmpty { missing.append("\(unacknowledged.count) not acknowledged yet: run sync") }
            if acknowledgedCount > 0 && !confirmed {
                missing.append("\(acknowledgedCount) acknowledged but not confirmed by the ground: run sync")
            }
            if !refused.isEmpty {
                missing.append(
                    "\(refused.count) set aside (refused by the ground) in \(configuration.home.rejectedDirectory.path): "
                        + "`set-aside list` shows why, `set-aside resend` queues them again")
            }
            return FlightDelivery(
                flight: flight,
                captured: acknowledgedCount + capturedElsewhere,
                acknowledged: acknowledgedCount, unacknowledged: unacknowledged.count,
                setAside: refused.count, confirmed: confirmed && unacknowledged.isEmpty,
                confirmedAt: confirmed ? confirmation?.confirmedAt : nil,
                verdict: !missing.isEmpty
                    ? missing.joined(separator: ", ")
                    : emptied
                        ? "nothing left to deliver: its orders were amended into other flights"
                        : "delivered and confirmed")
        }
    }
}
