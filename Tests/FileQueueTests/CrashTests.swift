import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Real processes killed with SIGKILL, then the queue reopened and checked.
@Suite(.serialized) struct CrashTests {
    /// Appender processes that print "INDEX SEQUENCE" once each record is durable.
    struct Appender {
        let prefix: String
        let process: ChildProcess
        let output: Pipe
    }

    static func startAppender(queue: URL, prefix: String, batch: Int) throws -> Appender {
        let output = Pipe()
        let process = try ChildProcess(
            jetbridgeQueueExecutable,
            [
                "append", queue.path, "--count", "1000000", "--prefix", prefix, "--size", "60", "--batch", "\(batch)",
                "--segment-size", "4096",
            ], stdout: .pipe(output))
        return Appender(prefix: prefix, process: process, output: output)
    }

    @Test func concurrentAppendersKilledAtRandomLoseNothingTheyReported() throws {
        let directory = try TemporaryDirectory()
        let queueURL = directory.queue
        let reader = try FileQueue(directory: queueURL, configuration: .init(segmentSize: 4096))
        var reported: [String: [(index: Int, sequence: UInt64)]] = [:]
        var readNext: UInt64 = 1
        var generator = SystemRandomNumberGenerator()
        for round in 0..<5 {
            let appenders = try (0..<3).map { number in
                try Self.startAppender(queue: queueURL, prefix: "p\(round)x\(number)", batch: number == 2 ? 7 : 1)
            }
            // Read while they append: every record returned must be whole.
            let deadline = Date().addingTimeInterval(Double.random(in: 0.3...0.8, using: &generator))
            var killed = Set<Int>()
            while killed.count < appenders.count {
                for record in try reader.read(from: readNext, maxRecords: 200) {
                    #expect(parsePayload(record.payload) != nil, "partial or foreign record \(record.sequence)")
                    #expect(record.payload.count == 60)
                    readNext = record.sequence + 1
                }
                let now = Date()
                for (number, appender) in appenders.enumerated() where !killed.contains(number) {
                    // Staggered kills, so processes die at different points of their cycle.
                    if now > deadline.addingTimeInterval(Double(number) * 0.05) {
                        kill(appender.process.processIdentifier, SIGKILL)
                        killed.insert(number)
                    }
                }
                usleep(2000)
            }
            for appender in appenders {
                appender.process.waitUntilExit()
                let text = String(decoding: appender.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                let lines = text.split(separator: "\n")
                // The last line may itself be cut short by the kill; only whole lines count.
                let whole = text.hasSuffix("\n") ? lines : lines.dropLast()
                reported[appender.prefix] = whole.compactMap { line in
                    let parts = line.split(separator: " ")
                    guard parts.count == 2, let index = Int(parts[0]), let sequence = UInt64(parts[1]) else {
                        return nil
                    }
                    return (index, sequence)
                }
            }
        }

        let queue = try FileQueue(directory: queueURL, configuration: .init(verification: .all))
        let records = try readAll(queue)
        #expect(try FileQueue.check(directory: queueURL).isClean)
        var stored: [String: [(index: Int, sequence: UInt64)]] = [:]
        var seen = Set<String>()
        for record in records {
            guard let (prefix, index) = parsePayload(record.payload) else {
                Issue.record("unparseable record \(record.sequence)")
                continue
            }
            #expect(seen.insert("\(prefix):\(index)").inserted, "\(prefix):\(index) stored twice")
            stored[prefix, default: []].append((index, record.sequence))
        }
        var totalReported = 0
        for (prefix, lines) in reported {
            let mine = stored[prefix] ?? []
            // Each process's records are stored in its order, with no gaps: a prefix of what it generated.
            #expect(mine.map(\.index) == Array(0..<mine.count), "\(prefix) has gaps or is out of order")
            #expect(mine.map(\.sequence) == mine.map(\.sequence).sorted())
            let bySequence = Dictionary(uniqueKeysWithValues: mine.map { ($0.index, $0.sequence) })
            for line in lines {
                #expect(bySequence[line.index] == line.sequence, "\(prefix):\(line.index) reported but not stored")
            }
            totalReported += lines.count
        }
        #expect(totalReported > 0)
        #expect(readNext > 1, "the reader never read while appenders ran")
        #expect(try queue.append(payload(0, prefix: "after")) == records.last!.sequence + 1)
    }

    static let killSteps = ["ack.written", "ack.renamed", "segment.deleted"]

    @Test(arguments: killSteps) func acknowledgementKilledAtEachStepRecovers(step: String) throws {
        let directory = try TemporaryDirectory()
        let configuration = FileQueue.Configuration(segmentSize: 512)
        do {
            let queue = try FileQueue(directory: directory.queue, configuration: configuration)
            try queue.append(contentsOf: (0..<40).map { payload($0, size: 50) })
            try queue.acknowledge(through: 3)
        }
        let segmentsBefore = try segmentFiles(directory.queue).count
        let result = try runTool(["ack", directory.queue.path, "--through", "20", "--crash-at", step])
        #expect(result.signaled && result.status == SIGKILL, "ack did not die at \(step)")
        let expectedAck: UInt64 = step == "ack.written" ? 3 : 20
        #expect(try FileQueue.check(directory: directory.queue).status.acknowledgedThrough == expectedAck)
        if step == "segment.deleted" {
            #expect(try segmentFiles(directory.queue).count == segmentsBefore - 1)
        }

        let queue = try FileQueue(directory: directory.queue, configuration: configuration)
        #expect(try queue.acknowledgedThrough == expectedAck)
        let report = try FileQueue.check(directory: directory.queue)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(try readAll(queue, from: expectedAck + 1).map(\.sequence) == Array((expectedAck + 1)...40))
        #expect(try readAll(queue).map(\.payload).allSatisfy { parsePayload($0) != nil })
        // Repeating the acknowledgement is harmless and finishes the deletion.
        try queue.acknowledge(through: 20)
        #expect(try readAll(queue, from: 21).map(\.sequence) == Array(21...40))
        #expect(try queue.append(payload(40, size: 50)) == 41)
    }

    @Test func killedRightAfterStartingASegmentRecovers() throws {
        let directory = try TemporaryDirectory()
        let result = try runTool([
            "append", directory.queue.path, "--count", "100", "--size", "50", "--segment-size", "300",
            "--crash-at", "rotate.created",
        ])
        #expect(result.signaled)
        #expect(result.output.split(separator: "\n").count == 4)
        let queue = try FileQueue(directory: directory.queue, configuration: .init(segmentSize: 300))
        #expect(try readAll(queue).map(\.sequence) == [1, 2, 3, 4])
        #expect(try queue.append(payload(4, size: 50)) == 5)
        #expect(try FileQueue.check(directory: directory.queue).isClean)
    }

    @Test func killedBetweenWriteAndSyncKeepsWholeRecordsOnly() throws {
        let directory = try TemporaryDirectory()
        let result = try runTool([
            "append", directory.queue.path, "--count", "10", "--size", "50", "--batch", "5", "--crash-at",
            "append.written",
        ])
        #expect(result.signaled && result.output.isEmpty)
        // The write reached the page cache before the kill, so the records are there — never reported, and
        // that is allowed: "returned" is the promise, not "not stored".
        let queue = try FileQueue(directory: directory.queue)
        let records = try readAll(queue)
        #expect(records.count == 0 || records.count == 5)
        #expect(records.allSatisfy { parsePayload($0.payload) != nil })
    }
}

/// `jetbridge-queue ack` is for recovery by hand: a typo must not create a queue or end in a raw error.
@Suite struct QueueToolAckTests {
    @Test func ackRefusesAMissingQueueAndASequencePastTheLastRecord() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.queue.appendingPathComponent("no-such-queue")
        let none = try runTool(["ack", missing.path, "--through", "1"])
        #expect(none.status == 66)
        #expect(!FileManager.default.fileExists(atPath: missing.path))
        do {
            let queue = try FileQueue(directory: directory.queue, configuration: FileQueue.Configuration())
            try queue.append(contentsOf: (0..<3).map { payload($0) })
        }
        let past = try runTool(["ack", directory.queue.path, "--through", "9"])
        #expect(past.status == 65)
        #expect(try FileQueue.check(directory: directory.queue).status.acknowledgedThrough == 0)
    }

    /// The queue tool ends with the code docs/EXIT-CODES.md gives each situation, as the agent and the aggregator do
    /// (every queue failure ended with 1 before).
    @Test func queueFailuresEndWithTheSharedExitCodes() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.queue.appendingPathComponent("no-such-queue").path
        for command in ["status", "dump", "fsck"] {
            #expect(try runTool([command, missing]).status == 66, "\(command)")
        }
        // A setting out of range: a usage error.
        #expect(try runTool(["append", directory.queue.path, "--count", "1", "--segment-size", "0"]).status == 64)
        // The queue's size cap reached: waiting (for a sync to acknowledge) may help.
        #expect(try runTool(["append", directory.queue.path, "--count", "20", "--size", "1000"]).status == 0)
        let capped = try runTool([
            "append", directory.queue.path, "--count", "1", "--size", "1000", "--max-total-bytes", "4096",
        ])
        #expect(capped.status == 75, "\(capped.output)")
    }
}

/// `jetbridge-queue dump` prints each record's payload as text when it is printable, else as hex.
@Suite struct QueueToolDumpTests {
    @Test func dumpPrintsTextAsItIsAndOtherBytesAsHex() throws {
        let directory = try TemporaryDirectory()
        do {
            let queue = try FileQueue(directory: directory.queue, configuration: FileQueue.Configuration())
            try queue.append(contentsOf: [Data("order 17B".utf8), Data([0x00, 0x0F, 0x10, 0xAB, 0xFF])])
        }
        let dump = try runTool(["dump", directory.queue.path])
        #expect(dump.status == 0)
        #expect(dump.output == "1\t9\torder 17B\n2\t5\t000f10abff\n")
    }
}
