import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

/// Damage at many offsets: flipped bytes and truncated files, then open, read and check again.
@Suite struct CorruptionTests {
    static let count = 24
    static let configuration = FileQueue.Configuration(segmentSize: 400, syncPolicy: .none)

    /// A pristine queue of `count` records over several segments (frames of 64 bytes, 6 per segment).
    static func pristine(_ directory: TemporaryDirectory) throws -> URL {
        let url = directory.url.appendingPathComponent("pristine")
        let queue = try FileQueue(directory: url, configuration: configuration)
        try queue.append(contentsOf: (0..<count).map { payload($0) })
        return url
    }

    /// Every record read is an original one at its own sequence.
    static func expectOriginals(_ records: [FileQueue.Record]) {
        for record in records {
            #expect(record.payload == payload(Int(record.sequence) - 1))
        }
        #expect(records.map(\.sequence) == records.map(\.sequence).sorted())
    }

    @Test(arguments: [0, 2]) func flippedByteIsQuarantinedNeverReturned(segmentIndex: Int) throws {
        let directory = try TemporaryDirectory()
        let pristine = try Self.pristine(directory)
        let segments = try segmentFiles(pristine)
        let target = segments[segmentIndex == 0 ? 1 : segments.count - 1]  // a sealed segment, then the tail
        let size = try Data(contentsOf: target).count
        let work = directory.url.appendingPathComponent("work")
        for offset in stride(from: 0, to: size, by: 3) {
            try copyDirectory(pristine, to: work)
            let file = work.appendingPathComponent(target.lastPathComponent)
            var bytes = try Data(contentsOf: file)
            bytes[offset] ^= 0x5A
            try bytes.write(to: file)

            let before = try FileQueue.check(directory: work)
            #expect(!before.isClean, "flip at \(offset) undetected")
            #expect(before.problems.allSatisfy { $0.file == target.lastPathComponent })

            let configuration = FileQueue.Configuration(segmentSize: 400, syncPolicy: .none, verification: .all)
            let queue = try FileQueue(directory: work, configuration: configuration)
            let records = try readAll(queue)
            Self.expectOriginals(records)
            #expect(records.count == Self.count - 1, "flip at \(offset) lost more than the damaged record")
            let after = try FileQueue.check(directory: work)
            #expect(after.isClean)
            #expect(after.status.quarantined == 1)
            // Reopening finds nothing more to do.
            _ = try FileQueue(directory: work, configuration: configuration)
            #expect(try FileQueue.check(directory: work).status.quarantined == 1)
            // A sequence that may have been handed out (and read) is never handed out again.
            #expect(try queue.append(payload(99)) > UInt64(Self.count))
        }
    }

    /// Damage inside the quarantine file itself: one entry's header goes bad. Before, the file read as ending there,
    /// and the next repair's entry was written in its place, cutting every entry after it: the only copies of those
    /// damaged records. Now the entries after it are kept and counted, and the new one goes after them.
    @Test func damageInOneQuarantineEntryKeepsTheEntriesAfterIt() throws {
        let directory = try TemporaryDirectory()
        let pristine = try Self.pristine(directory)
        let segments = try segmentFiles(pristine)
        // Damage in three sealed segments, found one read at a time.
        func damage(_ segment: URL, at offset: Int) throws {
            var bytes = try Data(contentsOf: segment)
            bytes[offset] ^= 0xFF
            try bytes.write(to: segment)
        }
        let queue = try FileQueue(directory: pristine, configuration: Self.configuration)
        try damage(segments[0], at: 100)
        try damage(segments[1], at: 100)
        _ = try readAll(queue)
        #expect(try queue.status().quarantined == 2)
        let quarantine = pristine.appendingPathComponent("quarantine")
        let sizeBefore = try Data(contentsOf: quarantine).count
        // The first entry's header goes bad (its segment field).
        var entries = try Data(contentsOf: quarantine)
        entries[9] ^= 0xFF
        try entries.write(to: quarantine)
        #expect(try FileQueue.check(directory: pristine).status.quarantined == 1)
        // The next repair appends after the entry that is still whole.
        try damage(segments[2], at: 100)
        let records = try readAll(FileQueue(directory: pristine, configuration: Self.configuration))
        Self.expectOriginals(records)
        #expect(records.count == Self.count - 3)
        #expect(try FileQueue.check(directory: pristine).status.quarantined == 2)
        #expect(try Data(contentsOf: quarantine).count > sizeBefore, "entries were cut")
    }

    @Test func readerRepairsDamageInSealedSegmentsItMeets() throws {
        let directory = try TemporaryDirectory()
        let pristine = try Self.pristine(directory)
        let target = try segmentFiles(pristine)[1]
        var bytes = try Data(contentsOf: target)
        bytes[100] ^= 0xFF
        try bytes.write(to: target)
        // Default verification only checks the tail on open; the reader finds this.
        let queue = try FileQueue(directory: pristine, configuration: Self.configuration)
        let records = try readAll(queue)
        Self.expectOriginals(records)
        #expect(records.count == Self.count - 1)
        #expect(try queue.status().quarantined == 1)
        #expect(try FileQueue.check(directory: pristine).isClean)
    }

    @Test func truncatedTailKeepsEveryWholeRecord() throws {
        let directory = try TemporaryDirectory()
        let pristine = try Self.pristine(directory)
        let tail = try segmentFiles(pristine).last!
        let size = try Data(contentsOf: tail).count
        let work = directory.url.appendingPathComponent("work")
        for cut in 0..<size {
            try copyDirectory(pristine, to: work)
            let file = work.appendingPathComponent(tail.lastPathComponent)
            let handle = try FileHandle(forWritingTo: file)
            try handle.truncate(atOffset: UInt64(cut))
            try handle.close()
            let torn = cut % 64 != 0
            let report = try FileQueue.check(directory: work)
            #expect(report.isClean == !torn)
            if torn { #expect(report.problems.first?.kind == .tornTail) }

            let queue = try FileQueue(directory: work, configuration: Self.configuration)
            let records = try readAll(queue)
            Self.expectOriginals(records)
            let wholeInTail = cut / 64
            #expect(records.count == Self.count - (size / 64) + wholeInTail)
            #expect(try queue.status().quarantined == 0)
            #expect(try queue.append(payload(99)) == (records.last?.sequence ?? 0) + 1)
            #expect(try FileQueue.check(directory: work).isClean)
        }
    }

    @Test func fsckReportsSegmentOffsetAndSequence() throws {
        let directory = try TemporaryDirectory()
        let pristine = try Self.pristine(directory)
        let target = try segmentFiles(pristine)[1]
        var bytes = try Data(contentsOf: target)
        bytes[64 + 30] ^= 0x01  // the payload of the second record in the segment
        try bytes.write(to: target)
        let before = try Data(contentsOf: target)
        let result = try runTool(["fsck", pristine.path])
        #expect(result.status == 65)
        #expect(result.output.contains("corruptFrame: \(target.lastPathComponent) at byte 64, 64 bytes"))
        #expect(result.output.contains("after sequence 7, before sequence 9"))
        #expect(try Data(contentsOf: target) == before, "fsck changed the queue")
    }
}

/// What a writer killed in the middle of a frame leaves, met by the processes that carry on.
@Suite struct TornWriteTests {
    /// The first `count` bytes of the frame a queue would write for `data`.
    static func partialFrame(_ data: Data, count: Int) throws -> Data {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        try queue.append(data)
        return try Data(contentsOf: segmentFiles(directory.queue)[0]).prefix(count)
    }

    static func appendRaw(_ bytes: Data, to file: URL) throws {
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: bytes)
        try handle.close()
    }

    @Test(arguments: [1, 23, 24, 40, 63]) func tornFrameIsTruncatedByTheNextWriterAndReader(cut: Int) throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(syncPolicy: .none)
        let writer = try FileQueue(directory: directory.queue, configuration: configuration)
        let reader = try FileQueue(directory: directory.queue, configuration: configuration)
        try writer.append(contentsOf: (0..<5).map { payload($0) })
        #expect(try reader.read(from: 1).count == 5)
        let tail = try segmentFiles(directory.queue).last!

        // A dead writer's partial frame: the reader stops before it, repairs, and sees nothing new.
        try Self.appendRaw(Self.partialFrame(payload(5), count: cut), to: tail)
        #expect(try FileQueue.check(directory: directory.queue).problems.map(\.kind) == [.tornTail])
        #expect(try reader.read(from: 6).isEmpty)
        #expect(try FileQueue.check(directory: directory.queue).isClean)

        // Again, and this time the live writer meets it first: it truncates and takes the sequence.
        try Self.appendRaw(Self.partialFrame(payload(5), count: cut), to: tail)
        #expect(try writer.append(payload(5)) == 6)
        #expect(try readAll(reader).map(\.payload) == (0..<6).map { payload($0) })
        #expect(try reader.status().quarantined == 0)
    }
}

@Suite struct SealedSegmentTruncationTests {
    @Test(arguments: [10, 64, 100, 383]) func truncatedSealedSegmentIsQuarantinedNotDropped(cut: Int) throws {
        let directory = try TemporaryDirectory()
        let pristine = try CorruptionTests.pristine(directory)
        let target = try segmentFiles(pristine)[1]  // sequences 7...12, 64 bytes each
        let handle = try FileHandle(forWritingTo: target)
        try handle.truncate(atOffset: UInt64(cut))
        try handle.close()
        #expect(
            try FileQueue.check(directory: pristine).problems.map(\.kind) == (cut % 64 == 0 ? [] : [.corruptSegmentEnd])
        )
        let queue = try FileQueue(
            directory: pristine, configuration: .init(segmentSize: 400, syncPolicy: .none, verification: .all))
        let records = try readAll(queue)
        CorruptionTests.expectOriginals(records)
        #expect(records.count == CorruptionTests.count - 6 + cut / 64)
        #expect(try queue.status().quarantined == (cut % 64 == 0 ? 0 : 1))
        #expect(try FileQueue.check(directory: pristine).isClean)
    }
}
