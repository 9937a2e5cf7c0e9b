import Foundation
import JetbridgeModel
import JetbridgeTestKit
import MessagePack
import Testing

@testable import JetbridgeProtocol

/// `RecordCoding`, the one record codec: what capture writes, what the ledger and the store read back, and the
/// errors a refused batch reports (issue 13: the hand-written decoder is the authority for errors).
@Suite struct RecordCodingTests {
    @Test func encodingWritesTheDocumentedBytesAndTheCodableEncodersBytes() throws {
        let order = try RecordCoding.encode(exampleOrder)
        #expect(order == documentedRecord)
        #expect(try RecordCoding.encode(Record.order(exampleOrder)) == order)
        let bag = scan()
        #expect(try RecordCoding.encode(bag) == MessagePackEncoder().encode(bag))
        #expect(try RecordCoding.encode(Record.scan(bag)) == MessagePackEncoder().encode(Record.scan(bag)))
    }

    @Test func decodingReadsBackWhatEncodingWrote() throws {
        #expect(try RecordCoding.decode(documentedRecord) == .order(exampleOrder))
        #expect(try RecordCoding.decodeOrder(documentedRecord) == exampleOrder)
        let bag = scan()
        #expect(try RecordCoding.decode(RecordCoding.encode(bag)) == .scan(bag))
        // A slice of a larger buffer decodes with offsets from its own start.
        let framed = Data([0x91]) + documentedRecord
        #expect(try RecordCoding.decode(framed[1...]) == .order(exampleOrder))
    }

    /// A stream (a store reading a flight's orders) decodes each record as `decode` does, though the flight id it
    /// keeps from the record before is taken without its checks: other flights, a flight id that differs in case or
    /// in one byte, an invalid one right after a valid one, and a scan between orders.
    @Test func aStreamDecodesEachRecordAsDecodeDoes() throws {
        var stream = RecordCoding.Stream()
        var other = exampleOrder
        other.flight = try FlightID("ZA102/2026-11-21")
        var inputs = [
            try RecordCoding.encode(exampleOrder), try RecordCoding.encode(exampleOrder), try RecordCoding.encode(other),
            try RecordCoding.encode(scan()), try RecordCoding.encode(exampleOrder),
        ]
        let flightText = Data(exampleOrder.flight.rawValue.utf8)
        for replacement in [exampleOrder.flight.rawValue.lowercased(), "ZA101/2026-11-2X", "ZA101/2026-11-22"] {
            var bytes = try RecordCoding.encode(exampleOrder)
            let range = try #require(bytes.range(of: flightText))
            bytes.replaceSubrange(range, with: Data(replacement.utf8))
            inputs += [try RecordCoding.encode(exampleOrder), bytes]
        }
        for (index, bytes) in inputs.enumerated() {
            let streamed = Result { try stream.decode(bytes) }
            let alone = Result { try RecordCoding.decode(bytes) }
            switch (streamed, alone) {
            case (.success(let a), .success(let b)): #expect(a == b, "record \(index)")
            case (.failure(let a), .failure(let b)): #expect("\(a)" == "\(b)", "record \(index)")
            default: Issue.record("record \(index): \(streamed) streamed, \(alone) alone")
            }
        }
        #expect(throws: DecodingError.self) { try stream.decode(inputs[inputs.count - 3]) }
    }

    @Test func anOrderFileHoldingAScanIsRefusedAsTheCodableDecoderRefusesIt() throws {
        let bytes = try RecordCoding.encode(scan())
        let error = try #require(throws: DecodingError.self) { try RecordCoding.decodeOrder(bytes) }
        let reference = try #require(throws: DecodingError.self) {
            try MessagePackDecoder().decode(Order.self, from: bytes)
        }
        #expect(ValidationError(error) == ValidationError(reference))
        #expect(ValidationError(error).code == .invalidRecordType)
        #expect(ValidationError(error).path == "type")
    }

    @Test func decodingErrorsNameTheFieldAndTheOffset() throws {
        var damaged = documentedRecord
        // "revision": 1 becomes `false`: a wrong type at the byte after the key.
        let key = Data("revision".utf8)
        let at = try #require(damaged.range(of: key)).upperBound
        damaged[at] = 0xc2
        let error = try #require(throws: DecodingError.self) { try RecordCoding.decode(damaged) }
        let reason = ValidationError(error)
        #expect(reason.path == "revision")
        #expect(reason.message.contains("offset \(at - damaged.startIndex)"), "\(reason)")
    }

    /// `RecordDecoder` words a refusal (issue 13: the hand-written decoder is the authority for errors). The Codable
    /// reference is the oracle: the same batches refused, with the same status and index, and a reason that names
    /// the record; for a record with one fault, the same words.
    @Test func aRefusedBatchHasTheReferencesStatusAndIndexAndItsOwnReason() throws {
        var rng = SplitMix(state: 11)
        var refused = 0
        var sameWords = 0
        for _ in 0..<300 {
            var payloads = (0..<rng.pick([1, 3, 8])).map { _ in AnyWidthWriter.encode(Gen.tree(Gen.record(&rng)), &rng) }
            let bad = rng.below(payloads.count)
            payloads[bad] = AnyWidthWriter.encode(Mutate.tree(Gen.tree(Gen.record(&rng)), &rng), &rng)
            let frames = try batch(payloads.map { Data($0) }).frames()
            let reference = rejection(IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1"))
            guard let found = rejection(decode(frames)) else {
                #expect(reference == nil)
                continue
            }
            refused += 1
            #expect(found.status == reference?.status)
            #expect(found.index == reference?.index)
            #expect(found.header == reference?.header)
            if found.reason == reference?.reason {
                sameWords += 1
            } else {
                // Only a record's own fault may be worded differently; frame-level faults share one code path.
                #expect(found.index >= 0 && found.reason.hasPrefix("record \(found.index): "), "\(found)")
            }
        }
        #expect(refused > 100, "only \(refused) of 300 batches refused: the mutations missed")
        // One mutation makes one fault, mostly: then both decoders name it alike.
        #expect(sameWords * 10 >= refused * 9, "only \(sameWords) of \(refused) reasons worded as the reference words them")
    }

    /// A record with two faults is refused for the one `RecordDecoder` meets first, in the record's key order; the
    /// reference (fields in declaration order) names the other. Both refuse the same record.
    @Test func aRecordWithTwoFaultsIsRefusedForTheFirstInKeyOrder() throws {
        // `flight` is invalid and comes first; `id` is missing (declared before `flight`).
        guard case .map(let pairs) = try MessagePackDecoder().decode(MessagePackValue.self, from: documentedRecord)
        else { Issue.record("the documented record is not a map"); return }
        var fields = pairs.filter { $0.key != .string("id") }
        fields.removeAll { $0.key == .string("flight") }
        fields.insert((.string("flight"), .string("no such flight")), at: 0)
        let frames = try batch([try MessagePackEncoder().encode(MessagePackValue.map(fields))]).frames()
        let found = try #require(rejection(decode(frames)))
        let reference = try #require(
            rejection(IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1")))
        #expect(found.index == 0 && reference.index == 0)
        #expect(found.reason.hasPrefix("record 0: flight: "), "\(found.reason)")
        #expect(reference.reason.hasPrefix("record 0: id: "), "\(reference.reason)")
    }
}
