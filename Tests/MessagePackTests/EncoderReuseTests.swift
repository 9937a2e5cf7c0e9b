import Foundation
import MessagePack
import Testing

/// Each thread reuses its encoder's stacks and keyed containers between calls: the bytes must not depend on what the
/// thread encoded before, and a container kept too long must still refuse rather than write into another map.
@Suite("Encoder reuse")
struct EncoderReuseTests {
    /// Where a value leaves its keyed container, to use it after its `encode(to:)` returned.
    final class Stash: @unchecked Sendable {
        var container: KeyedEncodingContainer<Leaky.Keys>?
    }

    struct Leaky: Encodable {
        enum Keys: String, CodingKey { case a, b }
        let stash: Stash
        /// Whether to write `b` through the container an earlier value left behind.
        let writeThroughStash: Bool

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            if writeThroughStash, var earlier = stash.container {
                try earlier.encode(2, forKey: .b)
            } else {
                stash.container = container
            }
        }
    }

    @Test func aContainerKeptPastItsValueIsNotHandedOutAgain() throws {
        // Keeping a container is allowed; its map and the next one at the same depth stay apart.
        let stash = Stash()
        let kept = [Leaky(stash: stash, writeThroughStash: false), Leaky(stash: stash, writeThroughStash: false)]
        let expected: [UInt8] = [0x92, 0x81] + str("a") + [0x01] + [0x81] + str("a") + [0x01]
        #expect(try bytes(kept) == expected)
        // Writing through it later is refused, as it was before containers were reused: had the second value been
        // given the first one's container, `b` would have gone into the second map without an error.
        let stash2 = Stash()
        let late = [Leaky(stash: stash2, writeThroughStash: false), Leaky(stash: stash2, writeThroughStash: true)]
        #expect(throws: EncodingError.self) { try bytes(late) }
        stash.container = nil
        stash2.container = nil
        // And the thread's next encodings are unaffected.
        #expect(try bytes(kept) == expected)
        #expect(try bytes([Pair(a: 1, b: "x"), Pair(a: 2, b: "y")]) == pairsBytes)
    }

    let pairsBytes: [UInt8] =
        [0x92, 0x82] + str("a") + [0x01] + str("b") + str("x") + [0x82] + str("a") + [0x02] + str("b") + str("y")

    struct Other: Codable, Equatable {
        var z: Bool
    }

    enum Either: Encodable {
        case pair(Pair)
        case other(Other)

        func encode(to encoder: any Encoder) throws {
            switch self {
            case .pair(let pair): try pair.encode(to: encoder)
            case .other(let other): try other.encode(to: encoder)
            }
        }
    }

    @Test func keyTypesTakeTurnsAtOneDepth() throws {
        let values: [Either] = [
            .pair(Pair(a: 1, b: "x")), .other(Other(z: true)), .other(Other(z: false)), .pair(Pair(a: 2, b: "y")),
        ]
        let expected: [UInt8] =
            [0x94, 0x82] + str("a") + [0x01] + str("b") + str("x") + [0x81] + str("z") + [0xc3] + [0x81] + str("z")
            + [0xc2] + [0x82] + str("a") + [0x02] + str("b") + str("y")
        for _ in 0..<3 {
            #expect(try bytes(values) == expected)
        }
    }

    struct Failing: Encodable {
        enum Keys: CodingKey { case a, nested }
        struct Boom: Error {}

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(1, forKey: .a)
            var nested = container.nestedContainer(keyedBy: Keys.self, forKey: .nested)
            try nested.encode(2, forKey: .a)
            throw Boom()
        }
    }

    /// Asks for a keyed container after writing a single value: the encoder keeps the error until the end.
    struct Misuse: Encodable {
        func encode(to encoder: any Encoder) throws {
            var single = encoder.singleValueContainer()
            try single.encode(1)
            _ = encoder.container(keyedBy: Failing.Keys.self)
        }
    }

    @Test func aFailedEncodingLeavesNothingBehind() throws {
        let before = try bytes(Order.example)
        for _ in 0..<2 {
            #expect(throws: EncodingError.self) { try bytes([Misuse()]) }
            #expect(throws: Failing.Boom.self) { try bytes([Failing()]) }
            #expect(throws: Failing.Boom.self) { try MessagePackEncoder().encode(Failing()) }
            #expect(try bytes(Order.example) == before)
            #expect(try [UInt8](MessagePackEncoder().encode([Pair(a: 1, b: "x"), Pair(a: 2, b: "y")])) == pairsBytes)
        }
    }

    @Test func anEncodingInsideAnEncoding() throws {
        // A date strategy that itself encodes with MessagePackEncoder, on the thread's own encoder.
        var encoder = MessagePackEncoder()
        encoder.dateEncodingStrategy = .custom { date, dateEncoder in
            let inner = try MessagePackEncoder().encode([Pair(a: Int(date.timeIntervalSince1970), b: "t")])
            var single = dateEncoder.singleValueContainer()
            try single.encode(inner)
        }
        struct Stamped: Encodable {
            var pair: Pair
            var at: Date
            var after: Pair
        }
        let inner: [UInt8] = [0x91, 0x82] + str("a") + [0x07] + str("b") + str("t")
        let expected: [UInt8] =
            [0x83] + str("pair") + [0x82] + str("a") + [0x01] + str("b") + str("x") + str("at")
            + [0xc4, UInt8(inner.count)] + inner + str("after") + [0x82] + str("a") + [0x02] + str("b") + str("y")
        let value = Stamped(pair: Pair(a: 1, b: "x"), at: Date(timeIntervalSince1970: 7), after: Pair(a: 2, b: "y"))
        #expect(try bytes(value, encoder) == expected)
        #expect(try bytes(value, encoder) == expected)
        // Options of one call do not leak into the next on the same thread.
        #expect(try bytes(Date(timeIntervalSince1970: 7)) == [0xd6, 0xff, 0, 0, 0, 7])
    }

    @Test func threadsGiveEqualBytes() async throws {
        let orders = (0..<50).map { n in
            var order = Order.example
            order.revision = n
            order.lineItems = Array(
                repeating: LineItem(item: Item(name: "Chips", unitPrice: n), count: 1), count: n % 4 + 1)
            return order
        }
        let expected = try orders.map { try bytes($0) }
        let results = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<4 {
                group.addTask { try orders.map { try MessagePackEncoder().encodeToBytes($0) } }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 4)
        for result in results {
            #expect(result == expected)
        }
    }
}
