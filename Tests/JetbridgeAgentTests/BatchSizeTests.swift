import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

@testable import JetbridgeProtocol

/// `sync.batchBytes` at its largest, 8 MiB: the records the agent reads for one batch stop 3 bytes short of it
/// (`WireProtocol.batchRecordBytes(upTo:)`, what the sync loop reads with), so frame 2, the records behind their
/// array's header, never exceeds the ground's 8 MiB (docs/AGENT.md, `sync.batchBytes`; docs/PROTOCOL.md). Read from a
/// real queue, framed by `OutgoingBatch` and checked by the ground's own frame checks (`IncomingBatch.checkFrames`:
/// frames, header, size, checksum; the records here are blobs, not records, so nothing past the frame is asked).
/// Sixteen records or more take a 3-byte array header, as a real batch of up to 10,000 does.
@Suite("The largest batch fits the ground's frame limit")
struct BatchSizeTests {
    /// A MessagePack `bin 32` value of `total` bytes in all (its 5-byte header included).
    static func record(bytes total: Int) -> Data {
        let length = UInt32(total - 5)
        return Data([0xc6, UInt8(length >> 24), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff),
            UInt8(length & 0xff)]) + Data(repeating: 0x61, count: Int(length))
    }

    /// A queue of sixteen records whose bytes add up to `total`.
    static func queue(totalling total: Int, in directory: TemporaryDirectory) throws -> FileQueue {
        let queue = try FileQueue(
            directory: directory.url.appendingPathComponent("queue"),
            configuration: FileQueue.Configuration(syncPolicy: .none))
        let each = total / 16
        try queue.append(contentsOf: (0..<16).map { record(bytes: $0 < 15 ? each : total - 15 * each) })
        return queue
    }

    static func decode(_ records: [FileQueue.Record]) throws -> Result<BatchHeader, BatchRejection> {
        let frames = try OutgoingBatch(device: "cart-1", records: records.map { ($0.sequence, $0.payload) }).frames()
        return IncomingBatch.checkFrames(frames, authenticatedDevice: "cart-1")
    }

    @Test func recordsOneByteOverTheCapGoInTwoBatchesThatTheGroundAccepts() throws {
        let directory = try TemporaryDirectory()
        let queue = try Self.queue(totalling: WireProtocol.maxBatchRecordBytes + 1, in: directory)
        let limit = WireProtocol.batchRecordBytes(upTo: WireProtocol.maxBatchBytes)
        #expect(limit == 8_388_605)
        let first = try queue.read(from: 1, maxRecords: WireProtocol.maxBatchRecords, maxBytes: limit)
        #expect(first.count == 15)
        let rest = try queue.read(from: 16, maxRecords: WireProtocol.maxBatchRecords, maxBytes: limit)
        #expect(rest.map(\.sequence) == [16])
        for batch in [first, rest] {
            if case .failure(let rejection) = try Self.decode(batch) { Issue.record("refused: \(rejection)") }
        }
        // What the cap prevents: read up to batchBytes itself, the sixteen records make a frame 2 of 8 MiB + 1 byte,
        // which the ground refuses whole.
        let uncapped = try queue.read(from: 1, maxRecords: WireProtocol.maxBatchRecords, maxBytes: WireProtocol.maxBatchBytes)
        #expect(uncapped.count == 16)
        guard case .failure(let rejection) = try Self.decode(uncapped) else {
            Issue.record("a frame 2 over 8 MiB was accepted")
            return
        }
        #expect("\(rejection)".contains("frame 2 has 8388609 bytes"), "\(rejection)")
    }

    @Test func recordsAtTheCapGoInOneBatchOfExactly8MiB() throws {
        let directory = try TemporaryDirectory()
        let queue = try Self.queue(totalling: WireProtocol.maxBatchRecordBytes, in: directory)
        let batch = try queue.read(
            from: 1, maxRecords: WireProtocol.maxBatchRecords,
            maxBytes: WireProtocol.batchRecordBytes(upTo: WireProtocol.maxBatchBytes))
        #expect(batch.count == 16)
        let frames = try OutgoingBatch(device: "cart-1", records: batch.map { ($0.sequence, $0.payload) }).frames()
        #expect(frames[1].count == WireProtocol.maxBatchBytes)
        if case .failure(let rejection) = try Self.decode(batch) { Issue.record("refused: \(rejection)") }
    }
}
