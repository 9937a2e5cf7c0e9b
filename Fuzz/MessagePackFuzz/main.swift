// libFuzzer entry point for the MessagePack decoder. Build and run with Fuzz/run-fuzz.sh.
// Every input must decode or throw DecodingError; anything that decodes must re-encode and decode to the same value.
// The aggregator's hand-written record decoder is fuzzed against the Codable one: both accept, with equal records, or
// both refuse, for a record and for a whole batch.
import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack

struct Item: Codable {
    var name: String
    var unitPrice: Int
}

struct LineItem: Codable {
    var item: Item
    var count: Int
}

struct Order: Codable {
    var type: String
    var id: UUID
    var revision: Int
    var flight: String
    var seat: String
    var lineItems: [LineItem]
    var currency: String
    var createdAt: Date
    var device: String
}

/// A recursive type, so typed decoding meets deep nesting too.
indirect enum Tree: Codable {
    case leaf(Int8)
    case node([Tree])

    init(from decoder: any Decoder) throws {
        if var container = try? decoder.unkeyedContainer() {
            var children: [Tree] = []
            while !container.isAtEnd {
                children.append(try container.decode(Tree.self))
            }
            self = .node(children)
        } else {
            self = .leaf(try decoder.singleValueContainer().decode(Int8.self))
        }
    }

    func encode(to encoder: any Encoder) throws {}
}

struct Mixed: Codable {
    var a: Int?
    var b: [String: Double]?
    var c: [Int: Data]?
    var d: MessagePackTimestamp?
    var e: Float?
    var f: [UInt16]?
}

func check(_ data: Data) {
    let decoder = MessagePackDecoder()
    let encoder = MessagePackEncoder()
    if let value = try? decoder.decode(MessagePackValue.self, from: data) {
        guard let again = try? encoder.encode(value) else { fatalError("decoded value does not re-encode") }
        guard again.count <= data.count else { fatalError("re-encoding grew: \(again.count) > \(data.count)") }
        guard let back = try? decoder.decode(MessagePackValue.self, from: again) else {
            fatalError("re-encoding does not decode")
        }
        // NaN is not equal to itself; compare bytes instead.
        guard (try? encoder.encode(back)) == again else { fatalError("round trip changed the bytes") }
    }
    _ = try? decoder.decode(Order.self, from: data)
    _ = try? decoder.decode([Order].self, from: data)
    _ = try? decoder.decode(Tree.self, from: data)
    _ = try? decoder.decode(Mixed.self, from: data)
    _ = try? decoder.decode([String: Int].self, from: data)
    _ = try? decoder.decode(Date.self, from: data)
    if let ranges = try? MessagePackStructure.arrayElements(in: data) {
        for range in ranges {
            guard (try? decoder.decode(MessagePackValue.self, from: data[range])) != nil else {
                fatalError("arrayElements accepted an element that does not decode: \(range)")
            }
        }
    }
}

/// `RecordCoding.decode` (`RecordDecoder`) must accept exactly what the Codable path accepts, and decode it to the same record.
func checkRecordDecoders(_ data: Data) {
    var codable = MessagePackDecoder()
    codable.nestingLimit = WireProtocol.recordNestingLimit
    let reference = try? codable.decode(Record.self, from: data)
    let fast = try? RecordCoding.decode(data)
    // Compared as bytes: a NaN weight is not equal to itself.
    let encoder = MessagePackEncoder()
    guard (try? reference.map(encoder.encode)) == (try? fast.map(encoder.encode)) else {
        fatalError("RecordDecoder and Codable disagree: \(String(describing: reference)) vs \(String(describing: fast))")
    }
    // The agent's archive reads only a record's identity: whatever it makes of other bytes, a record that decodes has
    // the decoded record's identity.
    var stream = RecordCoding.Stream()
    let identity = try? stream.identity(data)
    if let fast, identity != RecordIdentity(fast) {
        fatalError("identity \(String(describing: identity)) of a record that decodes to \(fast)")
    }

    // The same bytes as frame 2 of a batch from device "d" (the seeds' device), with a header that matches them.
    let count = (try? MessagePackStructure.arrayElements(in: data).count) ?? 1
    guard count > 0,
        let header = try? WireCoding.encode(
            BatchHeader(device: "d", first: 1, last: UInt64(count), count: count, crc32c: Checksum.crc32c(data)))
    else { return }
    let frames = [header, data]
    let batch = IncomingBatch.decode(frames: frames, authenticatedDevice: "d")
    let expected = IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "d")
    switch (batch, expected) {
    case (.success(let batch), .success(let expected)):
        guard batch.header == expected.header, batch.records.map(\.bytes) == expected.records.map(\.bytes),
            (try? batch.records.map { try encoder.encode($0.record) }) == (try? expected.records.map { try encoder.encode($0.record) })
        else { fatalError("IncomingBatch.decode and referenceDecode stored different records") }
    case (.failure(let rejection), .failure(let expected)):
        // RecordDecoder words a record's own fault (it may name another of several, meeting them in key order);
        // everything else is the reference's: status, index, header, and the words of a frame-level fault.
        guard rejection.status == expected.status, rejection.index == expected.index,
            rejection.header == expected.header,
            rejection.reason == expected.reason
                || (rejection.index >= 0 && rejection.reason.hasPrefix("record \(rejection.index): ")
                    && expected.reason.hasPrefix("record \(rejection.index): "))
        else { fatalError("different rejections: \(rejection) vs \(expected)") }
    default:
        fatalError("IncomingBatch.decode and referenceDecode disagree: \(batch) vs \(expected)")
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let data = start.map { Data(bytes: $0, count: count) } ?? Data()
    check(data)
    checkRecordDecoders(data)
    return 0
}
