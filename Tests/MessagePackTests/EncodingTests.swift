import Foundation
import MessagePack
import Testing

struct Pair: Codable, Equatable {
    var a: Int
    var b: String
}

struct Item: Codable, Hashable {
    var name: String
    var unitPrice: Int
}

struct LineItem: Codable, Hashable {
    var item: Item
    var count: Int
}

struct Order: Codable, Hashable {
    var type = "order"
    var id: UUID
    var revision: Int
    var flight: String
    var seat: String
    var lineItems: [LineItem]
    var currency: String
    var createdAt: Date
    var device: String

    static let example = Order(
        id: UUID(uuidString: "F432BDB8-D84F-4461-8362-AFF89F6C493E")!, revision: 1, flight: "ZA101/2026-11-21",
        seat: "17B", lineItems: [LineItem(item: Item(name: "Peanuts", unitPrice: 200), count: 2)], currency: "USD",
        createdAt: Date(timeIntervalSince1970: 1_795_000_000), device: "cart-1")
}

func bytes<T: Encodable>(_ value: T, _ encoder: MessagePackEncoder = MessagePackEncoder()) throws -> [UInt8] {
    try encoder.encodeToBytes(value)
}

func roundTrip<T: Codable & Equatable>(_ value: T) throws -> T {
    try MessagePackDecoder().decode(T.self, from: MessagePackEncoder().encode(value))
}

/// `[0xa1, 0x61]` for "a": a fixstr.
func str(_ s: String) -> [UInt8] {
    [0xa0 | UInt8(s.utf8.count)] + Array(s.utf8)
}

@Suite("Encoding")
struct EncodingTests {
    @Test func goldenStruct() throws {
        #expect(try bytes(Pair(a: 1, b: "x")) == [0x82, 0xa1, 0x61, 0x01, 0xa1, 0x62, 0xa1, 0x78])
    }

    @Test func orderKeysInDeclarationOrder() throws {
        let encoded = try bytes(Order.example)
        let value = try MessagePackDecoder().decode(MessagePackValue.self, from: encoded)
        guard case .map(let pairs) = value else {
            Issue.record("not a map")
            return
        }
        #expect(
            pairs.map(\.key)
                == ["type", "id", "revision", "flight", "seat", "lineItems", "currency", "createdAt", "device"]
                .map(MessagePackValue.string))
        #expect(pairs[1].value == .string("F432BDB8-D84F-4461-8362-AFF89F6C493E"))
        #expect(pairs[7].value == .timestamp(MessagePackTimestamp(seconds: 1_795_000_000)))
        #expect(encoded.starts(with: [0x89] + str("type") + str("order") + str("id") + [0xd9, 36]))
        #expect(try roundTrip(Order.example) == Order.example)
    }

    @Test func integersInSmallestForm() throws {
        #expect(try bytes(0) == [0x00])
        #expect(try bytes(127) == [0x7f])
        #expect(try bytes(128) == [0xcc, 0x80])
        #expect(try bytes(Int8(-1)) == [0xff])
        #expect(try bytes(Int8(-32)) == [0xe0])
        #expect(try bytes(Int16(-33)) == [0xd0, 0xdf])
        #expect(try bytes(Int16(200)) == [0xcc, 0xc8])
        #expect(try bytes(UInt16(256)) == [0xcd, 0x01, 0x00])
        #expect(try bytes(Int32(-129)) == [0xd1, 0xff, 0x7f])
        #expect(try bytes(UInt32(65536)) == [0xce, 0x00, 0x01, 0x00, 0x00])
        #expect(try bytes(Int64(-32769)) == [0xd2, 0xff, 0xff, 0x7f, 0xff])
        #expect(try bytes(UInt64.max) == [0xcf] + Array(repeating: 0xff, count: 8))
        #expect(try bytes(Int64.min) == [0xd3, 0x80] + Array(repeating: 0, count: 7))
        #expect(try bytes(UInt8(255)) == [0xcc, 0xff])
        #expect(try bytes(UInt(5)) == [0x05])
        for value in [Int64.min, -1 << 40, -70000, -300, -100, -5, 0, 5, 200, 70000, 1 << 40, Int64.max] {
            #expect(try roundTrip(value) == value)
        }
    }

    @Test func floatsAndOtherScalars() throws {
        #expect(try bytes(Float(1.5)) == [0xca, 0x3f, 0xc0, 0x00, 0x00])
        #expect(try bytes(1.5) == [0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0])
        #expect(try bytes(true) == [0xc3])
        #expect(try bytes(Int?.none) == [0xc0])
        #expect(try bytes(Data([1, 2])) == [0xc4, 0x02, 0x01, 0x02])
        #expect(try bytes(String(repeating: "x", count: 40)).prefix(2) == [0xd9, 40])
        #expect(try bytes(String(repeating: "x", count: 300)).prefix(3) == [0xda, 0x01, 0x2c])
        #expect(try bytes(URL(string: "https://example.com/a")!) == str("https://example.com/a"))
        #expect(try roundTrip(Float.infinity) == .infinity)
        #expect(try roundTrip(URL(string: "https://example.com/a")!) == URL(string: "https://example.com/a")!)
    }

    @Test func datesInSmallestExactForm() throws {
        #expect(try bytes(Date(timeIntervalSince1970: 1)) == [0xd6, 0xff, 0, 0, 0, 1])
        #expect(try bytes(Date(timeIntervalSince1970: 1.5)) == [0xd7, 0xff, 0x77, 0x35, 0x94, 0x00, 0, 0, 0, 1])
        let before1970 = try bytes(Date(timeIntervalSince1970: -1))
        #expect(before1970 == [0xc7, 12, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])
        // 2200-01-01: past 2106 but inside 34 bits, so the 64-bit form.
        #expect(try bytes(Date(timeIntervalSince1970: 7_258_118_400)).prefix(2) == [0xd7, 0xff])
        // 2600-01-01: past 34 bits, so the 96-bit form.
        #expect(try bytes(Date(timeIntervalSince1970: 19_880_899_200)).prefix(3) == [0xc7, 12, 0xff])
        for seconds in [-2_208_988_800.25, -1.5, 0, 1_795_000_000.125, 7_258_118_400.5, 19_880_899_200] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(try roundTrip(date) == date)
        }
    }

    @Test func uuidIsCanonicalTextAndDecodesFromEitherCase() throws {
        let id = UUID(uuidString: "F432BDB8-D84F-4461-8362-AFF89F6C493E")!
        #expect(try bytes(id) == [0xd9, 36] + Array(id.uuidString.utf8))
        let lower = try bytes("f432bdb8-d84f-4461-8362-aff89f6c493e")
        #expect(try MessagePackDecoder().decode(UUID.self, from: lower) == id)
        #expect(throws: DecodingError.self) {
            try MessagePackDecoder().decode(UUID.self, from: bytes("f432bdb8-d84f-4461-8362-aff89f6c493g"))
        }
    }

    @Test func dictionariesAreSorted() throws {
        var dictionary: [String: Int] = [:]
        for i in (0..<40).reversed() {
            dictionary["key\(i)"] = i
        }
        let encoded = try bytes(dictionary)
        let value = try MessagePackDecoder().decode(MessagePackValue.self, from: encoded)
        guard case .map(let pairs) = value else {
            Issue.record("not a map")
            return
        }
        #expect(pairs.map(\.key) == dictionary.keys.sorted().map(MessagePackValue.string))
        #expect(encoded.prefix(3) == [0xde, 0x00, 40])
        #expect(try roundTrip(dictionary) == dictionary)
        // Equal dictionaries built in different orders give equal bytes.
        let other = Dictionary(uniqueKeysWithValues: dictionary.sorted { $0.key < $1.key })
        #expect(try bytes(other) == encoded)
    }

    @Test func intKeyedDictionariesGetIntegerKeys() throws {
        let dictionary = [300: "c", -1: "a", 2: "b"]
        #expect(try bytes(dictionary) == [0x83, 0xff, 0xa1, 0x61, 0x02, 0xa1, 0x62, 0xcd, 0x01, 0x2c, 0xa1, 0x63])
        #expect(try roundTrip(dictionary) == dictionary)
        struct Wrapper: Codable, Equatable {
            var names: [Int: String]
            var nested: [String: [String: Int]]
        }
        let wrapper = Wrapper(names: [3: "x", 1: "y"], nested: ["b": ["z": 1, "a": 2], "a": [:]])
        #expect(try roundTrip(wrapper) == wrapper)
    }

    @Test func largeContainersGrowTheirHeaders() throws {
        for count in [15, 16, 65_535, 65_536, 70_000] {
            let array = (0..<count).map { $0 % 100 }
            let encoded = try bytes(array)
            let header = MessagePackStructure.arrayHeader(count: count)
            #expect(Array(encoded.prefix(header.count)) == header)
            #expect(encoded.count == header.count + count)
            #expect(try MessagePackDecoder().decode([Int].self, from: encoded) == array)
        }
        let pairs = (0..<20).map { Pair(a: $0, b: "\($0)") }
        #expect(try roundTrip(pairs) == pairs)
        #expect(MessagePackStructure.mapHeader(count: 20) == [0xde, 0x00, 20])
    }

    @Test func emptyValues() throws {
        struct Empty: Codable, Equatable {}
        struct Holder: Codable, Equatable {
            var empty = Empty()
            var list: [Int] = []
        }
        #expect(try bytes(Holder()) == [0x82] + str("empty") + [0x80] + str("list") + [0x90])
        #expect(try roundTrip(Holder()) == Holder())
        #expect(try bytes(Empty()) == [0x80])
        struct Nothing: Encodable {
            func encode(to encoder: any Encoder) throws {}
        }
        #expect(throws: EncodingError.self) { try bytes(Nothing()) }
        #expect(try bytes([Nothing()]) == [0x91, 0x80])
    }

    @Test func messagePackValueRoundTripsByteForByte() throws {
        let value = MessagePackValue.map([
            (.uint(1), .array([.nil, .bool(true), .int(-5), .float32(1.5), .float64(-2.25)])),
            (.string("bin"), .binary(Data([0, 1, 2]))),
            (.string("ext"), .extension(type: 7, data: Data([1, 2, 3]))),
            (.string("ts"), .timestamp(MessagePackTimestamp(seconds: -1, nanoseconds: 5))),
            (.string("dup"), .uint(1)), (.string("dup"), .uint(2)),
        ])
        let encoded = try bytes(value)
        let decoded = try MessagePackDecoder().decode(MessagePackValue.self, from: encoded)
        #expect(decoded == value)
        #expect(try bytes(decoded) == encoded)
        #expect(MessagePackValue.int(5) == .uint(5))
        #expect(Set([MessagePackValue.int(5), .uint(5)]).count == 1)
        // Inside other Codable types too.
        struct Envelope: Codable, Equatable {
            var kind: String
            var payload: MessagePackValue
        }
        let envelope = Envelope(kind: "x", payload: value)
        #expect(try roundTrip(envelope) == envelope)
        // Through JSON, as the closest shape JSON has.
        let json = try JSONEncoder().encode(MessagePackValue.map([(.string("a"), .array([.uint(1), .string("b")]))]))
        #expect(String(decoding: json, as: UTF8.self) == #"{"a":[1,"b"]}"#)
    }

    @Test func userInfoReachesEncodeAndDecode() throws {
        struct Probe: Codable {
            init() {}
            init(from decoder: any Decoder) throws {
                #expect(decoder.userInfo[.probe] as? String == "decoding")
                _ = try decoder.singleValueContainer().decodeNil()
            }
            func encode(to encoder: any Encoder) throws {
                #expect(encoder.userInfo[.probe] as? String == "encoding")
                var container = encoder.singleValueContainer()
                try container.encodeNil()
            }
        }
        var encoder = MessagePackEncoder()
        encoder.userInfo[.probe] = "encoding"
        var decoder = MessagePackDecoder()
        decoder.userInfo[.probe] = "decoding"
        _ = try decoder.decode(Probe.self, from: encoder.encode(Probe()))
    }

    @Test func containersFilledOutOfOrderAreRefused() throws {
        struct Interleaved: Encodable {
            enum Keys: String, CodingKey { case a, b }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                var a = container.nestedUnkeyedContainer(forKey: .a)
                var b = container.nestedUnkeyedContainer(forKey: .b)
                try b.encode(1)
                try a.encode(2)
            }
        }
        #expect(throws: EncodingError.self) { try bytes(Interleaved()) }
    }
}

extension CodingUserInfoKey {
    static let probe = CodingUserInfoKey(rawValue: "probe")!
}
