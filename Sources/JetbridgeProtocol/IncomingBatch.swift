public import JetbridgeModel
internal import MessagePack

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A batch as the ground receives it, checked record by record: every record decoded, valid and from the device
/// that sent it.
public struct IncomingBatch: Sendable {
    /// Frame 1.
    public let header: BatchHeader
    /// The records in frame 2's order, each with its original bytes (stored as received, never re-encoded).
    public let records: [Element]

    /// One record of a batch.
    public struct Element: Sendable {
        public let record: Record
        public let bytes: Data
    }

    /// Checks and decodes a batch message.
    ///
    /// Checks, in order: two frames; the header (a map with every required key, a version this build speaks, sane
    /// numbers); the header's device against `authenticatedDevice`; frame 2's size and CRC-32C; frame 2 is an array
    /// of exactly `count` well-formed values; each record decodes, passes the model's validation and names the
    /// header's device.
    ///
    /// Records are read by ``RecordDecoder`` in one pass over frame 2, which checks every byte (strings as UTF-8
    /// and timestamps included, also under keys a record does not read) before the batch is returned. When that
    /// pass finds anything wrong, frame 2 is walked again to name the fault (``checkedRecords(_:header:decode:)``):
    /// its structure first, then each record, worded by ``RecordDecoder``'s own error. A record that breaks several
    /// rules is refused for one of them (the first the decoder meets, in the record's key order); the status and
    /// index are those of the Codable reference (``referenceDecode(frames:authenticatedDevice:)``), which the
    /// differential tests and the fuzz target hold it to.
    /// - Parameters:
    ///   - frames: The frames of one ZeroMQ message.
    ///   - authenticatedDevice: The connection's `User-Id` from the ZAP handler, or nil in insecure mode.
    /// - Returns: The batch, or why it is refused (with the header when it could be read, so the ack can name it).
    ///   Each record's `bytes` is a slice of frame 2, sharing its storage.
    public static func decode(frames: [Data], authenticatedDevice: String?) -> Result<IncomingBatch, BatchRejection> {
        let header: BatchHeader
        switch checkFrames(frames, authenticatedDevice: authenticatedDevice) {
        case .success(let checked): header = checked
        case .failure(let rejection): return .failure(rejection)
        }
        if let records = quickRecords(frames[1], header: header) {
            return .success(IncomingBatch(header: header, records: records))
        }
        let decoder = RecordDecoder()
        return checkedRecords(frames[1], header: header) { try decoder.decode(from: $0) }
    }

    /// The reference ``decode(frames:authenticatedDevice:)`` is tested and measured against: the same checks, with
    /// the Codable `MessagePackDecoder` for every record. Not used to serve; the differential tests, the fuzz target
    /// and `record-decode-benchmark` call it. It accepts the same batches, decodes them to the same records and
    /// refuses the others with the same status and index; where a record breaks several rules, its reason may name
    /// another of them (Codable checks fields in their declaration order, ``RecordDecoder`` in the record's).
    public static func referenceDecode(frames: [Data], authenticatedDevice: String?) -> Result<
        IncomingBatch, BatchRejection
    > {
        switch checkFrames(frames, authenticatedDevice: authenticatedDevice) {
        case .success(let header):
            var decoder = MessagePackDecoder()
            decoder.nestingLimit = WireProtocol.recordNestingLimit
            decoder.maxMapEntries = WireProtocol.maxMapEntries
            return checkedRecords(frames[1], header: header) { try decoder.decode(Record.self, from: $0) }
        case .failure(let rejection): return .failure(rejection)
        }
    }

    /// The batch a message names, when its frame 1 reads as a header (nothing else is checked): to answer a message
    /// that is refused before it is decoded.
    public static func name(of frames: [Data]) -> BatchHeader? {
        guard let first = frames.first else { return nil }
        do { return try decodeHeader(first) } catch { return error.header }
    }

    /// Everything but the records: frames, header, device, size and checksum.
    static func checkFrames(_ frames: [Data], authenticatedDevice: String?) -> Result<BatchHeader, BatchRejection> {
        guard frames.count == 2 else {
            return .failure(.malformed(nil, "a batch has 2 frames (header, records); this message has \(frames.count)"))
        }
        let header: BatchHeader
        do {
            header = try decodeHeader(frames[0])
        } catch let rejection {
            return .failure(rejection)
        }
        if let authenticatedDevice, header.device != authenticatedDevice {
            return .failure(
                BatchRejection(
                    status: .forbidden, header: header, index: -1,
                    reason: "the header names device '\(JetbridgeModel.Validation.visible(header.device.prefix(64)))' but the connection's key belongs to "
                        + "'\(authenticatedDevice)'"))
        }
        let body = frames[1]
        guard body.count <= WireProtocol.maxBatchBytes else {
            return .failure(
                .malformed(header, "frame 2 has \(body.count) bytes; the limit is \(WireProtocol.maxBatchBytes)"))
        }
        let crc = Checksum.crc32c(body)
        guard crc == header.crc32c else {
            return .failure(
                .malformed(header, "CRC-32C of frame 2 is \(hex(crc)) but the header says \(hex(header.crc32c))"))
        }
        return .success(header)
    }

    /// The records of a checked frame 2 read by ``RecordDecoder``, or nil when anything is wrong with them (the
    /// caller then asks ``checkedRecords(_:header:decode:)`` why).
    ///
    /// One pass: the array header, then each record from where the previous one ended. Every byte is checked: the
    /// decoder validates the strings and timestamps it reads, and with `validatesUnreadValues` those under keys it
    /// does not read, which is what `MessagePackStructure.arrayElements` checked before decoding.
    static func quickRecords(_ body: Data, header: BatchHeader) -> [Element]? {
        var decoder = RecordDecoder()
        decoder.nestingLimit = WireProtocol.recordNestingLimit
        decoder.validatesUnreadValues = true
        var cache = RecordDecoder.Cache(device: header.device)
        let base = body.startIndex
        return MessagePackReader.withReader(body) { reader -> [Element]? in
            guard let count = try? reader.readArrayHeader(), count == header.count else { return nil }
            var records: [Element] = []
            records.reserveCapacity(count)
            for _ in 0..<count {
                let start = reader.offset
                guard let record = try? decoder.read(&reader, cache: &cache), (try? record.validate()) != nil,
                    record.device == header.device
                else { return nil }
                records.append(Element(record: record, bytes: body[(base + start)..<(base + reader.offset)]))
            }
            return reader.isAtEnd ? records : nil
        }
    }

    /// The records of a checked frame 2, found the slow way so that a fault is named as the ack names it: the whole
    /// frame's structure through `MessagePackStructure.arrayElements` (every byte, so a malformed record anywhere
    /// is the answer before any record's content), the count, then each record through `decoder`, its rules and its
    /// device, stopping at the first record at fault.
    /// - Parameter decode: Decodes one record from exactly its bytes: ``RecordDecoder`` to serve, the Codable
    ///   `MessagePackDecoder` for the reference.
    static func checkedRecords(
        _ body: Data, header: BatchHeader, decode: (Data) throws -> Record
    ) -> Result<IncomingBatch, BatchRejection> {
        // The array's own count first: walking a claim of millions of elements (16 bytes of range each) before
        // comparing it with the header cost over 100 MB for one 8 MiB frame.
        if let claimed = try? MessagePackReader.withReader(body, { try $0.readArrayHeader() }),
            claimed != header.count
        {
            return .failure(
                .malformed(header, "frame 2 is an array of \(claimed) records but the header says \(header.count)"))
        }
        let ranges: [Range<Int>]
        do {
            ranges = try MessagePackStructure.arrayElements(in: body, nestingLimit: WireProtocol.recordNestingLimit + 1)
        } catch {
            // An element index past the header's count is no record of the batch: an array header that claims more
            // elements than frame 2 holds fails at the first missing one. The batch itself is malformed then (−1):
            // an index outside −1…count−1 is one a device ignores (docs/PROTOCOL.md, "Bounds of an ack"), so it
            // would resend the batch unchanged on every timeout.
            let index = error.index.flatMap { $0 < header.count ? $0 : nil } ?? -1
            return .failure(BatchRejection(status: .rejected, header: header, index: index, reason: error.description))
        }
        guard ranges.count == header.count else {
            return .failure(
                .malformed(header, "frame 2 holds \(ranges.count) records but the header says \(header.count)"))
        }
        var records: [Element] = []
        records.reserveCapacity(ranges.count)
        for (index, range) in ranges.enumerated() {
            let bytes = body[range]
            do {
                let record = try decode(bytes)
                try record.validate()
                guard record.device == header.device else {
                    return .failure(
                        BatchRejection(
                            status: .rejected, header: header, index: index,
                            reason: "record \(index) names device '\(record.device)' but the batch is from "
                                + "'\(header.device)'"))
                }
                records.append(Element(record: record, bytes: bytes))
            } catch let error as DecodingError {
                return .failure(
                    BatchRejection(
                        status: .rejected, header: header, index: index,
                        reason: "record \(index): \(ValidationError(error))"))
            } catch {
                // A ValidationError from `validate()`, or whatever else the decoder throws.
                return .failure(
                    BatchRejection(status: .rejected, header: header, index: index, reason: "record \(index): \(error)")
                )
            }
        }
        return .success(IncomingBatch(header: header, records: records))
    }

    /// Decodes and checks frame 1.
    static func decodeHeader(_ frame: Data) throws(BatchRejection) -> BatchHeader {
        let decoder = WireCoding.decoder
        // Read the version first, on its own, so a newer peer gets `unsupported-version` rather than a decode error
        // about keys it renamed.
        let probe: AddressProbe
        do {
            probe = try decoder.decode(AddressProbe.self, from: frame)
        } catch {
            throw .malformed(nil, "frame 1 is not a batch header: \(error)")
        }
        guard WireProtocol.supportedVersions.contains(probe.v) else {
            // Address the ack if the newer header still names the batch the way version 1 does.
            throw BatchRejection(
                status: .unsupportedVersion, header: probe.address, index: -1,
                reason:
                    "protocol version \(probe.v) is not supported; this aggregator speaks \(WireProtocol.supportedVersions)"
            )
        }
        let header: BatchHeader
        do {
            header = try decoder.decode(BatchHeader.self, from: frame)
        } catch {
            // Named by its `device`, `first` and `last` when they read (another key missing or of another type, such
            // as a `crc32c` written as a negative integer), so the sender can match the answer to its batch; before,
            // it was answered as batch 0…0, which no sender has in flight, and resent for ever.
            throw .malformed(probe.address, "frame 1 is not a batch header: \(error)")
        }
        guard (try? JetbridgeModel.Validation.deviceID(header.device)) != nil else {
            // With the header, so the answer names the batch (docs/PROTOCOL.md: every batch gets an answer).
            throw .malformed(
                header,
                "the header's device id '\(JetbridgeModel.Validation.visible(header.device.prefix(64)))' is not a valid device id")
        }
        guard header.first <= header.last else {
            throw .malformed(header, "the header's first (\(header.first)) is after its last (\(header.last))")
        }
        guard (1...WireProtocol.maxBatchRecords).contains(header.count) else {
            throw .malformed(header, "the header's count \(header.count) is outside 1…\(WireProtocol.maxBatchRecords)")
        }
        guard UInt64(header.count) - 1 <= header.last - header.first else {
            throw .malformed(
                header, "the header's count \(header.count) exceeds the sequence range \(header.first)…\(header.last)")
        }
        return header
    }

    /// The version, and whatever names the batch, read leniently.
    private struct AddressProbe: Decodable {
        var v: Int
        var device: String?
        var first: UInt64?
        var last: UInt64?

        enum CodingKeys: String, CodingKey { case v, device, first, last }

        /// The batch the header names, when `device`, `first` and `last` read: the address of its answer.
        var address: BatchHeader? {
            guard let device, let first, let last else { return nil }
            return BatchHeader(v: v, device: device, first: first, last: last, count: 0, crc32c: 0)
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            v = try container.decode(Int.self, forKey: .v)
            device = try? container.decode(String.self, forKey: .device)
            first = try? container.decode(UInt64.self, forKey: .first)
            last = try? container.decode(UInt64.self, forKey: .last)
        }
    }
}

private func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return "0x" + String(repeating: "0", count: 8 - digits.count) + digits
}

/// Why the ground refuses a batch; becomes the ack's `status`, `index` and `reason`.
public struct BatchRejection: Error, Hashable, Sendable, CustomStringConvertible {
    /// `.rejected`, `.forbidden` or `.unsupportedVersion`.
    public var status: Ack.Status
    /// The header, when frame 1 could be read; an ack can name the batch only then.
    public var header: BatchHeader?
    /// The index of the offending record in frame 2, or −1 when the batch as a whole is malformed.
    public var index: Int
    /// What is wrong, for people; inert (``InertText``), since it may quote the device's own text and goes to the
    /// ack, the log and the devices report.
    public var reason: String

    public init(status: Ack.Status, header: BatchHeader?, index: Int, reason: String) {
        self.status = status
        // What the device sent comes back bounded (docs/PROTOCOL.md, "Every batch gets an answer"): a header's device
        // id that is no device id is echoed as its first ``maxEchoedDeviceScalars`` Unicode scalars, and a reason is
        // at most ``maxReasonScalars``, escaped. Before, a 16 MiB id of zero-width joiners (one grapheme, so a
        // `prefix(64)` of it kept all of it) came back in an ack of 61 MB, a log line and `status.json`.
        self.header = header.map { header in
            var bounded = header
            bounded.device = Ack.bounded(header.device, scalars: Self.maxEchoedDeviceScalars)
            return bounded
        }
        self.index = index
        self.reason = Ack.bounded(
            InertText.escape(Ack.bounded(reason, scalars: Self.maxReasonScalars)), scalars: Self.maxReasonScalars)
    }

    /// The most Unicode scalars of a header's `device` an answer echoes.
    public static let maxEchoedDeviceScalars = 256
    /// The most Unicode scalars of a reason the ground sends.
    public static let maxReasonScalars = 1_000

    static func malformed(_ header: BatchHeader?, _ reason: String) -> BatchRejection {
        BatchRejection(status: .rejected, header: header, index: -1, reason: reason)
    }

    public var description: String {
        let what = InertText.escape(header?.label ?? "batch")
        return index >= 0
            ? "\(what) \(status.rawValue) at record \(index): \(reason)" : "\(what) \(status.rawValue): \(reason)"
    }

    /// The ack that tells the device, when the batch can be named.
    public var ack: Ack? {
        guard let header else { return nil }
        return answer(device: header.device, first: header.first, last: header.last)
    }

    /// The ack for batch `first…last` of `device`, with the fields its status carries (docs/PROTOCOL.md, "Acks"):
    /// ``ack``'s, and the answer to a message that names no batch (0…0).
    public func answer(device: String, first: UInt64, last: UInt64) -> Ack {
        Ack(
            device: device, first: first, last: last, status: status, index: status == .rejected ? index : nil,
            reason: reason, supported: status == .unsupportedVersion ? WireProtocol.supportedVersions : nil)
    }
}
