import Glibc
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A durable, append-only, segmented queue of opaque records in a directory, safe to share between processes.
///
/// - `append` returns a record's sequence number only once the record is on disk (with ``SyncPolicy/always``);
///   `append(contentsOf:)` stores many records with one sync per segment (group commit).
/// - `read(from:maxRecords:maxBytes:)` returns complete, checksummed records in sequence order.
/// - `acknowledge(through:)` persists the consumer's position atomically and then deletes segments whose
///   records are all acknowledged.
///
/// **Threads.** A `FileQueue` is `Sendable`: appends and acknowledgements are serialised by one mutex,
/// reads by another, so a reader thread does not wait for an appender's `fdatasync`. All calls block on
/// file I/O; call them from a thread of your own, not from Swift's cooperative pool.
///
/// **Processes.** Any number of processes may open the same directory. Every change takes an exclusive
/// `flock` on the `lock` file and first catches up with what other processes did (appended, rotated,
/// repaired), so sequence numbers stay unique and increasing. A reader takes the lock shared only to note
/// how far the files go; it therefore sees only records whose append has completed (and been synced), never a
/// write in progress. Damage a reader meets is repaired under the exclusive lock, then the read continues.
/// See `docs/FILEQUEUE.md` for the format and the crash-safety argument.
public final class FileQueue: Sendable {
    /// One stored record.
    public struct Record: Sendable, Hashable {
        /// Its sequence number: unique in the queue, increasing in append order, starting at 1.
        public var sequence: UInt64
        /// The bytes given to `append`.
        public var payload: Data

        public init(sequence: UInt64, payload: Data) {
            self.sequence = sequence
            self.payload = payload
        }
    }

    /// The queue directory.
    public let directory: URL
    /// The settings this instance was opened with.
    public let configuration: Configuration

    let files: QueueDirectory
    let writer: Locked<Writer>
    let reader: Locked<Reader>

    /// Opens the queue in `directory`, creating the directory and an empty queue if needed, and recovers it.
    ///
    /// Recovery, under the exclusive lock: segments whose records are all acknowledged are deleted (a crash
    /// may have interrupted that); the tail segment — every segment with ``Verification/all`` — is checked,
    /// a torn tail truncated, corrupt frames copied to the quarantine file and skipped.
    /// - Parameters:
    ///   - directory: the queue directory.
    ///   - configuration: settings for this process.
    /// - Throws: ``FileQueueError`` if the directory cannot be created or read.
    public init(directory: URL, configuration: Configuration = Configuration()) throws(FileQueueError) {
        try configuration.validate()
        self.directory = directory
        self.configuration = configuration
        let path = directory.path
        try io(FileSystem.makeDirectories(path))
        files = QueueDirectory(path: path)
        let lockPath = path + "/" + QueueDirectory.lockName
        let writerState = Writer(
            lock: try FileDescriptor.open(lockPath, O_RDWR | O_CREAT),
            directory: try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY))
        writer = Locked(writerState)
        reader = Locked(Reader(lock: try FileDescriptor.open(lockPath, O_RDWR | O_CREAT)))
        try writer.withLock { (state) throws(FileQueueError) in
            try state.lock.lock(exclusive: true)
            defer { state.lock.unlock() }
            try recoverOnOpen(&state)
        }
    }

    /// Opens (and recovers) the queue in `directory`; the same as ``init(directory:configuration:)``.
    public static func open(
        directory: URL, configuration: Configuration = Configuration()
    ) throws(FileQueueError) -> FileQueue {
        try FileQueue(directory: directory, configuration: configuration)
    }

    var sync: Bool { configuration.syncPolicy == .always }

    func step(_ name: String) {
        configuration._stepHook?(name)
    }
}

// MARK: - Writing

extension FileQueue {
    /// The tail segment as this process last saw it.
    struct Tail {
        var first: UInt64
        var file: FileDescriptor
        /// Offset after the last valid frame: where the next frame goes.
        var end: Int64
        /// The highest sequence assigned so far (`first - 1` in an empty segment).
        var lastSequence: UInt64
    }

    struct Writer {
        let lock: FileDescriptor
        let directory: FileDescriptor
        var tail: Tail?
        /// Bytes of the segments before the tail, possibly stale (too high) after another process deleted some.
        var sealedBytes: Int64 = 0

        init(lock: FileDescriptor, directory: FileDescriptor) {
            self.lock = lock
            self.directory = directory
        }
    }

    private func recoverOnOpen(_ state: inout Writer) throws(FileQueueError) {
        try? FileSystem.unlinkIfExists(files.path + "/" + AckFile.spareName + ".new")
        let acknowledged = try files.acknowledged()
        try files.deleteAcknowledgedSegments(through: acknowledged, sync: sync, hook: step)
        if configuration.verification == .all {
            for first in try files.segments().dropLast() {
                try files.repair(segment: first, isTail: false, sync: sync)
            }
        }
        try reloadTail(&state)
        AckFile.prepareSpare(directory: files.path)
    }

    /// The slow path: finds the tail segment from the directory listing and checks (repairs) it in full.
    private func reloadTail(_ state: inout Writer) throws(FileQueueError) {
        state.tail = nil
        let acknowledged = try files.acknowledged()
        var firsts = try files.segments()
        if firsts.isEmpty {
            let first = acknowledged + 1
            _ = try FileDescriptor.open(files.segmentPath(first), O_RDWR | O_CREAT)
            if sync { try state.directory.sync() }
            firsts = [first]
        }
        let first = firsts.last!
        let scan = try files.repair(segment: first, isTail: true, sync: sync)
        let file = try FileDescriptor.open(files.segmentPath(first), O_RDWR)
        // A sequence at or below the acknowledged position must never be handed out again, even if the
        // records that had it were lost to damage: the consumer would take the new record as acknowledged.
        var last = max(scan.lastSequence ?? (first &- 1), first &- 1, acknowledged)
        // Bad bytes quarantined from the end of this segment may have held records that were read already;
        // frames are at least a header long and numbered consecutively, which bounds their sequences.
        for entry in try QuarantineFile.read(files.quarantinePath).entries
        where entry.segment == first && entry.nextSequence == 0 {
            let before = entry.previousSequence == 0 ? first &- 1 : entry.previousSequence
            last = max(last, before &+ UInt64(entry.rawLength / Frame.headerSize))
        }
        state.tail = Tail(first: first, file: file, end: Int64(scan.validEnd), lastSequence: last)
        var sealed: Int64 = 0
        for other in firsts.dropLast() { sealed += (try? FileSystem.fileSize(files.segmentPath(other))) ?? 0 }
        state.sealedBytes = sealed
    }

    /// Catches up with other processes under the exclusive lock: frames they appended to the tail, a torn
    /// frame a killed one left, a segment they started.
    private func refreshTail(_ state: inout Writer) throws(FileQueueError) {
        guard var tail = state.tail, let size = try tail.file.sizeIfLinked() else { return try reloadTail(&state) }
        if size < tail.end { return try reloadTail(&state) }
        if size > tail.end {
            let bytes = try tail.file.readAll(from: tail.end, to: size)
            let scan = bytes.withUnsafeBytes { SegmentScan($0, base: Int(tail.end), previous: tail.lastSequence) }
            guard scan.damages.isEmpty else { return try reloadTail(&state) }
            tail.end = Int64(scan.validEnd)
            tail.lastSequence = scan.lastSequence ?? tail.lastSequence
            state.tail = tail
        }
        // Rotation names the new segment after the next sequence, so one stat tells whether another process
        // started a segment after ours.
        if tail.lastSequence &+ 1 != tail.first && FileSystem.exists(files.segmentPath(tail.lastSequence &+ 1)) {
            try reloadTail(&state)
        }
    }

    private func rotate(_ state: inout Writer) throws(FileQueueError) {
        let old = state.tail!
        let first = old.lastSequence &+ 1
        let file = try FileDescriptor.open(files.segmentPath(first), O_RDWR | O_CREAT)
        guard try file.size() == 0 else {
            throw FileQueueError(
                .corruptQueue, "a segment named after the next sequence already holds data; run fsck",
                path: file.path, sequence: first)
        }
        if sync {
            do {
                try state.directory.sync()
            } catch {
                // The caller undoes what its call wrote, and this segment is not its tail yet: it goes here, or the
                // failed call would leave an empty segment (a gap in the sequences, with nothing quarantined).
                try? FileSystem.unlinkIfExists(file.path)
                throw error
            }
        }
        step("rotate.created")
        state.sealedBytes += old.end
        state.tail = Tail(first: first, file: file, end: 0, lastSequence: first &- 1)
    }

    /// Appends one record and returns its sequence number once it is durable.
    /// - Parameter payload: the record's bytes (at most ``Configuration/maxRecordSize``).
    /// - Returns: the record's sequence number.
    /// - Throws: ``FileQueueError`` — `.noSpace`, `.sizeCapReached`, `.recordTooLarge`, `.io`; nothing was
    ///   stored then.
    @discardableResult
    public func append(_ payload: some ContiguousBytes) throws(FileQueueError) -> UInt64 {
        try append(contentsOf: CollectionOfOne(payload)).lowerBound
    }

    /// Appends records with one `fdatasync` per segment touched (group commit) and returns their sequences.
    ///
    /// All or nothing: if a write or sync fails, what this call wrote is truncated away before it throws.
    /// A crash (rather than an error) may leave a prefix of the records stored.
    /// - Parameter payloads: the records' bytes, in order.
    /// - Returns: the sequence numbers given to the records, consecutive.
    /// - Throws: ``FileQueueError`` — `.emptyBatch`, `.noSpace`, `.sizeCapReached`, `.recordTooLarge`, `.io`.
    @discardableResult
    public func append<Payloads: Collection>(
        contentsOf payloads: Payloads
    ) throws(FileQueueError) -> ClosedRange<UInt64> where Payloads.Element: ContiguousBytes {
        guard !payloads.isEmpty else {
            throw FileQueueError(.emptyBatch, "append(contentsOf:) needs at least one record")
        }
        // Frames are encoded (payload checksums included) before taking the lock; only the sequence numbers,
        // known once the lock is held, are filled in under it.
        var sizes: [Int] = []
        sizes.reserveCapacity(payloads.count)
        var total = 0
        for payload in payloads {
            let length = payload.withUnsafeBytes { $0.count }
            guard length <= configuration.maxRecordSize else {
                throw FileQueueError(
                    .recordTooLarge,
                    "a \(length)-byte record is larger than maxRecordSize (\(configuration.maxRecordSize))")
            }
            sizes.append(Frame.headerSize + length)
            total += Frame.headerSize + length
        }
        var frames = [UInt8](repeating: 0, count: total)
        frames.withUnsafeMutableBytes { buffer in
            var offset = 0
            for payload in payloads {
                payload.withUnsafeBytes { payload in
                    let destination = buffer.baseAddress! + offset
                    Frame.writeRecordHeader(into: destination, sequence: 0, payload: payload)
                    if payload.count > 0 {
                        (destination + Frame.headerSize).copyMemory(
                            from: payload.baseAddress!, byteCount: payload.count)
                    }
                    offset += Frame.headerSize + payload.count
                }
            }
        }
        return try writer.withLock { (state) throws(FileQueueError) -> ClosedRange<UInt64> in
            try state.lock.lock(exclusive: true)
            defer { state.lock.unlock() }
            try refreshTail(&state)
            // A sequence at or below the acknowledged position is never handed out again (``reloadTail(_:)``). The
            // size check in ``refreshTail(_:)`` cannot see another process's repair that cut the tail back to where
            // this writer last saw it, after records past that were read and acknowledged: this writer would number
            // new records as already acknowledged, and they would never be sent.
            if state.tail!.lastSequence < (try files.acknowledged()) { try reloadTail(&state) }
            try checkCap(&state, adding: Int64(total))
            return try write(&frames, sizes: sizes, &state)
        }
    }

    private func checkCap(_ state: inout Writer, adding total: Int64) throws(FileQueueError) {
        guard let cap = configuration.maxTotalBytes else { return }
        if state.sealedBytes + state.tail!.end + total > cap {
            // Other processes may have deleted acknowledged segments since we counted.
            try reloadTail(&state)
        }
        // The segment appends go to is never deleted, acknowledged or not: with a cap below about a segment's size it
        // could hold the whole cap, all acknowledged, and refuse every append for good (sync had drained it, and
        // nothing would ever rotate it away, since rotation comes after this check). Such a tail is sealed here, a
        // new one started, and the acknowledged segments deleted, as `acknowledge` deletes them.
        if state.sealedBytes + state.tail!.end + total > cap, state.tail!.end > 0,
            state.tail!.lastSequence <= (try files.acknowledged())
        {
            try rotate(&state)
            try files.deleteAcknowledgedSegments(through: state.tail!.lastSequence, sync: sync, hook: step)
            try reloadTail(&state)
        }
        let used = state.sealedBytes + state.tail!.end
        if used + total > cap {
            throw FileQueueError(
                .sizeCapReached,
                "the queue holds \(used) bytes and \(total) more would exceed its cap of \(cap); nothing was "
                    + "stored — acknowledge records so segments can be deleted",
                path: files.path, sequence: state.tail!.lastSequence &+ 1)
        }
    }

    /// Writes the frames, rotating as needed, and syncs each segment touched; undoes everything on failure.
    private func write(
        _ frames: inout [UInt8], sizes: [Int], _ state: inout Writer
    ) throws(FileQueueError) -> ClosedRange<UInt64> {
        let firstSequence = state.tail!.lastSequence &+ 1
        // Where each touched segment ended before this call, to truncate back to on failure.
        var written: [(file: FileDescriptor, end: Int64, created: Bool)] = []
        var position = 0
        var byteOffset = 0
        do {
            while position < sizes.count {
                let segmentSize = Int64(configuration.segmentSize)
                if state.tail!.end > 0 && state.tail!.end + Int64(sizes[position]) > segmentSize {
                    try rotate(&state)
                    written.append((state.tail!.file, 0, true))
                } else if written.isEmpty {
                    written.append((state.tail!.file, state.tail!.end, false))
                }
                // One write and one sync per group. A group goes to the tail whole, even past segmentSize, unless
                // it is itself larger than a segment: splitting a group across segments would cost a second
                // sync and a directory sync, the price of group commit. A segment stays under 2 × segmentSize.
                var groupBytes = 0
                var count = 0
                while position + count < sizes.count {
                    let next = sizes[position + count]
                    let grown = Int64(groupBytes + next)
                    if count > 0 && state.tail!.end + grown > segmentSize && grown > segmentSize { break }
                    groupBytes += next
                    count += 1
                }
                var sequence = state.tail!.lastSequence
                let tail = state.tail!
                let groupStart = byteOffset
                try frames.withUnsafeMutableBytes { buffer in
                    var offset = groupStart
                    for index in position..<(position + count) {
                        sequence &+= 1
                        Frame.setSequence(sequence, header: buffer.baseAddress! + offset)
                        offset += sizes[index]
                    }
                    let group = UnsafeRawBufferPointer(rebasing: buffer[groupStart..<(groupStart + groupBytes)])
                    return Result { () throws(FileQueueError) in try tail.file.write(group, at: tail.end) }
                }.get()
                step("append.written")
                if sync { try tail.file.syncData() }
                state.tail!.end += Int64(groupBytes)
                state.tail!.lastSequence = sequence
                position += count
                byteOffset += groupBytes
            }
        } catch {
            // Nothing of this call may stay: truncate what was written, remove segments it started.
            for entry in written.reversed() {
                try? entry.file.truncate(to: entry.end)
                // The cut made durable too: left in the page cache only, the frames of a failed append (a failed
                // fdatasync) could come back after a power cut, records the caller was told were not stored.
                if sync, !entry.created { try? entry.file.syncData() }
                if entry.created { try? FileSystem.unlinkIfExists(entry.file.path) }
            }
            if sync { try? state.directory.sync() }
            state.tail = nil
            throw error
        }
        return firstSequence...state.tail!.lastSequence
    }
}

// MARK: - Acknowledging

extension FileQueue {
    /// The consumer's durable position: every record with a sequence up to this is acknowledged (0: none).
    /// Read from disk, so it reflects other processes' acknowledgements.
    public var acknowledgedThrough: UInt64 {
        get throws(FileQueueError) { try files.acknowledged() }
    }

    /// Marks every record up to `sequence` acknowledged, durably, then deletes segments whose records are
    /// all acknowledged (never the segment appends go to).
    ///
    /// Steps, each safe to repeat after a crash at any point: write the position to `ack.spare` and sync;
    /// rename it over `ack`; sync the directory; unlink fully acknowledged segments, oldest first. A position
    /// at or below the current one changes nothing (the position never moves back).
    /// - Parameter sequence: the highest acknowledged sequence.
    /// - Throws: ``FileQueueError`` with `.invalidAcknowledgement` if `sequence` was never assigned.
    public func acknowledge(through sequence: UInt64) throws(FileQueueError) {
        try writer.withLock { (state) throws(FileQueueError) in
            try state.lock.lock(exclusive: true)
            defer { state.lock.unlock() }
            try refreshTail(&state)
            let current = try files.acknowledged()
            if sequence > current {
                guard sequence <= state.tail!.lastSequence else {
                    throw FileQueueError(
                        .invalidAcknowledgement,
                        "cannot acknowledge through \(sequence): the last record appended is "
                            + "\(state.tail!.lastSequence)", path: files.path, sequence: sequence)
                }
                try AckFile.write(sequence, directory: state.directory, sync: sync, hook: step)
            }
            if try files.deleteAcknowledgedSegments(through: max(sequence, current), sync: sync, hook: step) > 0 {
                var sealed: Int64 = 0
                for other in try files.segments().dropLast() {
                    sealed += (try? FileSystem.fileSize(files.segmentPath(other))) ?? 0
                }
                state.sealedBytes = sealed
            }
            AckFile.prepareSpare(directory: files.path)
        }
    }
}

// MARK: - Status

extension FileQueue {
    /// What the queue holds, from a read-only scan of every segment (cost: reading the whole queue).
    /// - Throws: ``FileQueueError`` if the files cannot be read.
    public func status() throws(FileQueueError) -> FileQueueStatus {
        try Self.check(directory: directory).status
    }
}
