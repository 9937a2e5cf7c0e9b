/// A strict, small JSON reader (RFC 8259) for QR payloads.
///
/// `JSONDecoder` tops out near 60,000 tags/s on this machine, below what a scanner pipe needs (issue 5's 50,000
/// scans/s durable, with encoding and the queue on top), so tags get this reader instead: one pass over at most
/// ``LuggageTag/maxPayloadBytes`` bytes, nesting capped at ``maxDepth``, duplicate keys rejected as ambiguous.
enum TagJSON: Equatable {
    case object([(key: String, value: TagJSON)])
    case array([TagJSON])
    case string(String)
    case number(Double)
    case bool(Bool)
    case null

    static let maxDepth = 16

    static func == (lhs: TagJSON, rhs: TagJSON) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)): a.elementsEqual(b) { $0.key == $1.key && $0.value == $1.value }
        case (.array(let a), .array(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.bool(let a), .bool(let b)): a == b
        case (.null, .null): true
        default: false
        }
    }

    var kind: String {
        switch self {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .bool: "a boolean"
        case .null: "null"
        }
    }

    /// Parses one JSON document.
    /// - Throws: ``ValidationError`` with code `malformedJSON` and the byte offset of the problem.
    static func parse(_ bytes: [UInt8]) throws -> TagJSON {
        var reader = Reader(bytes: bytes)
        reader.skipSpace()
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.index == bytes.count else { throw reader.fail("unexpected text after the JSON value") }
        return value
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        func fail(_ why: String) -> ValidationError {
            ValidationError(.malformedJSON, "tag payload is not valid JSON: \(why) at byte \(index)")
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        mutating func expect(_ byte: UInt8) throws {
            guard index < bytes.count, bytes[index] == byte else {
                throw fail("expected '\(Character(Unicode.Scalar(byte)))'")
            }
            index += 1
        }

        mutating func value(depth: Int) throws -> TagJSON {
            guard depth < TagJSON.maxDepth else { throw fail("nested deeper than \(TagJSON.maxDepth) levels") }
            guard index < bytes.count else { throw fail("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"):
                try literal("true")
                return .bool(true)
            case UInt8(ascii: "f"):
                try literal("false")
                return .bool(false)
            case UInt8(ascii: "n"):
                try literal("null")
                return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count,
                word.withUTF8Buffer({ $0.elementsEqual(bytes[index..<index + count]) })
            else { throw fail("unexpected character") }
            index += count
        }

        /// Reads the comma-separated members of an object or the elements of an array, from the opening bracket
        /// (the current byte) through `closing`, calling `item` for each one.
        mutating func items(closing: UInt8, _ item: (inout Reader) throws -> Void) throws {
            index += 1
            skipSpace()
            if index < bytes.count, bytes[index] == closing {
                index += 1
                return
            }
            while true {
                skipSpace()
                try item(&self)
                skipSpace()
                guard index < bytes.count else { throw fail("unexpected end of input") }
                if bytes[index] == closing {
                    index += 1
                    return
                }
                try expect(UInt8(ascii: ","))
            }
        }

        mutating func object(depth: Int) throws -> TagJSON {
            var members: [(key: String, value: TagJSON)] = []
            try items(closing: UInt8(ascii: "}")) { reader in
                guard reader.index < reader.bytes.count, reader.bytes[reader.index] == UInt8(ascii: "\"") else {
                    throw reader.fail("expected a key")
                }
                let keyStart = reader.index
                let key = try reader.string()
                if members.contains(where: { $0.key == key }) {
                    reader.index = keyStart
                    throw reader.fail("duplicate key '\(key.prefix(40))'")
                }
                reader.skipSpace()
                try reader.expect(UInt8(ascii: ":"))
                reader.skipSpace()
                members.append((key, try reader.value(depth: depth + 1)))
            }
            return .object(members)
        }

        mutating func array(depth: Int) throws -> TagJSON {
            var elements: [TagJSON] = []
            try items(closing: UInt8(ascii: "]")) { reader in elements.append(try reader.value(depth: depth + 1)) }
            return .array(elements)
        }

        mutating func string() throws -> String {
            index += 1
            let start = index
            // Fast path: no escapes.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    defer { index += 1 }
                    return String(decoding: bytes[start..<index], as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { break }
                guard byte >= 0x20 else { throw fail("control character in a string") }
                index += 1
            }
            var scalars = String.UnicodeScalarView()
            scalars.append(contentsOf: String(decoding: bytes[start..<index], as: UTF8.self).unicodeScalars)
            var utf8: [UInt8] = []
            func flush() {
                if !utf8.isEmpty {
                    scalars.append(contentsOf: String(decoding: utf8, as: UTF8.self).unicodeScalars)
                    utf8.removeAll()
                }
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    flush()
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    flush()
                    guard index < bytes.count else { throw fail("unexpected end of input") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{8}")
                    case UInt8(ascii: "f"): scalars.append("\u{C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800..<0xDC00).contains(code) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw fail("unpaired surrogate") }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw fail("unpaired surrogate") }
                        scalars.append(scalar)
                    default: throw fail("invalid escape")
                    }
                default:
                    guard byte >= 0x20 else { throw fail("control character in a string") }
                    utf8.append(byte)
                }
            }
            throw fail("unterminated string")
        }

        mutating func hex4() throws -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("unexpected end of input") }
            var code: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw fail("invalid \\u escape")
                }
                code = code << 4 | UInt32(digit)
                index += 1
            }
            return code
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        mutating func number() throws -> Double {
            let start = index
            func digits() -> Int {
                let from = index
                while index < bytes.count, bytes[index].isASCIIDigit { index += 1 }
                return index - from
            }
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, bytes[index].isASCIIDigit else { throw fail("invalid number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                _ = digits()
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits() > 0 else { throw fail("invalid number") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard digits() > 0 else { throw fail("invalid number") }
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let value = Double(text), value.isFinite else {
                index = start
                throw fail("number \(text.prefix(40)) is out of range")
            }
            return value
        }
    }
}
