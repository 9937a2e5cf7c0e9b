import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

@Suite struct FileQueueTests {
    @Test func appendsAndReadsInOrder() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue)
        for index in 0..<10 {
            #expect(try queue.append(payload(index)) == UInt64(index + 1))
        }
        let range = try queue.append(contentsOf: (10..<20).map { payload($0) })
        #expect(range == 11...20)
        let records = try readAll(queue)
        #expect(records.map(\.sequence) == Array(1...20))
        #expect(records.map(\.payload) == (0..<20).map { payload($0) })
        #expect(try queue.read(from: 15, maxRecords: 3).map(\.sequence) == [15, 16, 17])
        #expect(try queue.read(from: 21).isEmpty)
    }

    @Test func maxBytesLimitsButAlwaysReturnsOne() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue)
        try queue.append(contentsOf: (0..<10).map { payload($0, size: 100) })
        #expect(try queue.read(from: 1, maxBytes: 250).count == 2)
        #expect(try queue.read(from: 1, maxBytes: 10).count == 1)
    }

    @Test func rotatesSegmentsAndSurvivesReopen() throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(segmentSize: 300)
        do {
            let queue = try FileQueue(directory: directory.queue, configuration: configuration)
            for index in 0..<20 { try queue.append(payload(index)) }
            try queue.append(contentsOf: (20..<50).map { payload($0) })
            // One record larger than a segment gets a segment of its own.
            try queue.append(payload(50, size: 1000))
        }
        let names = try segmentFiles(directory.queue).map(\.lastPathComponent)
        #expect(names.count > 10)
        #expect(names.first == "00000000000000000001.seg")
        let queue = try FileQueue(directory: directory.queue, configuration: configuration)
        let records = try readAll(queue)
        #expect(records.map(\.sequence) == Array(1...51))
        #expect(records.last?.payload.count == 1000)
        #expect(try queue.append(payload(51)) == 52)
        let status = try queue.status()
        #expect(status.records == 52 && status.unacknowledged == 52 && status.segments == names.count + 1)
        #expect(status.firstSequence == 1 && status.lastSequence == 52 && status.quarantined == 0)
    }

    @Test func groupCommitKeepsACallInOneSegmentUnlessItIsLargerThanOne() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue, configuration: .init(segmentSize: 1000))
        try queue.append(contentsOf: (0..<5).map { payload($0, size: 100) })  // 620 bytes
        try queue.append(contentsOf: (5..<10).map { payload($0, size: 100) })  // fits from its start: same segment
        #expect(try segmentFiles(directory.queue).count == 1)
        try queue.append(payload(10, size: 100))  // the tail is past the size: a new segment
        #expect(try segmentFiles(directory.queue).map(\.lastPathComponent).last == "00000000000000000011.seg")
        try queue.append(contentsOf: (11..<40).map { payload($0, size: 100) })  // larger than a segment: split
        let sizes = try segmentFiles(directory.queue).map { try Data(contentsOf: $0).count }
        #expect(sizes.count == 5 && sizes.allSatisfy { $0 < 2000 })
        #expect(try readAll(queue).map(\.payload) == (0..<40).map { payload($0, size: 100) })
    }

    @Test func acknowledgementDeletesWholeSegmentsOnlyAndNeverReusesSequences() throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(segmentSize: 300)
        let queue = try FileQueue(directory: directory.queue, configuration: configuration)
        try queue.append(contentsOf: (0..<40).map { payload($0) })
        let before = try segmentFiles(directory.queue).count
        try queue.acknowledge(through: 17)
        #expect(try queue.acknowledgedThrough == 17)
        #expect(try segmentFiles(directory.queue).count < before)
        // Unacknowledged records are all still there; the first remaining segment may hold acknowledged ones.
        #expect(try readAll(queue, from: 18).map(\.sequence) == Array(18...40))
        #expect(try readAll(queue).first!.sequence <= 18)
        try queue.acknowledge(through: 5)
        #expect(try queue.acknowledgedThrough == 17)
        #expect(throws: FileQueueError.self) { try queue.acknowledge(through: 41) }
        try queue.acknowledge(through: 40)
        #expect(try segmentFiles(directory.queue).count == 1)
        let reopened = try FileQueue(directory: directory.queue, configuration: configuration)
        #expect(try reopened.append(payload(99)) == 41)
        #expect(try reopened.status().unacknowledged == 1)
    }

    @Test func sizeCapRefusesAndKeepsWhatIsStored() throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(segmentSize: 1000, maxTotalBytes: 3000)
        let queue = try FileQueue(directory: directory.queue, configuration: configuration)
        var stored = 0
        var refusal: FileQueueError?
        while refusal == nil {
            do {
                try queue.append(payload(stored, size: 100))
                stored += 1
            } catch {
                refusal = error
            }
        }
        #expect(refusal?.code == .sizeCapReached)
        #expect(stored == 3000 / 124)
        #expect(throws: FileQueueError.self) { try queue.append(contentsOf: [payload(0), payload(1)]) }
        #expect(try readAll(queue).map(\.payload) == (0..<stored).map { payload($0, size: 100) })
        try queue.acknowledge(through: UInt64(stored))
        #expect(try queue.append(payload(stored, size: 100)) == UInt64(stored + 1))
    }

    /// A cap below a segment's size: everything fits in the one segment appends go to, which is never deleted.
    /// Before, once sync had acknowledged all of it, every append was still refused, for good (the tail counted
    /// against the cap, and rotation, which would have let it go, comes after the cap's check).
    @Test func aCapSmallerThanASegmentClearsOnceTheTailIsAcknowledged() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(
            directory: directory.queue, configuration: .init(segmentSize: 8192, maxTotalBytes: 3000, syncPolicy: .none))
        var stored = 0
        while (try? queue.append(payload(stored, size: 100))) != nil { stored += 1 }
        #expect(stored == 3000 / 124)
        // Partly acknowledged: still full (the unacknowledged records are kept), and nothing is lost.
        try queue.acknowledge(through: UInt64(stored - 1))
        #expect { try queue.append(payload(stored, size: 100)) } throws: {
            ($0 as? FileQueueError)?.code == .sizeCapReached
        }
        #expect(try readAll(queue, from: UInt64(stored)).map(\.payload) == [payload(stored - 1, size: 100)])
        // All acknowledged: the next append goes into a new segment and the old one is gone.
        try queue.acknowledge(through: UInt64(stored))
        #expect(try queue.append(payload(stored, size: 100)) == UInt64(stored + 1))
        #expect(try readAll(queue, from: UInt64(stored + 1)).map(\.payload) == [payload(stored, size: 100)])
        let segments = try FileManager.default.contentsOfDirectory(atPath: directory.queue.path).filter {
            $0.hasSuffix(".seg")
        }
        #expect(segments.count == 1, "\(segments)")
        // And it fills again up to the cap, no further.
        var more = 1
        while (try? queue.append(payload(stored + more, size: 100))) != nil { more += 1 }
        #expect(more == 3000 / 124)
        // Another process's queue sees the same (the tail, the ack position and the cap are read from disk).
        try queue.acknowledge(through: UInt64(stored + more))
        let other = try FileQueue(directory: directory.queue, configuration: .init(segmentSize: 8192, maxTotalBytes: 3000))
        #expect(try other.append(payload(0, size: 100)) == UInt64(stored + more + 1))
    }

    /// A long-lived writer whose tail another process cut back (a repair quarantining damaged frames) to exactly where
    /// this writer last saw it, after the records past that point were read and acknowledged: the size matches, so the
    /// writer's quick check saw nothing. Before, it numbered its next record 6, at or below the acknowledged position
    /// (10): a consumer takes such a record as acknowledged and never sends it.
    @Test func aWriterNeverNumbersARecordAtOrBelowTheAcknowledgedPosition() throws {
        let directory = try TemporaryDirectory()
        let writer = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        for index in 0..<5 { try writer.append(payload(index)) }
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.queue.path).first { $0.hasSuffix(".seg") })
        let path = directory.queue.appendingPathComponent(segment).path
        let seen = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let other = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        for index in 5..<10 { try other.append(payload(index)) }
        try other.acknowledge(through: 10)
        #expect(truncate(path, off_t(seen)) == 0)
        #expect(try writer.append(payload(10)) == 11)
    }

    /// A reader's cursor left past the end of a segment that another process's repair cut back, and then appended
    /// to: before, the reader resumed at its old offset, past the new records, and returned none of them.
    @Test func aReaderWhoseSegmentWasCutBelowItsCursorReadsItAgain() throws {
        let directory = try TemporaryDirectory()
        let reader = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        for index in 0..<10 { try reader.append(payload(index, size: 100)) }
        #expect(try reader.read(from: 1, maxRecords: 100).count == 10)
        // Records 9 and 10, the tail's end, go bad on disk; another process's open cuts them off (quarantined) and
        // appends one record, which ends before the reader's cursor.
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory.queue.path).first { $0.hasSuffix(".seg") })
        let file = try FileHandle(forUpdating: directory.queue.appendingPathComponent(segment))
        for record in [8, 9] {
            try file.seek(toOffset: UInt64(record * (24 + 100) + 24 + 10))
            try file.write(contentsOf: Data("X".utf8))
        }
        try file.close()
        let repairer = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        let new = try repairer.append(payload(100, size: 100))
        #expect(new > 10)
        let size = try #require(
            try FileManager.default.attributesOfItem(atPath: directory.queue.appendingPathComponent(segment).path)[.size]
                as? Int)
        #expect(size < 10 * (24 + 100), "the segment was not cut below the cursor: \(size) bytes")
        #expect(try reader.read(from: 11, maxRecords: 100).map(\.payload) == [payload(100, size: 100)])
    }

    @Test func refusesBadInput() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue, configuration: .init(maxRecordSize: 10))
        #expect { try queue.append(Data(count: 11)) } throws: { ($0 as? FileQueueError)?.code == .recordTooLarge }
        #expect { try queue.append(contentsOf: [Data]()) } throws: { ($0 as? FileQueueError)?.code == .emptyBatch }
        #expect(try queue.append(Data()) == 1)
        #expect(try queue.read(from: 1).first?.payload == Data())
        for size in [24, FileQueue.Configuration.maxSegmentSize + 1] {
            #expect {
                try FileQueue(directory: directory.url.appendingPathComponent("other"), configuration: .init(segmentSize: size))
            } throws: { ($0 as? FileQueueError)?.code == .invalidConfiguration }
        }
    }

    /// Records larger than the reader's 1 MiB `pread`, up to `maxRecordSize`, read back whole. Before, a frame that
    /// did not fit the first read of its header was taken for damage, the segment "repaired" (nothing to cut) and the
    /// read failed with `corruptQueue`: what `append` accepted could never be read.
    @Test func recordsLargerThanOneReadComeBackWhole() throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(directory: directory.queue, configuration: .init(syncPolicy: .none))
        let sizes = [(1 << 20) - 10, 1 << 20, (1 << 20) + 1, 3 << 20, 10, 16 << 20]
        let payloads = sizes.enumerated().map { index, size in Data(repeating: UInt8(index + 1), count: size) }
        for payload in payloads { try queue.append(payload) }
        #expect(try readAll(queue).map(\.payload) == payloads)
        // One at a time, each read starting where the last one stopped (the cursor) and from scratch.
        for (index, payload) in payloads.enumerated() {
            #expect(try queue.read(from: UInt64(index + 1), maxRecords: 1).map(\.payload) == [payload])
        }
        #expect(try FileQueue(directory: directory.queue).read(from: 6, maxRecords: 1).first?.payload == payloads[5])
        // The read-only walk (`status`) and the check see them too, as whole records and no damage.
        var walked: [Data] = []
        try FileQueue.forEachRecord(directory: directory.queue) { _, payload in walked.append(Data(payload)) }
        #expect(walked == payloads)
        let check = try FileQueue.check(directory: directory.queue)
        #expect(check.status.records == payloads.count && check.status.quarantined == 0 && check.problems.isEmpty)
    }

    @Test func concurrentThreadsGetUniqueSequences() async throws {
        let directory = try TemporaryDirectory()
        let queue = try FileQueue(
            directory: directory.queue, configuration: .init(segmentSize: 2000, syncPolicy: .none))
        let sequences = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    try (0..<100).map { try queue.append(payload($0, prefix: "w\(worker)")) }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(Set(sequences).count == 400)
        #expect(try readAll(queue).count == 400)
    }

    @Test func twoInstancesShareTheQueueLikeTwoProcesses() throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(segmentSize: 400, syncPolicy: .none)
        let first = try FileQueue(directory: directory.queue, configuration: configuration)
        let second = try FileQueue(directory: directory.queue, configuration: configuration)
        var expected: [Data] = []
        for index in 0..<60 {
            let queue = index % 3 == 0 ? second : first
            let data = payload(index)
            if index % 7 == 0 {
                try queue.append(contentsOf: [data, data])
                expected += [data, data]
            } else {
                try queue.append(data)
                expected.append(data)
            }
        }
        #expect(try readAll(first).map(\.payload) == expected)
        #expect(try readAll(second).map(\.sequence) == Array(1...UInt64(expected.count)))
        try second.acknowledge(through: 30)
        #expect(try first.acknowledgedThrough == 30)
        #expect(try first.append(payload(100)) == UInt64(expected.count + 1))
        #expect(try readAll(second, from: 31).count == expected.count - 30 + 1)
    }
}
