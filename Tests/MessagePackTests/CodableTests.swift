import Foundation
import MessagePack
import Testing

class Animal: Codable {
    var name: String
    init(name: String) { self.name = name }
}

final class Dog: Animal {
    var good: Bool

    init(name: String, good: Bool) {
        self.good = good
        super.init(name: name)
    }

    private enum CodingKeys: String, CodingKey { case good }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        good = try container.decode(Bool.self, forKey: .good)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(good, forKey: .good)
        try super.encode(to: container.superEncoder())
    }
}

/// A subclass that shares its superclass's container instead of nesting it.
final class Cat: Animal {
    var lives: Int

    init(name: String, lives: Int) {
        self.lives = lives
        super.init(name: name)
    }

    private enum CodingKeys: String, CodingKey { case lives }

    required init(from decoder: any Decoder) throws {
        lives = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .lives)
        try super.init(from: decoder)
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(lives, forKey: .lives)
        try super.encode(to: encoder)
    }
}

/// Stored as a map, an array or a bare number; decoding tries each in turn.
enum Flexible: Codable, Equatable {
    case keyed(Int)
    case list([Int])
    case single(Int)

    private enum Keys: String, CodingKey { case value }

    init(from decoder: any Decoder) throws {
        if let container = try? decoder.container(keyedBy: Keys.self) {
            self = .keyed(try container.decode(Int.self, forKey: .value))
        } else if var container = try? decoder.unkeyedContainer() {
            var values: [Int] = []
            while !container.isAtEnd { values.append(try container.decode(Int.self)) }
            self = .list(values)
        } else {
            self = .single(try decoder.singleValueContainer().decode(Int.self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .keyed(let v):
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode(v, forKey: .value)
        case .list(let values):
            var container = encoder.unkeyedContainer()
            for v in values { try container.encode(v) }
        case .single(let v):
            var container = encoder.singleValueContainer()
            try container.encode(v)
        }
    }
}

/// Nested containers written and read by hand, with dynamic keys.
struct Nested: Codable, Equatable {
    var point: (x: Int, y: Int)
    var tags: [String]
    var extra: [String: Int]

    static func == (a: Nested, b: Nested) -> Bool {
        a.point == b.point && a.tags == b.tags && a.extra == b.extra
    }

    private enum Keys: String, CodingKey { case point, tags, extra }
    private enum PointKeys: String, CodingKey { case x, y }

    struct DynamicKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(point: (x: Int, y: Int), tags: [String], extra: [String: Int]) {
        self.point = point
        self.tags = tags
        self.extra = extra
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        let point = try container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
        self.point = (try point.decode(Int.self, forKey: .x), try point.decode(Int.self, forKey: .y))
        var tags = try container.nestedUnkeyedContainer(forKey: .tags)
        var list: [String] = []
        while !tags.isAtEnd {
            if try tags.decodeNil() { continue }
            var inner = try tags.nestedUnkeyedContainer()
            list.append(try inner.decode(String.self))
        }
        self.tags = list
        let extra = try container.nestedContainer(keyedBy: DynamicKey.self, forKey: .extra)
        var values: [String: Int] = [:]
        for key in extra.allKeys {
            values[key.stringValue] = try extra.decode(Int.self, forKey: key)
        }
        #expect(extra.contains(DynamicKey(stringValue: "missing")) == false)
        self.extra = values
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Keys.self)
        var point = container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
        try point.encode(self.point.x, forKey: .x)
        try point.encode(self.point.y, forKey: .y)
        var tags = container.nestedUnkeyedContainer(forKey: .tags)
        for tag in self.tags {
            try tags.encodeNil()
            var inner = tags.nestedUnkeyedContainer()
            try inner.encode(tag)
        }
        var extra = container.nestedContainer(keyedBy: DynamicKey.self, forKey: .extra)
        for (key, value) in self.extra.sorted(by: { $0.key < $1.key }) {
            try extra.encode(value, forKey: DynamicKey(stringValue: key))
        }
    }
}

struct Optionals: Codable, Equatable {
    var a: Int?
    var b: String?
    var c: [Int?]
}

@Suite("Codable features")
struct CodableTests {
    @Test func superEncoderAndDecoder() throws {
        let dog = Dog(name: "Rex", good: true)
        let encoded = try MessagePackEncoder().encodeToBytes(dog)
        #expect(encoded == [0x82] + str("good") + [0xc3] + str("super") + [0x81] + str("name") + str("Rex"))
        let decoded = try MessagePackDecoder().decode(Dog.self, from: encoded)
        #expect(decoded.name == "Rex" && decoded.good)
    }

    @Test func sharedContainerForSubclass() throws {
        let encoded = try MessagePackEncoder().encodeToBytes(Cat(name: "Tom", lives: 9))
        #expect(encoded == [0x82] + str("lives") + [0x09] + str("name") + str("Tom"))
        let decoded = try MessagePackDecoder().decode(Cat.self, from: encoded)
        #expect(decoded.name == "Tom" && decoded.lives == 9)
    }

    @Test func unusedSuperEncoderWritesEmptyMap() throws {
        struct Lazy: Encodable {
            enum Keys: String, CodingKey { case a }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: Keys.self)
                _ = container.superEncoder(forKey: .a)
            }
        }
        #expect(try MessagePackEncoder().encodeToBytes(Lazy()) == [0x81] + str("a") + [0x80])
    }

    @Test func tryingOneContainerThenAnother() throws {
        for value in [Flexible.keyed(3), .list([1, 2]), .single(7)] {
            #expect(try roundTrip(value) == value)
        }
        #expect(try roundTrip([Flexible.keyed(1), .single(2), .list([])]) == [.keyed(1), .single(2), .list([])])
    }

    @Test func nestedContainersAndDynamicKeys() throws {
        let value = Nested(point: (3, -4), tags: ["a", "b"], extra: ["z": 1, "y": 2])
        #expect(try roundTrip(value) == value)
    }

    @Test func optionalsAndNil() throws {
        let value = Optionals(a: nil, b: "x", c: [1, nil, 3])
        let encoded = try MessagePackEncoder().encodeToBytes(value)
        // encodeIfPresent leaves nil properties out, as JSONEncoder does.
        #expect(encoded == [0x82] + str("b") + str("x") + str("c") + [0x93, 0x01, 0xc0, 0x03])
        #expect(try roundTrip(value) == value)
        // An explicit nil decodes as nil too.
        let explicit: [UInt8] = [0x83] + str("a") + [0xc0] + str("b") + [0xc0] + str("c") + [0x90]
        #expect(try MessagePackDecoder().decode(Optionals.self, from: explicit) == Optionals(a: nil, b: nil, c: []))
    }

    @Test func integerKeysMatchIntCodingKeys() throws {
        struct Compact: Decodable, Equatable {
            var name: String
            var age: Int
            enum CodingKeys: Int, CodingKey {
                case name = 0
                case age = 1
            }
        }
        let encoded: [UInt8] = [0x82, 0x00] + str("Ann") + [0x01, 0x20]
        #expect(try MessagePackDecoder().decode(Compact.self, from: encoded) == Compact(name: "Ann", age: 32))
    }

    @Test func keyStrategies() throws {
        struct Snake: Codable, Equatable {
            var unitPrice: Int
            var seatNumber: String
        }
        struct Acronym: Encodable {
            var myURLValue = 1
        }
        var encoder = MessagePackEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let encoded = try encoder.encodeToBytes(Snake(unitPrice: 1, seatNumber: "u"))
        #expect(encoded == [0x82] + str("unit_price") + [0x01] + str("seat_number") + str("u"))
        #expect(try encoder.encodeToBytes(Acronym()) == [0x81] + str("my_url_value") + [0x01])
        var decoder = MessagePackDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        #expect(try decoder.decode(Snake.self, from: encoded) == Snake(unitPrice: 1, seatNumber: "u"))

        encoder.keyEncodingStrategy = .custom { path in
            AnyKey(stringValue: path.last!.stringValue.uppercased())
        }
        #expect(try encoder.encodeToBytes(Pair(a: 1, b: "x")) == [0x82] + str("A") + [0x01] + str("B") + str("x"))
        decoder.keyDecodingStrategy = .custom { path in AnyKey(stringValue: path.last!.stringValue.lowercased()) }
        #expect(try decoder.decode(Pair.self, from: encoder.encode(Pair(a: 1, b: "x"))) == Pair(a: 1, b: "x"))
    }

    @Test func dateStrategies() throws {
        let date = Date(timeIntervalSince1970: 1_795_000_000.5)
        let strategies: [(MessagePackEncoder.DateEncodingStrategy, MessagePackDecoder.DateDecodingStrategy, [UInt8]?)] =
            [
                (.secondsSince1970, .secondsSince1970, try MessagePackEncoder().encodeToBytes(1_795_000_000.5)),
                (
                    .millisecondsSince1970, .millisecondsSince1970,
                    try MessagePackEncoder().encodeToBytes(1_795_000_000_500.0)
                ),
                (
                    .deferredToDate, .deferredToDate,
                    try MessagePackEncoder().encodeToBytes(date.timeIntervalSinceReferenceDate)
                ),
                (
                    .custom({ date, encoder in
                        var container = encoder.singleValueContainer()
                        try container.encode(Int(date.timeIntervalSince1970 * 2))
                    }),
                    .custom({ decoder in
                        Date(timeIntervalSince1970: Double(try decoder.singleValueContainer().decode(Int.self)) / 2)
                    }), try MessagePackEncoder().encodeToBytes(3_590_000_001)
                ),
            ]
        for (encoding, decoding, expected) in strategies {
            var encoder = MessagePackEncoder()
            encoder.dateEncodingStrategy = encoding
            var decoder = MessagePackDecoder()
            decoder.dateDecodingStrategy = decoding
            let encoded = try encoder.encodeToBytes([date])
            #expect(Array(encoded.dropFirst()) == expected)
            #expect(try decoder.decode([Date].self, from: encoded) == [date])
        }
        var encoder = MessagePackEncoder()
        encoder.dateEncodingStrategy = .iso8601
        var decoder = MessagePackDecoder()
        decoder.dateDecodingStrategy = .iso8601
        let whole = Date(timeIntervalSince1970: 1_795_000_000)
        let text = try encoder.encodeToBytes(whole)
        #expect(try MessagePackDecoder().decode(String.self, from: text) == "2026-11-18T11:06:40Z")
        #expect(try decoder.decode(Date.self, from: text) == whole)
    }

    @Test func decodesFromSlicesAndBuffers() throws {
        let encoded = try MessagePackEncoder().encodeToBytes(Pair(a: 5, b: "y"))
        let padded = [0xff, 0xff] + encoded + [0xff]
        let slice = padded[2..<(2 + encoded.count)]
        #expect(try MessagePackDecoder().decode(Pair.self, from: slice) == Pair(a: 5, b: "y"))
        let data = Data(padded)[2..<(2 + encoded.count)]
        #expect(try MessagePackDecoder().decode(Pair.self, from: data) == Pair(a: 5, b: "y"))
        let fromBuffer = try padded.withUnsafeBytes { raw throws -> Pair in
            let buffer = UnsafeRawBufferPointer(rebasing: raw[2..<(2 + encoded.count)])
            return try MessagePackDecoder().decode(Pair.self, from: buffer)
        }
        #expect(fromBuffer == Pair(a: 5, b: "y"))
    }
}

struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
