internal import MessagePack

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// One batch as the device sends it: records already encoded as MessagePack (read back from the queue), framed
/// without decoding or re-encoding them.
public struct OutgoingBatch: Sendable {
    /// Frame 1.
    public let header: BatchHeader
    /// Frame 2: a MessagePack array of the records.
    public let records: Data
    /// The queue sequence number of each record, in order; index `i` is the record at index `i` of frame 2.
    public let sequences: [UInt64]

    /// Frames a batch.
    /// - Parameters:
    ///   - device: The sending device's id.
    ///   - records: Queue sequence numbers and payloads, in increasing sequence order; at least one.
    public init(device: String, records: [(sequence: UInt64, payload: Data)]) {
        precondition(!records.isEmpty, "A batch carries at least one record")
        var frame = Data(MessagePackStructure.arrayHeader(count: records.count))
        frame.reserveCapacity(frame.count + records.reduce(0) { $0 + $1.payload.count })
        for record in records {
            frame.append(record.payload)
        }
        self.records = frame
        self.sequences = records.map(\.sequence)
        self.header = BatchHeader(
            device: device, first: records[0].sequence, last: records[records.count - 1].sequence,
            count: records.count, crc32c: Checksum.crc32c(frame))
    }

    /// The two frames of the ZeroMQ message: the encoded header, then the records.
    public func frames() throws -> [Data] {
        [try MessagePackEncoder().encode(header), records]
    }
}
