import Foundation
import MessagePack
import Testing

/// The error from decoding `bytes` as `T`, which must be a `DecodingError`.
func decodingError<T: Decodable>(
    _ type: T.Type, _ bytes: [UInt8], _ decoder: MessagePackDecoder = MessagePackDecoder(),
    sourceLocation: SourceLocation = #_sourceLocation
) -> DecodingError? {
    do {
        let value = try decoder.decode(type, from: bytes)
        Issue.record("decoded \(value) from \(bytes)", sourceLocation: sourceLocation)
        return nil
    } catch let error as DecodingError {
        return error
    } catch {
        Issue.record("not a DecodingError: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

extension DecodingError {
    var context: Context {
        switch self {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c), .dataCorrupted(let c): return c
        @unknown default: fatalError()
        }
    }

    var path: [String] { context.codingPath.map { $0.intValue.map { "\($0)" } ?? $0.stringValue } }
    var message: String { context.debugDescription }

    var isTypeMismatch: Bool { if case .typeMismatch = self { true } else { false } }
    var isValueNotFound: Bool { if case .valueNotFound = self { true } else { false } }
    var isDataCorrupted: Bool { if case .dataCorrupted = self { true } else { false } }
}

/// A recursive type for nesting tests.
indirect enum Tree: Decodable {
    case leaf
    case node([Tree])

    init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        var children: [Tree] = []
        while !container.isAtEnd { children.append(try container.decode(Tree.self)) }
        self = children.isEmpty ? .leaf : .node(children)
    }
}

@Suite("Strict decoding")
struct StrictDecodingTests {
    @Test func emptyAndTruncatedInput() throws {
        let empty = decodingError(Int.self, [])
        #expect(empty?.isDataCorrupted == true)
        #expect(empty?.message.contains("Unexpected end of data at offset 0") == true)
        let truncated = decodingError(UInt32.self, [0xce, 0x00, 0x01])
        #expect(truncated?.message == "Unexpected end of data at offset 1: uint32 needs 4 bytes (2 left)")
        let order = try MessagePackEncoder().encodeToBytes(Order.example)
        for cut in [1, 10, order.count / 2, order.count - 1] {
            let error = decodingError(Order.self, Array(order.prefix(cut)))
            #expect(error?.message.contains("offset") == true, "\(String(describing: error))")
        }
    }

    @Test func lengthsRunningPastTheEnd() throws {
        let str8 = decodingError(String.self, [0xd9, 200] + Array(repeating: 0x61, count: 12))
        #expect(
            str8?.message == "Unexpected end of data at offset 0: str8 length 200 runs past the end (12 bytes left)")
        // Hostile counts and lengths fail at once, without reserving what they claim.
        #expect(decodingError([Int].self, [0xdd, 0xff, 0xff, 0xff, 0xff])?.isDataCorrupted == true)
        #expect(decodingError([String: Int].self, [0xdf, 0xff, 0xff, 0xff, 0xff, 0x01])?.isDataCorrupted == true)
        #expect(decodingError(MessagePackValue.self, [0xdd, 0xff, 0xff, 0xff, 0xff])?.isDataCorrupted == true)
        #expect(decodingError(MessagePackValue.self, [0xdf, 0xff, 0xff, 0xff, 0xff])?.isDataCorrupted == true)
        #expect(decodingError(Data.self, [0xc6, 0xff, 0xff, 0xff, 0xff, 0x00])?.isDataCorrupted == true)
        #expect(decodingError(MessagePackValue.self, [0xc9, 0xff, 0xff, 0xff, 0xff, 0x01])?.isDataCorrupted == true)
        #expect(decodingError(MessagePackValue.self, [0xd8, 0x01, 0x00])?.isDataCorrupted == true)
    }

    /// A map cut after its last key, read with `decodeNil(forKey:)`: the byte after the input (here a nil in the
    /// same buffer) is never read.
    @Test func aMapCutAfterItsLastKeyIsNotReadPastTheEnd() throws {
        struct Probe: Decodable {
            enum CodingKeys: String, CodingKey { case a }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                _ = try container.decodeNil(forKey: .a)
            }
        }
        let buffer = Data([0x81, 0xa1, 0x61, 0xc0])
        let error = decodingError(Probe.self, Array(buffer.prefix(3)))
        #expect(error?.isDataCorrupted == true)
        #expect(error?.path == ["a"])
        #expect(error?.message.hasPrefix("Unexpected end of data at offset 3") == true, "\(String(describing: error))")
        do {
            _ = try MessagePackDecoder().decode(Probe.self, from: buffer.prefix(3))
            Issue.record("decoded a map cut after its key from a Data slice")
        } catch let error as DecodingError {
            #expect(error.path == ["a"])
        }
    }

    @Test func nestingLimit() throws {
        let deep = Array(repeating: UInt8(0x91), count: 600) + [0x90]
        let typed = decodingError(Tree.self, deep)
        #expect(typed?.message.contains("Nesting too deep") == true)
        #expect(typed?.context.codingPath.count == 512)
        #expect(decodingError(MessagePackValue.self, deep)?.message.contains("Nesting too deep") == true)
        var decoder = MessagePackDecoder()
        decoder.nestingLimit = 601
        _ = try decoder.decode(Tree.self, from: deep)
        _ = try decoder.decode(MessagePackValue.self, from: deep)
        decoder.nestingLimit = 3
        #expect(decodingError(MessagePackValue.self, [0x91, 0x91, 0x91, 0x90], decoder) != nil)
        _ = try decoder.decode(MessagePackValue.self, from: [0x91, 0x91, 0x90])
        // Values a type skips are held to the limit too.
        #expect(
            decodingError(
                Pair.self, [0x83] + str("a") + [0x01] + str("b") + str("x") + str("c") + [0x91, 0x91, 0x90], decoder)
                != nil)
    }

    @Test func invalidUTF8() throws {
        let error = decodingError(String.self, [0xa2, 0xc3, 0x28])
        #expect(error?.message == "Invalid UTF-8 in the string at offset 0")
        #expect(decodingError(MessagePackValue.self, [0x91, 0xa1, 0xff])?.isDataCorrupted == true)
        #expect(decodingError(Pair.self, [0x82, 0xa1, 0xff, 0x01] + str("b") + str("x"))?.isDataCorrupted == true)
    }

    @Test func neverUsedByte() throws {
        #expect(decodingError(Int.self, [0xc1])?.message.contains("0xc1") == true)
        #expect(decodingError(MessagePackValue.self, [0x92, 0x01, 0xc1])?.message.contains("0xc1 at offset 2") == true)
        #expect(
            decodingError(Pair.self, [0x82] + str("a") + [0xc1] + str("b") + str("x"))?.message.contains("0xc1") == true
        )
    }

    @Test func integersOutOfRange() throws {
        let error = decodingError(Int8.self, [0xcc, 0xff])
        #expect(error?.message == "Number 255 at offset 0 does not fit in Int8")
        #expect(decodingError(UInt8.self, [0xff]) != nil)
        #expect(decodingError(UInt64.self, [0xd0, 0x80]) != nil)
        #expect(decodingError(Int64.self, [0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0]) != nil)
        #expect(decodingError(Int16.self, [0xcd, 0x80, 0x00]) != nil)
        #expect(try MessagePackDecoder().decode(Int8.self, from: [0xd3] + Array(repeating: 0xff, count: 8)) == -1)
        #expect(try MessagePackDecoder().decode(UInt8.self, from: [0xcf, 0, 0, 0, 0, 0, 0, 0, 0xff]) == 255)
    }

    @Test func floatsIntoIntegersOnlyWhenExact() throws {
        #expect(try MessagePackDecoder().decode(Int.self, from: MessagePackEncoder().encode(2.0)) == 2)
        #expect(try MessagePackDecoder().decode(Int.self, from: MessagePackEncoder().encode(Float(-3))) == -3)
        #expect(decodingError(Int.self, try MessagePackEncoder().encodeToBytes(2.5))?.isDataCorrupted == true)
        #expect(decodingError(UInt8.self, try MessagePackEncoder().encodeToBytes(256.0)) != nil)
        #expect(decodingError(Int.self, try MessagePackEncoder().encodeToBytes(Double.nan)) != nil)
        #expect(decodingError(Float.self, try MessagePackEncoder().encodeToBytes(0.1)) != nil)
        #expect(try MessagePackDecoder().decode(Double.self, from: [0x05]) == 5)
    }

    @Test func nilIntoNonOptional() throws {
        let error = decodingError(Int.self, [0xc0])
        #expect(error?.isValueNotFound == true)
        let inStruct = decodingError(Pair.self, [0x82] + str("a") + [0xc0] + str("b") + str("x"))
        #expect(inStruct?.isValueNotFound == true)
        #expect(inStruct?.path == ["a"])
    }

    @Test func timestamps() throws {
        let wrongLength = decodingError(Date.self, [0xc7, 0x03, 0xff, 0, 0, 0])
        #expect(wrongLength?.message == "Invalid timestamp at offset 0: 3 data bytes; expected 4, 8 or 12")
        // 64-bit form with nanoseconds 0x3fffffff (> 10⁹ − 1).
        let nanos = decodingError(Date.self, [0xd7, 0xff, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0])
        #expect(nanos?.message.contains("nanoseconds") == true)
        let nanos96 = decodingError(
            MessagePackValue.self, [0xc7, 12, 0xff, 0x3b, 0x9a, 0xca, 0x00] + Array(repeating: 0, count: 8))
        #expect(nanos96?.isDataCorrupted == true)
        let otherExtension = decodingError(Date.self, [0xd6, 0x05, 0, 0, 0, 0])
        #expect(otherExtension?.isTypeMismatch == true)
        #expect(otherExtension?.message.contains("extension type 5") == true)
        #expect(decodingError(Date.self, [0x01])?.isTypeMismatch == true)
        // Found by fuzzing: seconds near Int64.min overflowed when converted to Date.
        let extreme: [UInt8] = [0xc7, 0x0c, 0xff, 0x3b, 0x9a, 0xc9, 0x00, 0x80, 0, 0, 0, 0x0f, 0, 0, 0x0f]
        #expect(try MessagePackDecoder().decode(Date.self, from: extreme).timeIntervalSince1970 < -9e18)
        #expect(throws: EncodingError.self) {
            try MessagePackEncoder().encode(Date(timeIntervalSinceReferenceDate: 1e30))
        }
        #expect(throws: EncodingError.self) {
            try MessagePackEncoder().encode(Date(timeIntervalSinceReferenceDate: .infinity))
        }
    }

    @Test func duplicateKeys() throws {
        let error = decodingError(Pair.self, [0x83] + str("a") + [0x01] + str("b") + str("x") + str("a") + [0x02])
        #expect(error?.message == "Duplicate key \"a\" in the map at offset 0")
        // Large maps take the sorted path.
        var bytes: [UInt8] = [0xde, 0x00, 40]
        for i in 0..<40 { bytes += str("k\(i % 39)") + [UInt8(i)] }
        #expect(decodingError([String: Int].self, bytes)?.message.contains("Duplicate key \"k0\"") == true)
        #expect(decodingError([Int: Int].self, [0x82, 0x01, 0x01, 0x01, 0x02])?.isDataCorrupted == true)
        // MessagePackValue keeps both, as the bytes say.
        let value = try MessagePackDecoder().decode(MessagePackValue.self, from: [0x82, 0x01, 0x01, 0x01, 0x02])
        #expect(value == .map([(.uint(1), .uint(1)), (.uint(1), .uint(2))]))
    }

    @Test func trailingBytes() throws {
        let error = decodingError(Int.self, [0x01, 0x02])
        #expect(error?.message == "Unexpected data at offset 1: 1 bytes left over after the top-level value")
        #expect(decodingError(Pair.self, try MessagePackEncoder().encodeToBytes(Pair(a: 1, b: "x")) + [0xc0]) != nil)
        #expect(decodingError([Int].self, [0x91, 0x01, 0x01]) != nil)
    }

    @Test func typeMismatchNamesPathAndOffset() throws {
        var order = try MessagePackEncoder().encodeToBytes(
            [
                Order.example,
                Order(
                    id: UUID(), revision: 2, flight: "F", seat: "1A",
                    lineItems: [
                        LineItem(item: Item(name: "Chips", unitPrice: 300), count: 1),
                        LineItem(item: Item(name: "Pop", unitPrice: 400), count: 7),
                    ],
                    currency: "USD", createdAt: Date(timeIntervalSince1970: 0), device: "d"),
            ])
        // Replace the last count (fixint 7, the byte before the final "currency" key's value) with a string.
        let countKey = str("count") + [0x07]
        let at = try #require(
            order.indices.last { Array(order[$0..<min($0 + countKey.count, order.count)]) == countKey })
        order[at + countKey.count - 1] = 0xc2
        let error = decodingError([Order].self, order)
        #expect(error?.isTypeMismatch == true)
        #expect(error?.path == ["1", "lineItems", "1", "count"])
        #expect(error?.message == "Expected Int at offset \(at + countKey.count - 1) but found bool")
    }

    @Test func missingKeyAndWrongContainer() throws {
        let missing = decodingError(Pair.self, [0x81] + str("a") + [0x01])
        guard case .keyNotFound(let key, _) = missing else {
            Issue.record("expected keyNotFound")
            return
        }
        #expect(key.stringValue == "b")
        #expect(decodingError(Pair.self, [0x90])?.isTypeMismatch == true)
        #expect(decodingError([Int].self, [0x80])?.isTypeMismatch == true)
        #expect(decodingError(Pair.self, [0x82, 0xc3, 0x01] + str("b") + str("x"))?.isTypeMismatch == true)
        struct Two: Decodable {
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                _ = try container.decode(Int.self)
                _ = try container.decode(Int.self)
            }
        }
        #expect(decodingError(Two.self, [0x91, 0x01])?.isValueNotFound == true)
    }
}
