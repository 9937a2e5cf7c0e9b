#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Any MessagePack value, for reading and re-encoding records of unknown shape.
///
/// Decoding keeps everything the bytes say: map order, non-string map keys, repeated keys, float32 versus float64,
/// extension types. Integers decode as `.uint` when non-negative and `.int` when negative; `.int(5)` and `.uint(5)`
/// are equal and encode to the same byte. Encoding writes every value in its smallest form, so a value decoded
/// from bytes in smallest form (what `MessagePackEncoder` writes) re-encodes byte for byte.
public enum MessagePackValue: Sendable {
    case `nil`
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case float32(Float)
    case float64(Double)
    case string(String)
    case binary(Data)
    case array([MessagePackValue])
    case map([(key: MessagePackValue, value: MessagePackValue)])
    /// An application extension (type 0...127) or a reserved one other than a valid timestamp.
    case `extension`(type: Int8, data: Data)
    /// The timestamp extension (type −1), in any of its three forms.
    case timestamp(MessagePackTimestamp)
}

extension MessagePackValue: Hashable {
    public static func == (lhs: Self, rhs: Self) -> Bool {
        switch (lhs, rhs) {
        case (.nil, .nil): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.uint(let a), .uint(let b)): return a == b
        case (.int(let a), .uint(let b)), (.uint(let b), .int(let a)): return a >= 0 && UInt64(a) == b
        case (.float32(let a), .float32(let b)): return a == b
        case (.float64(let a), .float64(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.binary(let a), .binary(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case (.extension(let t1, let d1), .extension(let t2, let d2)): return t1 == t2 && d1 == d2
        case (.timestamp(let a), .timestamp(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .nil: hasher.combine(0)
        case .bool(let v):
            hasher.combine(1)
            hasher.combine(v)
        case .int(let v):
            // Non-negative integers hash like `.uint` because they compare equal to it.
            if v >= 0 {
                hasher.combine(2)
                hasher.combine(UInt64(v))
            } else {
                hasher.combine(3)
                hasher.combine(v)
            }
        case .uint(let v):
            hasher.combine(2)
            hasher.combine(v)
        case .float32(let v):
            hasher.combine(4)
            hasher.combine(v)
        case .float64(let v):
            hasher.combine(5)
            hasher.combine(v)
        case .string(let v):
            hasher.combine(6)
            hasher.combine(v)
        case .binary(let v):
            hasher.combine(7)
            hasher.combine(v)
        case .array(let v):
            hasher.combine(8)
            hasher.combine(v)
        case .map(let pairs):
            hasher.combine(9)
            hasher.combine(pairs.count)
            for pair in pairs {
                hasher.combine(pair.key)
                hasher.combine(pair.value)
            }
        case .extension(let type, let data):
            hasher.combine(10)
            hasher.combine(type)
            hasher.combine(data)
        case .timestamp(let v):
            hasher.combine(11)
            hasher.combine(v)
        }
    }
}

extension MessagePackValue: Codable {
    /// Reads any value from `MessagePackDecoder` exactly; from other decoders, the closest value they can describe.
    public init(from decoder: any Decoder) throws {
        if let impl = decoder as? DecoderImpl {
            self = try impl.decodeValueHere()
            return
        }
        if let container = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var pairs: [(key: MessagePackValue, value: MessagePackValue)] = []
            for key in container.allKeys {
                pairs.append((.string(key.stringValue), try container.decode(MessagePackValue.self, forKey: key)))
            }
            self = .map(pairs)
            return
        }
        if var container = try? decoder.unkeyedContainer() {
            var elements: [MessagePackValue] = []
            while !container.isAtEnd {
                elements.append(try container.decode(MessagePackValue.self))
            }
            self = .array(elements)
            return
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .nil
        } else if let v = try? container.decode(Bool.self) {
            self = .bool(v)
        } else if let v = try? container.decode(Int64.self) {
            self = v < 0 ? .int(v) : .uint(UInt64(v))
        } else if let v = try? container.decode(UInt64.self) {
            self = .uint(v)
        } else if let v = try? container.decode(Double.self) {
            self = .float64(v)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    /// Writes the value exactly into `MessagePackEncoder`; into other encoders, the closest shape they support
    /// (maps with string keys as keyed containers, other maps as arrays of `[key, value]` pairs, extensions as
    /// `{type, data}`).
    public func encode(to encoder: any Encoder) throws {
        if let impl = encoder as? EncoderImpl {
            try impl.encodeSingle { try $0.writeValue(self) }
            return
        }
        switch self {
        case .nil:
            var c = encoder.singleValueContainer()
            try c.encodeNil()
        case .bool(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .int(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .uint(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .float32(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .float64(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .string(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .binary(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .timestamp(let v):
            var c = encoder.singleValueContainer()
            try c.encode(v)
        case .array(let elements):
            var c = encoder.unkeyedContainer()
            for element in elements {
                try c.encode(element)
            }
        case .map(let pairs):
            if pairs.allSatisfy({ if case .string = $0.key { true } else { false } }) {
                var c = encoder.container(keyedBy: AnyCodingKey.self)
                for pair in pairs {
                    guard case .string(let key) = pair.key else { continue }
                    try c.encode(pair.value, forKey: AnyCodingKey(stringValue: key))
                }
            } else {
                var c = encoder.unkeyedContainer()
                for pair in pairs {
                    var entry = c.nestedUnkeyedContainer()
                    try entry.encode(pair.key)
                    try entry.encode(pair.value)
                }
            }
        case .extension(let type, let data):
            var c = encoder.container(keyedBy: AnyCodingKey.self)
            try c.encode(type, forKey: AnyCodingKey(stringValue: "type"))
            try c.encode(data, forKey: AnyCodingKey(stringValue: "data"))
        }
    }
}
