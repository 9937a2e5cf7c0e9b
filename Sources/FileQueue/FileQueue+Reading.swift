import Glibc
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension FileQueue {
    /// Where the last read stopped, so that reading on from there does not rescan the segment.
    struct Cursor {
        var segment: UInt64
        var file: FileDescriptor
        var offset: Int64
        var nextSequence: UInt64
        /// The sequence of the last record before `offset` in the segment.
        var previous: UInt64
    }

    struct Reader {
        static let chunkSize = 1 << 20

        let lock: FileDescriptor
        var cursor: Cursor?
        /// Bytes of `bufferFile` from file offset `bufferStart`.
        var buffer: [UInt8] = []
        var bufferFile: FileDescriptor?
        var bufferStart: Int64 = 0
        var bufferCount = 0

        init(lock: FileDescriptor) {
            self.lock = lock
        }

        /// Decodes the frame at `offset` of `file`, looking no further than `bound`.
        mutating func decode(_ file: FileDescriptor, at offset: Int64, bound: Int64) throws(FileQueueError)
            -> Frame.Decoded
        {
            // Bytes from `offset` the last refill read for (0: none yet). A frame larger than a chunk needs two: one
            // for its header, one for all of it. Before, one refill was all a decode got, so such a frame (a record
            // over 1 MiB, which `append` accepts up to `maxRecordSize`) read as damage and could never be read back.
            var refilledFor = 0
            while true {
                if bufferFile === file, offset >= bufferStart,
                    offset + Int64(Frame.headerSize) <= bufferStart + Int64(bufferCount) || refilledFor > 0
                {
                    let limit = Int(min(Int64(bufferCount), bound - bufferStart))
                    let decoded = buffer.withUnsafeBytes {
                        Frame.decode(UnsafeRawBufferPointer(rebasing: $0[0..<limit]), at: Int(offset - bufferStart))
                    }
                    // Read again only for more than the last refill had room for: `needed` grows each time, so
                    // this ends, and a frame that stays incomplete after a read of all it needs is what it is.
                    guard case .incomplete(let needed) = decoded, offset + Int64(needed) <= bound, needed > refilledFor
                    else {
                        return decoded
                    }
                    try refill(file, at: offset, minimum: needed, bound: bound)
                    refilledFor = needed
                } else {
                    try refill(file, at: offset, minimum: Frame.headerSize, bound: bound)
                    refilledFor = Frame.headerSize
                }
            }
        }

        /// Reads from `offset`, keeping nothing past `bound`: bytes beyond it may belong to an append in
        /// progress, and a later read must not decode them from this buffer.
        mutating func refill(
            _ file: FileDescriptor, at offset: Int64, minimum: Int, bound: Int64
        ) throws(FileQueueError) {
            let size = max(Self.chunkSize, minimum)
            if buffer.count < size { buffer = [UInt8](repeating: 0, count: size) }
            // Forgotten first: a read that fails part-way has overwritten some of the buffer, which must not then be
            // decoded as the bytes it held before.
            bufferFile = nil
            bufferCount = min(try file.read(into: &buffer, at: offset), Int(bound - offset))
            bufferFile = file
            bufferStart = offset
        }

        func payload(at offset: Int64, length: Int) -> Data {
            let start = Int(offset - bufferStart) + Frame.headerSize
            return buffer.withUnsafeBytes { Data(bytes: $0.baseAddress! + start, count: length) }
        }
    }

    private enum ReadOutcome {
        case records([Record])
        case damage(segment: UInt64)
    }

    /// Reads records in sequence order, from `sequence` on (or from the first stored record, if those
    /// before it were deleted), up to the end of what was durably appended when the call started.
    ///
    /// Returns an empty array when there is nothing from `sequence` on yet. Acknowledged records that were
    /// not deleted yet are returned too; pass `acknowledgedThrough + 1` to read only what is unacknowledged.
    /// Damage met on the way is repaired (quarantined or truncated, under the exclusive lock) before the
    /// read goes on, so no partial or corrupt record is ever returned.
    /// - Parameters:
    ///   - sequence: the first sequence wanted.
    ///   - maxRecords: at most this many records (at least 1).
    ///   - maxBytes: stop before the payloads exceed this many bytes (one record is always returned).
    /// - Returns: the records, ascending and without gaps except where damage was quarantined.
    /// - Throws: ``FileQueueError`` if the files cannot be read, or damage cannot be repaired.
    public func read(
        from sequence: UInt64, maxRecords: Int = 1024, maxBytes: Int = 4 << 20
    ) throws(FileQueueError) -> [Record] {
        let maxRecords = max(1, maxRecords)
        return try reader.withLock { (state) throws(FileQueueError) -> [Record] in
            // Repairs per segment: damage in several segments of one read is repaired in each (a count over the
            // whole read gave up after three segments, naming one it had never repaired).
            var repairs: [UInt64: Int] = [:]
            while true {
                switch try readOnce(&state, from: sequence, maxRecords: maxRecords, maxBytes: maxBytes) {
                case .records(let records):
                    return records
                case .damage(let segment):
                    state.cursor = nil
                    state.bufferFile = nil
                    repairs[segment, default: 0] += 1
                    guard repairs[segment, default: 0] <= 3 else {
                        throw FileQueueError(
                            .corruptQueue, "damage in this segment persists after repair; run fsck",
                            path: files.segmentPath(segment))
                    }
                    try state.lock.lock(exclusive: true)
                    defer { state.lock.unlock() }
                    let isTail = try files.segments().last == segment
                    if FileSystem.exists(files.segmentPath(segment)) {
                        try files.repair(segment: segment, isTail: isTail, sync: sync)
                    }
                }
            }
        }
    }

    private func readOnce(
        _ state: inout Reader, from sequence: UInt64, maxRecords: Int, maxBytes: Int
    ) throws(FileQueueError) -> ReadOutcome {
        // Under the shared lock no append is in progress, so everything up to the tail's size is complete.
        try state.lock.lock(exclusive: false)
        let firsts: [UInt64]
        let tailSize: Int64
        do {
            defer { state.lock.unlock() }
            firsts = try files.segments()
            tailSize =
                try firsts.last.map { (last) throws(FileQueueError) in
                    try io(FileSystem.fileSize(files.segmentPath(last)))
                } ?? 0
        }
        guard !firsts.isEmpty else { return .records([]) }

        var index: Int
        var offset: Int64 = 0
        var file: FileDescriptor?
        var previous: UInt64 = 0
        // A cursor past its segment's end is stale: another process's repair cut the segment below it (and may have
        // appended there since). Resumed, the reader would skip what lies between; it reads the segment again instead.
        if let cursor = state.cursor, cursor.nextSequence == sequence,
            let found = firsts.firstIndex(of: cursor.segment),
            cursor.offset <= (found == firsts.count - 1 ? tailSize : try cursor.file.size())
        {
            index = found
            offset = cursor.offset
            file = cursor.file
            previous = cursor.previous
        } else {
            index = firsts.lastIndex(where: { $0 <= sequence }) ?? 0
            previous = firsts[index] &- 1
        }

        var records: [Record] = []
        records.reserveCapacity(min(maxRecords, 4096))
        var bytes = 0
        while index < firsts.count {
            let first = firsts[index]
            let isTail = index == firsts.count - 1
            if file == nil {
                file = try FileDescriptor.openIfExists(files.segmentPath(first), O_RDONLY)
                // Deleted since the listing: all its records were acknowledged.
                if file == nil {
                    index += 1
                    offset = 0
                    if index < firsts.count { previous = firsts[index] &- 1 }
                    continue
                }
            }
            let segmentFile = file!
            let bound = isTail ? tailSize : try segmentFile.size()
            while offset < bound {
                let decoded = try state.decode(segmentFile, at: offset, bound: bound)
                switch decoded {
                case .record(let recordSequence, let length):
                    // Sequences only increase within a segment; a frame that checks out but goes back is damage.
                    guard recordSequence > previous else { return .damage(segment: first) }
                    if recordSequence >= sequence {
                        if !records.isEmpty && (records.count >= maxRecords || bytes + length > maxBytes) {
                            state.cursor = Cursor(
                                segment: first, file: segmentFile, offset: offset,
                                nextSequence: records.last!.sequence + 1, previous: previous)
                            return .records(records)
                        }
                        let payload = state.payload(at: offset, length: length)
                        records.append(Record(sequence: recordSequence, payload: payload))
                        bytes += length
                    }
                    previous = recordSequence
                    offset += Int64(Frame.headerSize + length)
                case .skip(let total):
                    offset += Int64(total)
                case .incomplete, .invalid:
                    return .damage(segment: first)
                }
            }
            if isTail { break }
            index += 1
            offset = 0
            file = nil
            if index < firsts.count { previous = firsts[index] &- 1 }
        }
        if let file {
            let next = records.last.map { $0.sequence + 1 } ?? sequence
            state.cursor = Cursor(
                segment: firsts[min(index, firsts.count - 1)], file: file, offset: offset, nextSequence: next,
                previous: previous)
        }
        return .records(records)
    }
}
