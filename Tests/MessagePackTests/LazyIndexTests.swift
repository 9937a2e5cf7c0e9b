import Foundation
import MessagePack
import Testing

/// Keys are read lazily and each thread reuses its decoder: strictness must not depend on what a type reads, nor on
/// what the thread decoded before.
@Suite("Lazy key index and decoder reuse")
struct LazyIndexTests {
    struct First: Codable, Equatable {
        var a: Int
    }

    struct Outer: Codable, Equatable {
        var inner: Pair
        var n: Int
    }

    @Test func unreadKeysAreStillChecked() throws {
        // The duplicate comes after the only key the type reads.
        let duplicate = decodingError(First.self, [0x83] + str("a") + [0x01] + str("b") + [0x02] + str("b") + [0x03])
        #expect(duplicate?.message == "Duplicate key \"b\" in the map at offset 0")
        // 0xc1 under a key the type never reads.
        let invalid = decodingError(First.self, [0x82] + str("a") + [0x01] + str("z") + [0xc1])
        #expect(invalid?.isDataCorrupted == true)
        // The map claims more entries than there are.
        let truncated = decodingError(First.self, [0x83] + str("a") + [0x01] + str("b") + [0x02])
        #expect(truncated?.isDataCorrupted == true)
        // A key that is not a string or an integer, after the key read.
        let badKey = decodingError(First.self, [0x82] + str("a") + [0x01] + [0xc3, 0x02])
        #expect(badKey?.isDataCorrupted == false)
        #expect(badKey != nil)
        // Nested: the inner map's duplicate is found when the inner value is done, with the inner path.
        let nested = decodingError(
            Outer.self,
            [0x82] + str("inner") + [0x83] + str("a") + [0x01] + str("b") + str("x") + str("a") + [0x02] + str("n")
                + [0x05])
        #expect(nested?.message == "Duplicate key \"a\" in the map at offset 7")
        #expect(nested?.path == ["inner"])
    }

    @Test func keysInAnyOrder() throws {
        let bytes = [0x82] + str("n") + [0x05] + str("inner") + [0x82] + str("b") + str("x") + str("a") + [0x01]
        let value = try MessagePackDecoder().decode(Outer.self, from: bytes)
        #expect(value == Outer(inner: Pair(a: 1, b: "x"), n: 5))
        let missing = decodingError(Outer.self, [0x81] + str("n") + [0x05])
        if case .keyNotFound(let key, _) = missing {
            #expect(key.stringValue == "inner")
        } else {
            Issue.record("expected keyNotFound, got \(String(describing: missing))")
        }
    }

    @Test func failedDecodingLeavesNothingBehind() throws {
        let good = try MessagePackEncoder().encodeToBytes([Outer(inner: Pair(a: 1, b: "x"), n: 2)])
        for _ in 0..<3 {
            // Fails half way through the inner map, at the same offsets as the good input.
            var bad = good
            bad[bad.count - 1] = 0xc1
            #expect(decodingError([Outer].self, bad) != nil)
            #expect(decodingError([Outer].self, Array(good.dropLast())) != nil)
            #expect(
                try MessagePackDecoder().decode([Outer].self, from: good) == [Outer(inner: Pair(a: 1, b: "x"), n: 2)])
        }
    }

    struct Snake: Codable, Equatable {
        var someValue: Int
    }

    @Test func optionsDoNotLeakBetweenCalls() throws {
        var snake = MessagePackDecoder()
        snake.keyDecodingStrategy = .convertFromSnakeCase
        let snakeBytes = [0x81] + str("some_value") + [0x07]
        let plainBytes = [0x81] + str("someValue") + [0x08]
        for _ in 0..<2 {
            #expect(try snake.decode(Snake.self, from: snakeBytes) == Snake(someValue: 7))
            #expect(try MessagePackDecoder().decode(Snake.self, from: plainBytes) == Snake(someValue: 8))
            #expect(decodingError(Snake.self, snakeBytes) != nil)
        }
    }

    @Test func decodingInsideDecoding() throws {
        struct Stamped: Codable, Equatable {
            var at: Date
            var inner: Pair
        }
        let inner = try MessagePackEncoder().encode(Pair(a: 3, b: "y"))
        var decoder = MessagePackDecoder()
        // A custom strategy that itself decodes MessagePack while the outer decoding is under way.
        decoder.dateDecodingStrategy = .custom { dateDecoder in
            let data = try dateDecoder.singleValueContainer().decode(Data.self)
            let pair = try MessagePackDecoder().decode(Pair.self, from: data)
            return Date(timeIntervalSince1970: Double(pair.a))
        }
        let bytes = [0x82] + str("at") + [0xc4, UInt8(inner.count)] + Array(inner) + str("inner") + Array(inner)
        let value = try decoder.decode(Stamped.self, from: bytes)
        #expect(value == Stamped(at: Date(timeIntervalSince1970: 3), inner: Pair(a: 3, b: "y")))
    }

    /// Keys are looked up through a per-type table of their bytes, and a scalar just read gives the next key's start.
    @Test func keyTablesAndValueEnds() throws {
        struct Record: Codable, Equatable {
            var id: UUID
            var n: Int
            var s: String
        }
        struct Numbered: Codable, Equatable {
            var x: Int
            var y: Int
            enum CodingKeys: Int, CodingKey {
                case x = 1
                case y = 2
            }
        }
        let id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!
        // The UUID as str16 (3 header bytes, not the usual 2): the next key must be found after its real end.
        let uuid16 = [0xda, 0x00, 36] + Array(id.uuidString.utf8)
        let record = [0x83] + str("id") + uuid16 + str("n") + [0x05] + str("s") + str("t")
        for _ in 0..<2 {
            #expect(try MessagePackDecoder().decode(Record.self, from: record) == Record(id: id, n: 5, s: "t"))
            // Out of order, and integer keys, through the same tables.
            let reordered = [0x83] + str("s") + str("t") + str("n") + [0x05] + str("id") + uuid16
            #expect(try MessagePackDecoder().decode(Record.self, from: reordered) == Record(id: id, n: 5, s: "t"))
            #expect(
                try MessagePackDecoder().decode(Numbered.self, from: [0x82, 0x02, 0x07, 0x01, 0x06])
                    == Numbered(x: 6, y: 7))
            // A duplicate of a key already read, right after it: still an error.
            let duplicate = decodingError(
                Record.self, [0x84] + str("id") + uuid16 + str("n") + [0x05] + str("n") + [0x06] + str("s") + str("t"))
            #expect(duplicate?.message == "Duplicate key \"n\" in the map at offset 0")
        }
    }
}
