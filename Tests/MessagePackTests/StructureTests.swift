import Foundation
import MessagePack
import Testing

@Suite("MessagePackStructure")
struct StructureTests {
    @Test func arrayHeadersInSmallestForm() {
        #expect(MessagePackStructure.arrayHeader(count: 0) == [0x90])
        #expect(MessagePackStructure.arrayHeader(count: 15) == [0x9f])
        #expect(MessagePackStructure.arrayHeader(count: 16) == [0xdc, 0x00, 0x10])
        #expect(MessagePackStructure.arrayHeader(count: 65_535) == [0xdc, 0xff, 0xff])
        #expect(MessagePackStructure.arrayHeader(count: 65_536) == [0xdd, 0x00, 0x01, 0x00, 0x00])
        #expect(MessagePackStructure.mapHeader(count: 1) == [0x81])
    }

    @Test func recordsFramedAndSplitAgain() throws {
        let encoder = MessagePackEncoder()
        let records = try (0..<20).map { try encoder.encode(Pair(a: $0, b: String(repeating: "x", count: $0))) }
        var frame = Data(MessagePackStructure.arrayHeader(count: records.count))
        for record in records { frame += record }
        // The same bytes as encoding the array directly.
        #expect(frame == (try encoder.encode((0..<20).map { Pair(a: $0, b: String(repeating: "x", count: $0)) })))
        let ranges = try MessagePackStructure.arrayElements(in: frame)
        #expect(ranges.count == 20)
        for (i, range) in ranges.enumerated() {
            #expect(frame[range] == records[i])
            #expect(try MessagePackDecoder().decode(Pair.self, from: frame[range]).a == i)
        }
        // A slice of a larger Data keeps its own indices.
        let padded = Data([0xff, 0xff]) + frame
        let slice = padded[2...]
        let sliceRanges = try MessagePackStructure.arrayElements(in: slice)
        #expect(sliceRanges.first?.lowerBound == 2 + 3)
        #expect(slice[sliceRanges[3]] == records[3])
        #expect(try MessagePackStructure.arrayElements(in: Array(frame)) == ranges)
    }

    @Test func badElementIsNamed() throws {
        let good = try MessagePackEncoder().encodeToBytes(Pair(a: 1, b: "x"))
        let bad: [UInt8] = [0x82, 0xa1, 0x61, 0xa2, 0xc3, 0x28]  // invalid UTF-8
        let frame = [0x93] + good + bad + good
        do {
            _ = try MessagePackStructure.arrayElements(in: frame)
            Issue.record("accepted a bad element")
        } catch {
            #expect(error.index == 1)
            #expect(error.offset == 1 + good.count)
            #expect(error.description.contains("Element 1"))
        }
        #expect(throws: MessagePackStructure.Error.self) { try MessagePackStructure.arrayElements(in: [0x80]) }
        #expect(throws: MessagePackStructure.Error.self) {
            try MessagePackStructure.arrayElements(in: [0x91, 0x01, 0x02])
        }
        #expect(throws: MessagePackStructure.Error.self) { try MessagePackStructure.arrayElements(in: [UInt8]()) }
        #expect(throws: MessagePackStructure.Error.self) {
            try MessagePackStructure.arrayElements(in: [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01])
        }
        #expect(throws: MessagePackStructure.Error.self) {
            try MessagePackStructure.arrayElements(in: [0x91, 0x91, 0x90], nestingLimit: 2)
        }
        #expect(try MessagePackStructure.arrayElements(in: [0x91, 0x91, 0x90], nestingLimit: 3) == [1..<3])
        // Malformed timestamps are caught too.
        #expect(throws: MessagePackStructure.Error.self) {
            try MessagePackStructure.arrayElements(in: [0x91, 0xd4, 0xff, 0x00])
        }
    }
}
