import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import Testing

/// The example order of docs/PROTOCOL.md.
let exampleOrder = Order(
    id: UUID(uuidString: "0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D")!, revision: 1,
    flight: try! FlightID("ZA101/2026-11-21"),
    seat: try! Seat("17B"), lineItems: [LineItem(item: Item(name: "Peanuts", unitPrice: 200), count: 2)],
    currency: "USD",
    createdAt: Date(timeIntervalSince1970: 1_795_255_200), device: "cart-1")

func bytes(_ hex: String) -> Data {
    let digits = hex.split(whereSeparator: \.isWhitespace)
    return Data(digits.map { UInt8($0, radix: 16)! })
}

/// The bytes printed in docs/PROTOCOL.md, written there by Python's msgpack package: a second implementation.
let documentedHeader = bytes(
    """
    86 a1 76 01 a6 64 65 76 69 63 65 a6 63 61 72 74 2d 31 a5 66 69 72 73 74 01 a4 6c 61 73 74 01
    a5 63 6f 75 6e 74 01 a6 63 72 63 33 32 63 ce 09 8d 0b 75
    """)
let documentedRecord = bytes(
    """
    89 a4 74 79 70 65 a5 6f 72 64 65 72 a2 69 64 d9 24 30 44 35 42 33 45 30 43 2d 33 43 33 35 2d
    34 42 37 43 2d 39 43 35 44 2d 36 46 31 45 32 41 33 42 34 43 35 44 a8 72 65 76 69 73 69 6f 6e
    01 a6 66 6c 69 67 68 74 b0 5a 41 31 30 31 2f 32 30 32 36 2d 31 31 2d 32 31 a4 73 65 61 74 a3
    31 37 42 a9 6c 69 6e 65 49 74 65 6d 73 91 82 a4 69 74 65 6d 82 a4 6e 61 6d 65 a7 50 65 61 6e
    75 74 73 a9 75 6e 69 74 50 72 69 63 65 cc c8 a5 63 6f 75 6e 74 02 a8 63 75 72 72 65 6e 63 79
    a3 55 53 44 a9 63 72 65 61 74 65 64 41 74 d6 ff 6b 01 6b a0 a6 64 65 76 69 63 65 a6 63 61 72
    74 2d 31
    """)

func scan(device: String = "cart-1", weight: Double = 42.5) -> Scan {
    Scan(
        id: UUID(), tag: LuggageTag(id: UUID(), owner: try! Owner(initial: "D", family: "ZMU"), weight: weight),
        point: .origin, scannedAt: Date(timeIntervalSince1970: 1_795_255_300),
        flight: try! FlightID("ZA101/2026-11-21"),
        device: device)
}

func encoded(_ record: Record) -> Data { try! MessagePackEncoder().encode(record) }

func batch(_ payloads: [Data], device: String = "cart-1", from first: UInt64 = 1) -> OutgoingBatch {
    OutgoingBatch(device: device, records: payloads.enumerated().map { (first + UInt64($0.offset), $0.element) })
}

func decode(_ frames: [Data], as device: String? = "cart-1") -> Result<IncomingBatch, BatchRejection> {
    IncomingBatch.decode(frames: frames, authenticatedDevice: device)
}

func rejection(_ result: Result<IncomingBatch, BatchRejection>) -> BatchRejection? {
    if case .failure(let rejection) = result { return rejection }
    return nil
}

@Suite struct GoldenBytes {
    @Test func theDocumentedRecordIsWhatTheEncoderWrites() throws {
        #expect(encoded(.order(exampleOrder)) == documentedRecord)
    }

    @Test func theDocumentedHeaderFramesTheDocumentedRecord() throws {
        let outgoing = batch([documentedRecord])
        let frames = try outgoing.frames()
        #expect(frames[0] == documentedHeader)
        #expect(frames[1] == Data([0x91]) + documentedRecord)
        #expect(outgoing.header == .example)
    }

    @Test func theCRCIsCastagnoli() {
        #expect(Checksum.crc32c(Data("123456789".utf8)) == 0xE306_9283)
    }

    @Test func ackBytesAreTheDocumentedMapWithoutAbsentKeys() throws {
        let expected = bytes(
            """
            87 a1 76 01 a6 64 65 76 69 63 65 a6 63 61 72 74 2d 31 a5 66 69 72 73 74 01 a4 6c 61 73 74 01
            a6 73 74 61 74 75 73 a6 73 74 6f 72 65 64 a3 6e 65 77 01 aa 64 75 70 6c 69 63 61 74 65 73 00
            """)
        #expect(try WireCoding.encode(Ack.example) == expected)
        #expect(try WireCoding.decode(Ack.self, from: expected) == .example)
    }
}

@Suite struct Decoding {
    @Test func aGoodBatchDecodesEveryRecordWithItsOriginalBytes() throws {
        let records: [Record] = [.order(exampleOrder), .scan(scan()), .scan(scan())]
        let outgoing = batch(records.map(encoded), from: 40)
        let incoming = try decode(try outgoing.frames()).get()
        #expect(incoming.header.first == 40 && incoming.header.last == 42 && incoming.header.count == 3)
        #expect(incoming.records.map(\.record) == records)
        #expect(incoming.records.map(\.bytes) == records.map(encoded))
    }

    @Test func sequencesMayHaveGapsWhereRecordsWereSetAside() throws {
        let payloads = [encoded(.scan(scan())), encoded(.scan(scan()))]
        let outgoing = OutgoingBatch(device: "cart-1", records: [(5, payloads[0]), (9, payloads[1])])
        let incoming = try decode(try outgoing.frames()).get()
        #expect(incoming.header.first == 5 && incoming.header.last == 9 && incoming.records.count == 2)
    }

    @Test func anInvalidRecordIsNamedByIndexAndTheBatchIsRejectedWhole() throws {
        var bad = scan()
        bad.tag.weight = -1
        let outgoing = batch([encoded(.scan(scan())), encoded(.scan(scan())), encoded(.scan(bad))])
        let found = try #require(rejection(decode(try outgoing.frames())))
        #expect(found.status == .rejected)
        #expect(found.index == 2)
        #expect(found.reason.contains("weight"))
        #expect(found.ack?.index == 2 && found.ack?.first == 1 && found.ack?.last == 3)
    }

    /// A header map that names its batch but does not decode as a header (a key missing, a CRC written as a negative
    /// integer, as a language holding it in a signed 32-bit int would) is answered for that batch, not as 0…0.
    @Test func aHeaderThatDoesNotDecodeButNamesItsBatchIsAnsweredForIt() throws {
        struct Header: Encodable {
            var v = 1
            var device = "cart-1"
            var first: UInt64 = 5
            var last: UInt64 = 5
            var count: Int? = 1
            var crc32c: Int64 = -1
        }
        let records = Data([0x91]) + encoded(.scan(scan()))
        for header in [Header(), Header(count: nil, crc32c: 0)] {
            let found = try #require(rejection(decode([try MessagePackEncoder().encode(header), records])))
            #expect(found.status == .rejected && found.index == -1)
            #expect(found.reason.contains("frame 1 is not a batch header"), "\(found.reason)")
            #expect(found.ack?.first == 5 && found.ack?.last == 5 && found.ack?.device == "cart-1", "\(found)")
        }
        // One that does not name its batch still has no name: 0…0.
        let unnamed = try #require(rejection(decode([try MessagePackEncoder().encode(["v": 1]), records])))
        #expect(unnamed.ack == nil || unnamed.ack?.first == 0)
    }

    @Test func aRecordThatIsNotMessagePackIsNamedByIndex() throws {
        let hostile = Data([0xdb, 0xff, 0xff, 0xff, 0xff, 0x41])  // str32 claiming 4 GiB
        let outgoing = batch([encoded(.scan(scan())), hostile])
        let found = try #require(rejection(decode(try outgoing.frames())))
        #expect(found.status == .rejected && found.index == 1)
    }

    /// An array header that claims more elements than frame 2 holds fails at the first missing one: that index is no
    /// record of the batch, and a device ignores an index outside −1…count−1 (docs/PROTOCOL.md, "Bounds of an ack"),
    /// so it would resend the batch unchanged on every timeout. The batch itself is malformed: −1, and the device
    /// rebuilds it. Before, the answer named index 3 of a 3-record batch.
    @Test func anArrayClaimingMoreRecordsThanItHoldsIsTheBatchsFaultNotARecords() throws {
        let records = [encoded(.scan(scan())), encoded(.scan(scan())), encoded(.scan(scan()))]
        let body = Data([0x94]) + records.reduce(Data(), +)  // an array of 4, holding 3
        let header = BatchHeader(device: "cart-1", first: 1, last: 3, count: 3, crc32c: Checksum.crc32c(body))
        let found = try #require(rejection(decode([try MessagePackEncoder().encode(header), body])))
        #expect(found.status == .rejected && found.index == -1, "\(found)")
        #expect(found.ack?.index == -1 && found.ack?.first == 1 && found.ack?.last == 3)
        // A fault inside the records the header counts keeps its index.
        let truncated = Data([0x93]) + records[0] + records[1] + records[2].dropLast()
        let cut = BatchHeader(device: "cart-1", first: 1, last: 3, count: 3, crc32c: Checksum.crc32c(truncated))
        let named = try #require(rejection(decode([try MessagePackEncoder().encode(cut), truncated])))
        #expect(named.status == .rejected && named.index == 2, "\(named)")
    }

    /// What a device sent comes back bounded. A device id of one letter and 100,000 zero-width joiners is one
    /// character, so the messages' `prefix(64)` kept all of it: escaped, it came back in an ack of about 1 MB (a
    /// 16 MiB frame made 61 MB), which no device takes (acks are under 64 KiB), and in a log line and `status.json`.
    @Test func deviceTextEchoedInAnAnswerIsBounded() throws {
        let joined = "a" + String(repeating: "\u{200D}", count: 100_000)
        let header = BatchHeader(device: joined, first: 1, last: 1, count: 1, crc32c: Checksum.crc32c(Data([0x90])))
        let refused = try #require(rejection(decode([try MessagePackEncoder().encode(header), Data([0x90])], as: nil)))
        let ack = try #require(refused.ack)
        #expect(try WireCoding.encode(ack).count < 8 << 10)
        #expect(ack.device.unicodeScalars.count <= BatchRejection.maxEchoedDeviceScalars + 1)
        #expect(refused.reason.unicodeScalars.count <= BatchRejection.maxReasonScalars + 1)
        #expect(ack.device.unicodeScalars.starts(with: "a\u{200D}\u{200D}".unicodeScalars))
        // A key of 60,000 NULs present twice in a record: the reason quotes a bounded piece of it.
        let key = String(repeating: "\u{0}", count: 60_000)
        var record = Data([0x82])
        for _ in 0..<2 { record += Data([0xda, 0xea, 0x60]) + Data(key.utf8) + Data([0xc0]) }
        let named = try #require(rejection(decode(try batch([record]).frames())))
        #expect(named.index == 0 && named.reason.unicodeScalars.count <= BatchRejection.maxReasonScalars + 1)
        #expect(try WireCoding.encode(try #require(named.ack)).count < 8 << 10, "\(named.reason.prefix(200))")
    }

    /// A map of more than `WireProtocol.maxMapEntries` (64) entries is refused unread, in a record, a header and a
    /// message on the ack channel: unknown keys are skipped, but indexing millions of them (24 bytes each, and a sorted
    /// copy to find a key present twice) cost about 400 MB for one 16 MiB frame. 64 entries still pass.
    @Test func aMapOfTooManyEntriesIsRefusedUnread() throws {
        func map(_ base: [String: Any], extra: Int) -> Data {
            var bytes = Data([0xde, UInt8((base.count + extra) >> 8), UInt8((base.count + extra) & 0xff)])
            for (key, value) in base {
                bytes += try! MessagePackEncoder().encode(key)
                if let text = value as? String { bytes += try! MessagePackEncoder().encode(text) }
                if let number = value as? Int { bytes += try! MessagePackEncoder().encode(number) }
                if let data = value as? Data { bytes += data }
            }
            for index in 0..<extra { bytes += try! MessagePackEncoder().encode("x\(index)") + Data([0xc0]) }
            return bytes
        }
        // A record: a scan with unknown keys added.
        let scanBytes = encoded(.scan(scan()))
        let fields = try MessagePackDecoder().decode([String: MessagePackValue].self, from: scanBytes)
        var record = Data([0xde, 0x00, UInt8(fields.count + 64 - fields.count + 1)])
        for (key, value) in fields {
            record += try MessagePackEncoder().encode(key) + (try MessagePackEncoder().encode(value))
        }
        for index in 0..<(64 - fields.count + 1) { record += try MessagePackEncoder().encode("x\(index)") + Data([0xc0]) }
        let refused = try #require(rejection(decode(try batch([record]).frames())))
        #expect(refused.index == 0 && refused.reason.contains("65 entries; at most 64"), "\(refused)")
        // At the limit it is read (the unknown keys skipped).
        record.removeLast(Data("x\(64 - fields.count)".utf8).count + 2)
        record[2] = UInt8(64)
        #expect(throws: Never.self) { try decode(try batch([record]).frames()).get() }
        // A header, and a hello.
        let header = map(["v": 1, "device": "cart-1", "first": 1, "last": 1, "count": 1], extra: 60)
        let frames = [header + Data(), Data([0x90])]
        let unread = try #require(rejection(decode(frames)))
        #expect(unread.status == .rejected && unread.reason.contains("entries"), "\(unread)")
        let hello = map(["v": 1, "type": "hello", "device": "cart-1"], extra: 62)
        #expect(throws: DecodingError.self) { try WireCoding.decode(Hello.self, from: hello) }
    }

    @Test func aRecordOfUnknownShapeIsNamedByIndex() throws {
        let outgoing = batch([try MessagePackEncoder().encode(["type": "refund", "id": "x"])])
        let found = try #require(rejection(decode(try outgoing.frames())))
        #expect(found.index == 0)
        #expect(found.reason.contains("refund"))
    }

    @Test func aRecordFromAnotherDeviceIsRejected() throws {
        let outgoing = batch([encoded(.scan(scan(device: "cart-2")))])
        let found = try #require(rejection(decode(try outgoing.frames())))
        #expect(found.status == .rejected && found.index == 0 && found.reason.contains("cart-2"))
    }

    @Test func aHeaderNamingAnotherDeviceThanTheKeyIsForbidden() throws {
        let outgoing = batch([encoded(.scan(scan(device: "cart-2")))], device: "cart-2")
        let found = try #require(rejection(decode(try outgoing.frames(), as: "cart-1")))
        #expect(found.status == .forbidden)
        #expect(found.ack?.device == "cart-2")
        // Insecure mode has no authenticated device and takes the header on trust.
        #expect((try? decode(try outgoing.frames(), as: nil).get()) != nil)
    }

    @Test func aCorruptedRecordFailsTheChecksum() throws {
        var frames = try batch([encoded(.scan(scan()))]).frames()
        frames[1][frames[1].count - 1] ^= 0x01
        let found = try #require(rejection(decode(frames)))
        #expect(found.status == .rejected && found.index == -1 && found.reason.contains("CRC-32C"))
    }

    @Test func aCountThatDisagreesWithTheArrayIsRejected() throws {
        let outgoing = batch([encoded(.scan(scan())), encoded(.scan(scan()))])
        var header = outgoing.header
        header.count = 1
        let found = try #require(rejection(decode([try MessagePackEncoder().encode(header), outgoing.records])))
        #expect(found.index == -1 && found.reason.contains("2 records"))
    }

    @Test func aNewerVersionGetsUnsupportedVersion() throws {
        let outgoing = batch([encoded(.scan(scan()))])
        var header = outgoing.header
        header.v = 2
        let found = try #require(rejection(decode([try MessagePackEncoder().encode(header), outgoing.records])))
        #expect(found.status == .unsupportedVersion)
        #expect(found.ack?.supported == [1])
    }

    @Test func unknownHeaderKeysAreIgnored() throws {
        let outgoing = batch([encoded(.scan(scan()))])
        let h = outgoing.header
        let extended: MessagePackValue = .map([
            (.string("v"), .int(1)), (.string("device"), .string(h.device)), (.string("first"), .uint(h.first)),
            (.string("last"), .uint(h.last)), (.string("count"), .int(Int64(h.count))),
            (.string("crc32c"), .uint(UInt64(h.crc32c))), (.string("compression"), .string("none")),
        ])
        let frames = [try MessagePackEncoder().encode(extended), outgoing.records]
        #expect((try? decode(frames).get()) != nil)
    }

    @Test(arguments: [
        [Data()],
        [Data(), Data()],
        [Data([0xc1]), Data([0x90])],
        [Data([0x80]), Data([0x90])],
        [Data([0x81, 0xa1, 0x76, 0x01]), Data([0x90])],
    ])
    func malformedMessagesAreRejectedWithoutAHeader(frames: [Data]) {
        let found = rejection(decode(frames))
        #expect(found?.status == .rejected && found?.index == -1)
        #expect(found?.ack == nil)
    }

    @Test func insaneHeaderNumbersAreRejected() throws {
        let record = encoded(.scan(scan()))
        let body = Data([0x91]) + record
        for header in [
            BatchHeader(device: "cart-1", first: 5, last: 4, count: 1, crc32c: Checksum.crc32c(body)),
            BatchHeader(device: "cart-1", first: 1, last: 1, count: 0, crc32c: Checksum.crc32c(body)),
            BatchHeader(device: "cart-1", first: 1, last: 2, count: 3, crc32c: Checksum.crc32c(body)),
            BatchHeader(device: "not a device!", first: 1, last: 1, count: 1, crc32c: Checksum.crc32c(body)),
        ] {
            let found = rejection(decode([try MessagePackEncoder().encode(header), body], as: nil))
            #expect(found?.index == -1, "\(header)")
        }
    }

    @Test func unknownAckStatusesReadAsRetry() throws {
        let ack = try WireCoding.decode(
            Ack.self,
            from: try MessagePackEncoder().encode(
                MessagePackValue.map([
                    (.string("v"), .int(1)), (.string("device"), .string("cart-1")), (.string("first"), .int(1)),
                    (.string("last"), .int(2)), (.string("status"), .string("throttled")),
                ])))
        #expect(ack.status == .retry)
    }

    @Test func helloRoundTrips() throws {
        let hello = try WireCoding.decode(Hello.self, from: try WireCoding.encode(Hello(device: "cart-1")))
        #expect(hello.type == "hello" && hello.device == "cart-1" && hello.v == 1)
    }

    @Test func weightTravelsAsFloat32() throws {
        let record = encoded(.scan(scan(weight: 42.3)))
        // 0xca is float 32; the model reads it back at 1/1000 lb.
        #expect(record.contains(0xca))
        let incoming = try decode(try batch([record]).frames()).get()
        guard case .scan(let back) = incoming.records[0].record else {
            Issue.record("not a scan")
            return
        }
        #expect(back.tag.weight == 42.3)
    }
}
