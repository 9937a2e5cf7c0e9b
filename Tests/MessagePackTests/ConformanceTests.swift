import Foundation
import MessagePack
import Testing

/// The public MessagePack test suite (github:kawanet/msgpack-test-suite 1.0.0, MIT), copied into Fixtures/.
struct ConformanceCase: CustomTestStringConvertible, Sendable {
    var file: String
    var index: Int
    var kind: String
    /// The expected value in the suite's JSON form, re-serialized so the case is Sendable.
    var json: String
    var encodings: [[UInt8]]

    var testDescription: String { "\(file)#\(index) \(kind) \(json)" }

    var value: Any {
        (try! JSONSerialization.jsonObject(with: Data(json.utf8), options: [.fragmentsAllowed]) as! [Any])[0]
    }

    static let all: [ConformanceCase] = {
        let url = Bundle.module.resourceURL!
            .appendingPathComponent("Fixtures/msgpack-test-suite/msgpack-test-suite.json")
        let suite = try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: [[String: Any]]]
        var cases: [ConformanceCase] = []
        for file in suite.keys.sorted() {
            for (index, entry) in suite[file]!.enumerated() {
                let kind = entry.keys.first { $0 != "msgpack" && $0 != "bignum" } ?? "bignum"
                let raw = entry["bignum"] != nil && kind == "bignum" ? entry["bignum"]! : entry[kind]!
                let key = entry["bignum"] != nil ? "bignum" : kind
                let json = String(
                    decoding: try! JSONSerialization.data(withJSONObject: [entry[key] ?? raw], options: [.sortedKeys]),
                    as: UTF8.self)
                let encodings = (entry["msgpack"] as! [String]).map(hexBytes)
                cases.append(ConformanceCase(file: file, index: index, kind: key, json: json, encodings: encodings))
            }
        }
        return cases
    }()
}

func hexBytes(_ hex: String) -> [UInt8] {
    hex.split(separator: "-").map { UInt8($0, radix: 16)! }
}

/// Whether a decoded value is the suite's expected value.
func matches(_ decoded: MessagePackValue, _ kind: String, _ expected: Any) -> Bool {
    switch (kind, decoded) {
    case ("nil", .nil): return true
    case ("bool", .bool(let b)): return b == (expected as! Bool)
    case ("binary", .binary(let data)): return Array(data) == hexBytes(expected as! String)
    case ("string", .string(let s)): return s == (expected as! String)
    case ("bignum", _):
        let text = expected as! String
        switch decoded {
        case .int(let v): return String(v) == text
        case .uint(let v): return String(v) == text
        case .float32(let v): return Double(v) == Double(text)!
        case .float64(let v): return v == Double(text)!
        default: return false
        }
    case ("number", _):
        let number = (expected as! NSNumber).doubleValue
        switch decoded {
        case .int(let v): return Double(v) == number
        case .uint(let v): return Double(v) == number
        case .float32(let v): return Double(v) == number
        case .float64(let v): return v == number
        default: return false
        }
    case ("array", .array(let elements)):
        let list = expected as! [Any]
        return list.count == elements.count
            && zip(elements, list).allSatisfy { element, item in
                matches(element, kindOf(item), item)
            }
    case ("map", .map(let pairs)):
        let dictionary = expected as! [String: Any]
        return dictionary.count == pairs.count
            && pairs.allSatisfy { pair in
                guard case .string(let key) = pair.key, let item = dictionary[key] else { return false }
                return matches(pair.value, kindOf(item), item)
            }
    case ("timestamp", .timestamp(let t)):
        let parts = expected as! [NSNumber]
        return t.seconds == parts[0].int64Value && t.nanoseconds == parts[1].uint32Value
    case ("ext", .extension(let type, let data)):
        let parts = expected as! [Any]
        return Int(type) == (parts[0] as! NSNumber).intValue && Array(data) == hexBytes(parts[1] as! String)
    default:
        return false
    }
}

func kindOf(_ item: Any) -> String {
    switch item {
    case is String: return "string"
    case is [Any]: return "array"
    case is [String: Any]: return "map"
    default: return "number"
    }
}

/// The value the suite expects, built from its JSON form, as the encoder should see it.
func expectedValue(_ kind: String, _ expected: Any) -> MessagePackValue? {
    switch kind {
    case "nil": return .nil
    case "bool": return .bool(expected as! Bool)
    case "binary": return .binary(Data(hexBytes(expected as! String)))
    case "string": return .string(expected as! String)
    case "bignum":
        let text = expected as! String
        if let v = Int64(text) { return v < 0 ? .int(v) : .uint(UInt64(v)) }
        return .uint(UInt64(text)!)
    case "number":
        let number = (expected as! NSNumber).doubleValue
        if number == number.rounded(), let v = Int64(exactly: number) { return v < 0 ? .int(v) : .uint(UInt64(v)) }
        if let f = Float(exactly: number) { return .float32(f) }
        return .float64(number)
    case "array": return .array((expected as! [Any]).map { expectedValue(kindOf($0), $0)! })
    case "map":
        return .map(
            (expected as! [String: Any]).sorted { $0.key < $1.key }.map {
                (.string($0.key), expectedValue(kindOf($0.value), $0.value)!)
            })
    case "timestamp":
        let parts = expected as! [NSNumber]
        return .timestamp(MessagePackTimestamp(seconds: parts[0].int64Value, nanoseconds: parts[1].uint32Value))
    case "ext":
        let parts = expected as! [Any]
        return .extension(type: Int8((parts[0] as! NSNumber).intValue), data: Data(hexBytes(parts[1] as! String)))
    default: return nil
    }
}

@Suite("MessagePack test suite")
struct ConformanceTests {
    @Test func suiteIsComplete() {
        #expect(ConformanceCase.all.count == 85)
        #expect(ConformanceCase.all.reduce(0) { $0 + $1.encodings.count } == 233)
    }

    @Test("every accepted encoding decodes to the expected value", arguments: ConformanceCase.all)
    func decodesEveryEncoding(_ testCase: ConformanceCase) throws {
        for bytes in testCase.encodings {
            let decoded = try MessagePackDecoder().decode(MessagePackValue.self, from: bytes)
            #expect(matches(decoded, testCase.kind, testCase.value), "\(bytes) decoded as \(decoded)")
        }
    }

    @Test("encoding the expected value gives the shortest form", arguments: ConformanceCase.all)
    func encodesShortestForm(_ testCase: ConformanceCase) throws {
        let value = try #require(expectedValue(testCase.kind, testCase.value))
        let encoded = try MessagePackEncoder().encodeToBytes(value)
        let first = testCase.encodings[0]
        if encoded != first {
            // 2⁶³−1 is listed as int64 first; uint64 is as short and is what non-negative integers use here.
            #expect(encoded.count == first.count && testCase.encodings.contains(encoded), "\(encoded) vs \(first)")
        }
    }

    @Test("typed values encode to the shortest form", arguments: ConformanceCase.all)
    func typedValuesEncodeToShortestForm(_ testCase: ConformanceCase) throws {
        let encoder = MessagePackEncoder()
        let first = testCase.encodings[0]
        let value = testCase.value
        switch testCase.kind {
        case "string":
            #expect(try encoder.encodeToBytes(value as! String) == first)
        case "binary":
            #expect(try encoder.encodeToBytes(Data(hexBytes(value as! String))) == first)
        case "bool":
            #expect(try encoder.encodeToBytes(value as! Bool) == first)
        case "number":
            let number = (value as! NSNumber).doubleValue
            if let v = Int64(exactly: number) {
                #expect(try encoder.encodeToBytes(v) == first)
                #expect(try MessagePackDecoder().decode(Int64.self, from: first) == v)
            } else if let f = Float(exactly: number) {
                #expect(try encoder.encodeToBytes(f) == first)
            }
        case "timestamp":
            let parts = value as! [NSNumber]
            let timestamp = MessagePackTimestamp(seconds: parts[0].int64Value, nanoseconds: parts[1].uint32Value)
            #expect(try encoder.encodeToBytes(timestamp) == first)
            #expect(try MessagePackDecoder().decode(MessagePackTimestamp.self, from: first) == timestamp)
            if timestamp.nanoseconds == 0 {
                #expect(try encoder.encodeToBytes(timestamp.date) == first)
                #expect(try MessagePackDecoder().decode(Date.self, from: first) == timestamp.date)
            }
        default:
            break
        }
    }

    @Test("extensions round-trip through MessagePackValue", arguments: ConformanceCase.all.filter { $0.kind == "ext" })
    func extensionsRoundTrip(_ testCase: ConformanceCase) throws {
        for bytes in testCase.encodings {
            let value = try MessagePackDecoder().decode(MessagePackValue.self, from: bytes)
            #expect(try MessagePackEncoder().encodeToBytes(value) == testCase.encodings[0])
        }
    }
}
