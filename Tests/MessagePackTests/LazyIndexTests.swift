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
}
