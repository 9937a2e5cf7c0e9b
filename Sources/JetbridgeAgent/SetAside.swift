import FileQueue
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Records the ground refused, kept on the device in `<home>/rejected/<sequence>.json`.
///
/// One file per record, so that `status` (which counts the directory's entries) counts records. The file holds the
/// record's exact bytes (base64 of the MessagePack) next to the reason, so an operator can read why and, once the
/// cause is fixed, feed the bytes back.
enum SetAside {
    /// What one file holds.
    struct Entry: Codable {
        var sequence: UInt64
        var device: String
        var reason: String
        var batch: String
        var setAsideAt: Date
        /// The record's MessagePack bytes, base64.
        var record: Data
    }

    /// Writes one refused record durably (before the queue may be acknowledged past it).
    /// - Parameters:
    ///   - record: The record as read from the queue.
    ///   - reason: The ground's reason.
    ///   - batch: The refused batch's name, for people.
    ///   - device: This device's id.
    ///   - home: The agent's home.
    /// - Throws: ``AgentError`` when the file cannot be written.
    static func write(
        _ record: SyncWindow.Record, reason: String, batch: String, device: String, home: AgentHome
    ) throws(AgentError) {
        try Files.makeDirectory(home.rejectedDirectory)
        let entry = Entry(
            sequence: record.sequence, device: device, reason: reason, batch: batch, setAsideAt: Date(),
            record: record.payload)
        let data: Data
        do {
            data = try SyncState.encoder.encode(entry)
        } catch {
            throw AgentError(.failure, "cannot encode the set-aside record \(record.sequence): \(error)")
        }
        let target = file(for: record.sequence, in: home)
        // A file of another record at this sequence (a queue replaced since: its numbering started again) is kept
        // beside, not written over: it is the only copy of that refused record.
        if let held = try? read(target), held.record != record.payload {
            try Files.rename(target, to: supersededFile(for: record.sequence, in: home, at: Date()))
        }
        try Files.writeAtomically(data, to: target)
    }

    /// Where ``write(_:reason:batch:device:home:)`` keeps a file of another record at the same sequence:
    /// `<sequence>.json.superseded-<unix seconds>` (not listed, counted or resent; for someone to look at).
    static func supersededFile(for sequence: UInt64, in home: AgentHome, at date: Date) -> URL {
        home.rejectedDirectory.appendingPathComponent("\(sequence).json.superseded-\(Int(date.timeIntervalSince1970))")
    }

    /// The set-aside files among `sequences` that hold another record than the queue's at their sequence: left by a
    /// queue that was replaced since (a new queue directory numbers from 1 again). Skipped by sequence alone, the
    /// queue's own record there was never sent, and sync acknowledged the queue past it. A file that cannot be read,
    /// or whose sequence the queue no longer holds, is not counted.
    /// - Parameter queued: The queue's record at a sequence, or nil when it holds none.
    static func stale(_ sequences: Set<UInt64>, in home: AgentHome, queued: (UInt64) throws -> Data?) rethrows
        -> Set<UInt64>
    {
        var stale: Set<UInt64> = []
        for sequence in sequences {
            guard let record = try queued(sequence), let held = try? read(file(for: sequence, in: home)),
                held.record != record
            else { continue }
            stale.insert(sequence)
        }
        return stale
    }

    /// Reads one set-aside file.
    /// - Throws: The file system's or the decoder's error.
    static func read(_ file: URL) throws -> Entry {
        try SyncState.decoder.decode(Entry.self, from: Data(contentsOf: file))
    }

    /// The file for one sequence.
    static func file(for sequence: UInt64, in home: AgentHome) -> URL {
        home.rejectedDirectory.appendingPathComponent("\(sequence).json")
    }

    /// Sequences already set aside, so a new sync does not send them again.
    /// - Throws: ``AgentError`` when `rejected/` exists and cannot be read (before, it read as holding nothing).
    static func sequences(in home: AgentHome) throws(AgentError) -> Set<UInt64> {
        let names = try Files.entries(home.rejectedDirectory)
        return Set(names.compactMap { name in name.hasSuffix(".json") ? UInt64(name.dropLast(5)) : nil })
    }
}
