import FileQueue
import JetbridgeModel
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// One record the ground refused, as `set-aside list` shows it (``SetAside`` holds the file).
public struct SetAsideRecord: Codable, Sendable, Hashable {
    /// The record's queue sequence when it was refused (the file's name).
    public var sequence: UInt64
    /// `order` or `scan`; `nil` when the file cannot be read.
    public var kind: String?
    public var id: UUID?
    public var flight: String?
    /// The ground's reason.
    public var reason: String?
    /// The refused batch's name.
    public var batch: String?
    public var setAsideAt: Date?
    /// The file's path.
    public var file: String
    /// Why the file cannot be read or decoded; `nil` when it can.
    public var problem: String?
}

/// What `set-aside resend` did with one record.
public struct ResentRecord: Codable, Sendable, Hashable {
    /// The sequence it was set aside under.
    public var from: UInt64
    /// Its new sequence in the queue: the next sync sends it.
    public var to: UInt64
}

extension CaptureService {
    /// The records set aside in `<home>/rejected/`, by sequence. An unreadable file is listed with its problem.
    /// - Throws: ``AgentError`` when `rejected/` cannot be read.
    public func setAsideRecords() throws(AgentError) -> [SetAsideRecord] {
        try SetAside.sequences(in: configuration.home).sorted().map { sequence in
            let file = SetAside.file(for: sequence, in: configuration.home)
            var listed = SetAsideRecord(sequence: sequence, file: file.path)
            do {
                let entry = try SetAside.read(file)
                listed.reason = entry.reason
                listed.batch = entry.batch
                listed.setAsideAt = entry.setAsideAt
                let record = try RecordCoding.decode(entry.record)
                listed.id = record.id
                listed.flight = record.flight.rawValue
                if case .order = record { listed.kind = "order" } else { listed.kind = "scan" }
            } catch {
                listed.problem = "\(error)"
            }
            return listed
        }
    }

    /// Puts set-aside records back into the queue, so that the next sync sends them again (once the cause the
    /// ground gave is fixed: an item added to its inventory, a device allowed again), and removes their files.
    ///
    /// Every file is read and checked before anything is appended, so one unreadable file changes nothing. The
    /// records are appended durably (one group commit) before their files are removed: a crash in between leaves a
    /// record both queued and set aside, and a second resend is absorbed by the ground's deduplication by id.
    ///
    /// - Parameter sequences: The set-aside sequences; every one must be set aside.
    /// - Returns: Each record's old and new sequence.
    /// - Throws: ``AgentError`` `dataError` for a sequence not set aside or a file that cannot be read, `tryAgain`
    ///   for a full queue or disk.
    public func resendSetAside(_ sequences: [UInt64]) throws(AgentError) -> [ResentRecord] {
        let files = try setAsideFiles(sequences)
        var payloads: [Data] = []
        for (sequence, file) in files {
            let entry: SetAside.Entry
            do {
                entry = try SetAside.read(file)
                let record = try RecordCoding.decode(entry.record)
                guard record.device == configuration.device else {
                    throw AgentError(
                        .dataError,
                        "set-aside record \(sequence) (\(file.path)) was captured by device \(record.device), not \(configuration.device): nothing was resent")
                }
            } catch let error as AgentError {
                throw error
            } catch {
                throw AgentError(
                    .dataError, "cannot read the set-aside record \(sequence) (\(file.path)): \(error); nothing was resent")
            }
            payloads.append(entry.record)
        }
        guard !payloads.isEmpty else { return [] }
        let queue = try openQueue()
        let first: UInt64
        do {
            first = try queue.append(contentsOf: payloads).lowerBound
        } catch {
            throw AgentError(queue: error, home: configuration.home)
        }
        for (_, file) in files { try Files.io(FileSystem.unlinkIfExists(file.path)) }
        try Files.syncDirectory(configuration.home.rejectedDirectory)
        return files.enumerated().map { offset, element in ResentRecord(from: element.0, to: first + UInt64(offset)) }
    }

    /// Gives up on set-aside records: their files move to `<home>/discarded/` (kept for the record, never sent, no
    /// longer counted as set aside or captured by `status`).
    ///
    /// - Parameter sequences: The set-aside sequences; every one must be set aside.
    /// - Returns: The files as they are now.
    /// - Throws: ``AgentError`` `dataError` for a sequence not set aside.
    public func discardSetAside(_ sequences: [UInt64]) throws(AgentError) -> [URL] {
        let files = try setAsideFiles(sequences)
        guard !files.isEmpty else { return [] }
        // A record still in the queue past its acknowledged position (a sync stopped before the batches around it
        // were stored) would be read and sent by the next sync once its file is gone from `rejected/`: never sent,
        // as the operator asked, only while sync skips it first and acknowledges the queue past it.
        if try Files.isPresent(configuration.queueDirectory) {
            let status: FileQueueStatus
            do {
                status = try FileQueue(directory: configuration.queueDirectory).status()
            } catch {
                throw AgentError(queue: error, home: configuration.home)
            }
            let waiting = files.map(\.0).filter { $0 > status.acknowledgedThrough && $0 <= (status.lastSequence ?? 0) }
            if !waiting.isEmpty {
                throw AgentError(
                    .tryAgain,
                    "set-aside record\(waiting.count == 1 ? "" : "s") \(waiting.map(String.init).joined(separator: ", ")) \(waiting.count == 1 ? "is" : "are") still in the queue, past its acknowledged position (a sync stopped before the records around \(waiting.count == 1 ? "it" : "them") were stored), and the next sync would send \(waiting.count == 1 ? "it" : "them") once discarded: run `\(configuration.home.command("sync"))` first (it skips set-aside records), then discard; nothing was discarded"
                )
            }
        }
        let discarded = configuration.home.discardedDirectory
        try Files.makeDirectory(discarded)
        var moved: [URL] = []
        for (_, file) in files {
            let target = discarded.appendingPathComponent(file.lastPathComponent)
            try Files.io(FileSystem.rename(file.path, to: target.path))
            moved.append(target)
        }
        try Files.syncDirectory(discarded)
        try Files.syncDirectory(configuration.home.rejectedDirectory)
        return moved
    }

    /// The files of `sequences`, in order, each checked to be set aside.
    private func setAsideFiles(_ sequences: [UInt64]) throws(AgentError) -> [(UInt64, URL)] {
        let held = try SetAside.sequences(in: configuration.home)
        var seen = Set<UInt64>()
        var files: [(UInt64, URL)] = []
        for sequence in sequences where seen.insert(sequence).inserted {
            guard held.contains(sequence) else {
                throw AgentError(
                    .dataError,
                    "no set-aside record \(sequence) in \(configuration.home.rejectedDirectory.path) (`\(configuration.home.command("set-aside list"))` lists them); nothing was changed")
            }
            files.append((sequence, SetAside.file(for: sequence, in: configuration.home)))
        }
        return files
    }
}
