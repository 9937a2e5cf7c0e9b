import Foundation
import MessagePack
import Testing

/// Arrays are decoded by the decoder itself rather than by `Array.init(from:)`; the results and errors must be the
/// ones `Array.init(from:)` gives through an unkeyed container, on valid and on broken input.
@Suite("Array decoding")
struct ArrayDecodingTests {
    /// Decodes its elements through the stdlib's `Array.init(from:)`, which the decoder does not intercept.
    struct ViaStdlib<Element: Decodable>: Decodable {
        var elements: [Element]

        init(from decoder: any Decoder) throws {
            elements = try [Element](from: decoder)
        }
    }

    struct Holder<Element: Decodable>: Decodable {
        var list: [Element]
        var after: Int
    }

    struct HolderViaStdlib<Element: Decodable>: Decodable {
        var list: ViaStdlib<Element>
        var after: Int
    }

    /// Reads nothing of its value, so that the array has to step over it itself.
    struct Ignored: Decodable, Equatable {
        init(from decoder: any Decoder) throws {}
    }

    /// The error's kind, path and message, or nil if decoding succeeded.
    func failure<T: Decodable>(_ type: T.Type, _ bytes: [UInt8], _ decoder: MessagePackDecoder) -> String? {
        do {
            _ = try decoder.decode(type, from: bytes)
            return nil
        } catch let error as DecodingError {
            let kind =
                error.isTypeMismatch
                ? "typeMismatch"
                : error.isValueNotFound ? "valueNotFound" : error.isDataCorrupted ? "dataCorrupted" : "keyNotFound"
            return "\(kind) \(error.path) \(error.message)"
        } catch {
            return "other \(error)"
        }
    }

    func expectSame<Element: Decodable & Equatable>(
        _ element: Element.Type, _ bytes: [UInt8], _ decoder: MessagePackDecoder = MessagePackDecoder(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let direct = failure([Element].self, bytes, decoder)
        #expect(direct == failure(ViaStdlib<Element>.self, bytes, decoder), "\(bytes)", sourceLocation: sourceLocation)
        if direct == nil {
            let value = try? decoder.decode([Element].self, from: bytes)
            #expect(value != nil && value == (try? decoder.decode(ViaStdlib<Element>.self, from: bytes))?.elements)
        }
    }

    @Test func sameValuesAndErrorsAsArrayInitFromDecoder() throws {
        let pairs = try MessagePackEncoder().encodeToBytes([Pair(a: 1, b: "x"), Pair(a: 2, b: "y"), Pair(a: 3, b: "z")])
        expectSame(Pair.self, pairs)
        // Every truncation, and 0xc1 or a wrong type at every byte.
        for cut in 0..<pairs.count {
            expectSame(Pair.self, Array(pairs.prefix(cut)))
        }
        for i in pairs.indices {
            for byte: UInt8 in [0xc1, 0xc0, 0x80, 0x90, 0xa1] {
                var broken = pairs
                broken[i] = byte
                expectSame(Pair.self, broken)
            }
        }
        // Not an array; empty; optionals; nested arrays; a count far beyond the input.
        expectSame(Int.self, [0x81, 0xa1, 0x61, 0x01])
        expectSame(Int.self, [0x90])
        expectSame(Int?.self, [0x93, 0x01, 0xc0, 0x03])
        expectSame([Int].self, [0x92, 0x92, 0x01, 0x02, 0x90])
        expectSame([Int].self, [0x92, 0x92, 0x01, 0x02, 0x91, 0xc1])
        expectSame(Int.self, [0xdd, 0xff, 0xff, 0xff, 0xff, 0x01])
        expectSame(Int.self, [0xdc, 0x00, 0x03, 0x01, 0x02])
        expectSame(UInt8.self, [0x92, 0x01, 0xcd, 0x01, 0x00])
        // Elements the element type does not read are still checked, with the element's path.
        expectSame(Ignored.self, [0x93, 0x01, 0x81, 0xa1, 0x61, 0x02, 0xc1])
        expectSame(Ignored.self, [0x92, 0x01, 0x81, 0xa1, 0x61])
        expectSame(Ignored.self, [0x92, 0x91, 0x01, 0x92, 0x01])
        // The nesting limit.
        var shallow = MessagePackDecoder()
        shallow.nestingLimit = 2
        expectSame([[Int]].self, [0x91, 0x91, 0x91, 0x01], shallow)
        expectSame([Int].self, [0x91, 0x91, 0x01], shallow)
    }

    @Test func arraysInsideMapsKeepTheirEnds() throws {
        // The keys after an array are found from where the array ended, and errors carry the map's path.
        let holder: [UInt8] = [0x82] + str("list") + [0x92, 0x01, 0x02] + str("after") + [0x05]
        let decoded = try MessagePackDecoder().decode(Holder<Int>.self, from: holder)
        #expect(decoded.list == [1, 2])
        #expect(decoded.after == 5)
        let brokenElement: [UInt8] = [0x82] + str("list") + [0x92, 0x01, 0xc1] + str("after") + [0x05]
        let notAnArray: [UInt8] = [0x82] + str("list") + [0x80] + str("after") + [0x05]
        for (broken, path) in [(brokenElement, ["list", "1"]), (notAnArray, ["list"])] {
            let direct = decodingError(Holder<Int>.self, broken)
            let stdlib = decodingError(HolderViaStdlib<Int>.self, broken)
            #expect(direct?.path == path)
            #expect(direct?.path == stdlib?.path)
            #expect(direct?.message == stdlib?.message)
        }
        // Orders round-trip, one by one and as an array, on the same thread again and again.
        let orders = [Order.example, Order.example, Order.example]
        for _ in 0..<3 {
            #expect(try MessagePackDecoder().decode([Order].self, from: MessagePackEncoder().encode(orders)) == orders)
            #expect(try roundTrip(Order.example) == Order.example)
        }
    }
}
