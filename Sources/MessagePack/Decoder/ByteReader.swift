#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A valid pointer for empty input, so reads never need an optional base address.
nonisolated(unsafe) let emptyInputBase = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)

/// Reads MessagePack values at byte offsets, checking every length against the bytes left before using it.
struct ByteReader {
    let base: UnsafePointer<UInt8>
    let count: Int

    init(_ buffer: UnsafeRawBufferPointer) {
        if let address = buffer.baseAddress, buffer.count > 0 {
            base = address.assumingMemoryBound(to: UInt8.self)
            count = buffer.count
        } else {
            base = UnsafePointer(emptyInputBase)
            count = 0
        }
    }

    // MARK: Raw access

    @inline(__always)
    func byte(at offset: Int) throws(ReadFailure) -> UInt8 {
        guard offset < count else {
            throw .corrupted("Unexpected end of data at offset \(offset): expected a value (0 bytes left)")
        }
        return base[offset]
    }

    @inline(__always)
    func need(_ offset: Int, _ length: Int, _ what: @autoclosure () -> String) throws(ReadFailure) {
        guard length <= count - offset else {
            throw .corrupted(
                "Unexpected end of data at offset \(offset): \(what()) needs \(length) bytes (\(max(0, count - offset)) left)"
            )
        }
    }

    @inline(__always)
    func u8(_ offset: Int) -> UInt8 { base[offset] }

    @inline(__always)
    func u16(_ offset: Int) -> UInt16 {
        UnsafeRawPointer(base + offset).loadUnaligned(as: UInt16.self).bigEndian
    }

    @inline(__always)
    func u32(_ offset: Int) -> UInt32 {
        UnsafeRawPointer(base + offset).loadUnaligned(as: UInt32.self).bigEndian
    }

    @inline(__always)
    func u64(_ offset: Int) -> UInt64 {
        UnsafeRawPointer(base + offset).loadUnaligned(as: UInt64.self).bigEndian
    }

    func bytes(_ offset: Int, _ length: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: base + offset, count: length)
    }

    static func describe(_ byte: UInt8) -> String {
        switch byte {
        case 0x00...0x7f: return "positive fixint \(byte)"
        case 0x80...0x8f: return "fixmap"
        case 0x90...0x9f: return "fixarray"
        case 0xa0...0xbf: return "fixstr"
        case 0xc0: return "nil"
        case 0xc1: return "the never-used byte 0xc1"
        case 0xc2, 0xc3: return "bool"
        case 0xc4: return "bin8"
        case 0xc5: return "bin16"
        case 0xc6: return "bin32"
        case 0xc7: return "ext8"
        case 0xc8: return "ext16"
        case 0xc9: return "ext32"
        case 0xca: return "float32"
        case 0xcb: return "float64"
        case 0xcc: return "uint8"
        case 0xcd: return "uint16"
        case 0xce: return "uint32"
        case 0xcf: return "uint64"
        case 0xd0: return "int8"
        case 0xd1: return "int16"
        case 0xd2: return "int32"
        case 0xd3: return "int64"
        case 0xd4...0xd8: return "fixext\(1 << (byte - 0xd4))"
        case 0xd9: return "str8"
        case 0xda: return "str16"
        case 0xdb: return "str32"
        case 0xdc: return "array16"
        case 0xdd: return "array32"
        case 0xde: return "map16"
        case 0xdf: return "map32"
        default: return "negative fixint \(Int8(bitPattern: byte))"
        }
    }

    func mismatch(_ type: Any.Type, at offset: Int, _ byte: UInt8) -> ReadFailure {
        if byte == 0xc0 {
            return ReadFailure(
                kind: .valueNotFound(type), message: "Expected \(type) at offset \(offset) but found nil")
        }
        if byte == 0xc1 {
            return .corrupted("Invalid byte 0xc1 at offset \(offset): it is never used in MessagePack")
        }
        return ReadFailure(
            kind: .typeMismatch(type), message: "Expected \(type) at offset \(offset) but found \(Self.describe(byte))")
    }

    // MARK: Scalars

    func integer<T: FixedWidthInteger>(_ type: T.Type, at offset: Int) throws(ReadFailure) -> (T, Int) {
        let byte = try byte(at: offset)
        if byte < 0x80 {
            return (T(truncatingIfNeeded: byte), offset + 1)
        }
        if byte >= 0xe0 {
            guard T.isSigned else { throw outOfRange(Int8(bitPattern: byte), T.self, at: offset) }
            return (T(truncatingIfNeeded: Int8(bitPattern: byte)), offset + 1)
        }
        switch byte {
        case 0xcc:
            try need(offset + 1, 1, "uint8")
            return (try fit(u8(offset + 1), T.self, at: offset), offset + 2)
        case 0xcd:
            try need(offset + 1, 2, "uint16")
            return (try fit(u16(offset + 1), T.self, at: offset), offset + 3)
        case 0xce:
            try need(offset + 1, 4, "uint32")
            return (try fit(u32(offset + 1), T.self, at: offset), offset + 5)
        case 0xcf:
            try need(offset + 1, 8, "uint64")
            return (try fit(u64(offset + 1), T.self, at: offset), offset + 9)
        case 0xd0:
            try need(offset + 1, 1, "int8")
            return (try fit(Int8(bitPattern: u8(offset + 1)), T.self, at: offset), offset + 2)
        case 0xd1:
            try need(offset + 1, 2, "int16")
            return (try fit(Int16(bitPattern: u16(offset + 1)), T.self, at: offset), offset + 3)
        case 0xd2:
            try need(offset + 1, 4, "int32")
            return (try fit(Int32(bitPattern: u32(offset + 1)), T.self, at: offset), offset + 5)
        case 0xd3:
            try need(offset + 1, 8, "int64")
            return (try fit(Int64(bitPattern: u64(offset + 1)), T.self, at: offset), offset + 9)
        case 0xca:
            try need(offset + 1, 4, "float32")
            let value = Float(bitPattern: u32(offset + 1))
            guard let exact = T(exactly: value) else { throw inexact(value, T.self, at: offset) }
            return (exact, offset + 5)
        case 0xcb:
            try need(offset + 1, 8, "float64")
            let value = Double(bitPattern: u64(offset + 1))
            guard let exact = T(exactly: value) else { throw inexact(value, T.self, at: offset) }
            return (exact, offset + 9)
        default:
            throw mismatch(T.self, at: offset, byte)
        }
    }

    @inline(__always)
    func fit<S: BinaryInteger, T: FixedWidthInteger>(_ value: S, _ type: T.Type, at offset: Int) throws(ReadFailure)
        -> T
    {
        guard let result = T(exactly: value) else { throw outOfRange(value, T.self, at: offset) }
        return result
    }

    func outOfRange(_ value: some BinaryInteger, _ type: Any.Type, at offset: Int) -> ReadFailure {
        .corrupted("Number \(value) at offset \(offset) does not fit in \(type)")
    }

    func inexact(_ value: some BinaryFloatingPoint, _ type: Any.Type, at offset: Int) -> ReadFailure {
        .corrupted("Number \(value) at offset \(offset) is not exactly representable as \(type)")
    }

    func double(at offset: Int) throws(ReadFailure) -> (Double, Int) {
        let byte = try byte(at: offset)
        switch byte {
        case 0xcb:
            try need(offset + 1, 8, "float64")
            return (Double(bitPattern: u64(offset + 1)), offset + 9)
        case 0xca:
            try need(offset + 1, 4, "float32")
            return (Double(Float(bitPattern: u32(offset + 1))), offset + 5)
        case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3:
            let (value, end) = try integerValue(at: offset)
            guard let exact = value.double else {
                throw .corrupted("Number \(value) at offset \(offset) is not exactly representable as Double")
            }
            return (exact, end)
        default:
            throw mismatch(Double.self, at: offset, byte)
        }
    }

    func float(at offset: Int) throws(ReadFailure) -> (Float, Int) {
        let byte = try byte(at: offset)
        switch byte {
        case 0xca:
            try need(offset + 1, 4, "float32")
            return (Float(bitPattern: u32(offset + 1)), offset + 5)
        case 0xcb:
            try need(offset + 1, 8, "float64")
            let value = Double(bitPattern: u64(offset + 1))
            if value.isNaN {
                return (.nan, offset + 9)
            }
            guard let exact = Float(exactly: value) else { throw inexact(value, Float.self, at: offset) }
            return (exact, offset + 9)
        case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3:
            let (value, end) = try integerValue(at: offset)
            guard let exact = value.float else {
                throw .corrupted("Number \(value) at offset \(offset) is not exactly representable as Float")
            }
            return (exact, end)
        default:
            throw mismatch(Float.self, at: offset, byte)
        }
    }

    enum IntegerValue: CustomStringConvertible {
        case signed(Int64)
        case unsigned(UInt64)

        var double: Double? {
            switch self {
            case .signed(let v): Double(exactly: v)
            case .unsigned(let v): Double(exactly: v)
            }
        }

        var float: Float? {
            switch self {
            case .signed(let v): Float(exactly: v)
            case .unsigned(let v): Float(exactly: v)
            }
        }

        var description: String {
            switch self {
            case .signed(let v): "\(v)"
            case .unsigned(let v): "\(v)"
            }
        }
    }

    /// Any integer form, as signed when negative and unsigned otherwise.
    func integerValue(at offset: Int) throws(ReadFailure) -> (IntegerValue, Int) {
        let byte = try byte(at: offset)
        switch byte {
        case 0x00...0x7f: return (.unsigned(UInt64(byte)), offset + 1)
        case 0xe0...0xff: return (.signed(Int64(Int8(bitPattern: byte))), offset + 1)
        case 0xcc...0xcf:
            let (value, end) = try integer(UInt64.self, at: offset)
            return (.unsigned(value), end)
        case 0xd0...0xd3:
            let (value, end) = try integer(Int64.self, at: offset)
            return (value < 0 ? .signed(value) : .unsigned(UInt64(value)), end)
        default:
            throw mismatch(Int64.self, at: offset, byte)
        }
    }

    func bool(at offset: Int) throws(ReadFailure) -> (Bool, Int) {
        let byte = try byte(at: offset)
        switch byte {
        case 0xc2: return (false, offset + 1)
        case 0xc3: return (true, offset + 1)
        default: throw mismatch(Bool.self, at: offset, byte)
        }
    }

    /// The bytes of a str: where they start and how many there are.
    @inline(__always)
    func stringRange(at offset: Int, as type: Any.Type = String.self) throws(ReadFailure) -> (start: Int, length: Int) {
        let byte = try byte(at: offset)
        let start: Int
        let length: Int
        switch byte {
        case 0xa0...0xbf:
            start = offset + 1
            length = Int(byte & 0x1f)
        case 0xd9:
            try need(offset + 1, 1, "str8 header")
            start = offset + 2
            length = Int(u8(offset + 1))
        case 0xda:
            try need(offset + 1, 2, "str16 header")
            start = offset + 3
            length = Int(u16(offset + 1))
        case 0xdb:
            try need(offset + 1, 4, "str32 header")
            start = offset + 5
            length = Int(u32(offset + 1))
        default:
            throw mismatch(type, at: offset, byte)
        }
        guard length <= count - start else {
            throw .corrupted(
                "Unexpected end of data at offset \(offset): \(Self.describe(byte)) length \(length) runs past the end "
                    + "(\(count - start) bytes left)")
        }
        return (start, length)
    }

    func string(at offset: Int) throws(ReadFailure) -> (String, Int) {
        let (start, length) = try stringRange(at: offset)
        return (try makeString(start, length, at: offset), start + length)
    }

    /// A `String` from bytes that must be valid UTF-8.
    ///
    /// ASCII, the common case, needs no further check; otherwise the bytes must survive decoding unchanged, since
    /// decoding replaces every invalid sequence. (`String(validating:)` is not specialized and costs far more.)
    @inline(__always)
    func makeString(_ start: Int, _ length: Int, at offset: Int) throws(ReadFailure) -> String {
        let buffer = bytes(start, length)
        if Self.isASCII(buffer) {
            return String(decoding: buffer, as: UTF8.self)
        }
        var string = String(decoding: buffer, as: UTF8.self)
        let unchanged = string.withUTF8 { utf8 in
            utf8.count == length && memcmp(utf8.baseAddress!, buffer.baseAddress!, length) == 0
        }
        guard unchanged else {
            throw .corrupted("Invalid UTF-8 in the string at offset \(offset)")
        }
        return string
    }

    @inline(__always)
    static func isASCII(_ buffer: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = buffer.count
        guard count > 0, let base = buffer.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        var i = 0
        while i + 8 <= count {
            if raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
                return false
            }
            i += 8
        }
        while i < count {
            if base[i] >= 0x80 {
                return false
            }
            i += 1
        }
        return true
    }

    /// Whether `length` bytes at two places are equal; keys are short, so a loop beats calling `memcmp`.
    @inline(__always)
    static func equal(_ a: UnsafePointer<UInt8>, _ b: UnsafePointer<UInt8>, _ length: Int) -> Bool {
        if length > 16 {
            return memcmp(a, b, length) == 0
        }
        var i = 0
        while i < length {
            if a[i] != b[i] {
                return false
            }
            i += 1
        }
        return true
    }

    func binaryRange(at offset: Int) throws(ReadFailure) -> (start: Int, length: Int) {
        let byte = try byte(at: offset)
        let start: Int
        let length: Int
        switch byte {
        case 0xc4:
            try need(offset + 1, 1, "bin8 header")
            start = offset + 2
            length = Int(u8(offset + 1))
        case 0xc5:
            try need(offset + 1, 2, "bin16 header")
            start = offset + 3
            length = Int(u16(offset + 1))
        case 0xc6:
            try need(offset + 1, 4, "bin32 header")
            start = offset + 5
            length = Int(u32(offset + 1))
        default:
            throw mismatch(Data.self, at: offset, byte)
        }
        guard length <= count - start else {
            throw .corrupted(
                "Unexpected end of data at offset \(offset): \(Self.describe(byte)) length \(length) runs past the end "
                    + "(\(count - start) bytes left)")
        }
        return (start, length)
    }

    func binary(at offset: Int) throws(ReadFailure) -> (Data, Int) {
        let (start, length) = try binaryRange(at: offset)
        return (Data(bytes(start, length)), start + length)
    }

    /// An extension's type and data bytes.
    func extensionRange(at offset: Int, as type: Any.Type) throws(ReadFailure) -> (type: Int8, start: Int, length: Int)
    {
        let byte = try byte(at: offset)
        let typeOffset: Int
        let length: Int
        switch byte {
        case 0xd4...0xd8:
            typeOffset = offset + 1
            length = 1 << Int(byte - 0xd4)
        case 0xc7:
            try need(offset + 1, 1, "ext8 header")
            typeOffset = offset + 2
            length = Int(u8(offset + 1))
        case 0xc8:
            try need(offset + 1, 2, "ext16 header")
            typeOffset = offset + 3
            length = Int(u16(offset + 1))
        case 0xc9:
            try need(offset + 1, 4, "ext32 header")
            typeOffset = offset + 5
            length = Int(u32(offset + 1))
        default:
            throw mismatch(type, at: offset, byte)
        }
        guard length < count - typeOffset else {
            throw .corrupted(
                "Unexpected end of data at offset \(offset): \(Self.describe(byte)) of \(length) data bytes runs past "
                    + "the end (\(max(0, count - typeOffset)) bytes left)")
        }
        return (Int8(bitPattern: u8(typeOffset)), typeOffset + 1, length)
    }

    func timestamp(at offset: Int) throws(ReadFailure) -> (MessagePackTimestamp, Int) {
        let (type, start, length) = try extensionRange(at: offset, as: Date.self)
        guard type == -1 else {
            throw ReadFailure(
                kind: .typeMismatch(Date.self),
                message:
                    "Expected the timestamp extension (type -1) at offset \(offset) but found extension type \(type)")
        }
        return (try timestampPayload(start, length, at: offset), start + length)
    }

    func timestampPayload(_ start: Int, _ length: Int, at offset: Int) throws(ReadFailure) -> MessagePackTimestamp {
        let seconds: Int64
        let nanoseconds: UInt32
        switch length {
        case 4:
            seconds = Int64(u32(start))
            nanoseconds = 0
        case 8:
            let value = u64(start)
            nanoseconds = UInt32(truncatingIfNeeded: value >> 34)
            seconds = Int64(value & 0x3_ffff_ffff)
        case 12:
            nanoseconds = u32(start)
            seconds = Int64(bitPattern: u64(start + 4))
        default:
            throw .corrupted("Invalid timestamp at offset \(offset): \(length) data bytes; expected 4, 8 or 12")
        }
        guard nanoseconds < 1_000_000_000 else {
            throw .corrupted("Invalid timestamp at offset \(offset): nanoseconds \(nanoseconds) ≥ 1,000,000,000")
        }
        return MessagePackTimestamp(seconds: seconds, nanoseconds: nanoseconds)
    }

    // MARK: Containers

    func arrayHeader(at offset: Int, as type: Any.Type) throws(ReadFailure) -> (count: Int, first: Int) {
        try containerHeader(at: offset, fixBase: 0x90, wide: 0xdc, "array", as: type)
    }

    func mapHeader(at offset: Int, as type: Any.Type) throws(ReadFailure) -> (count: Int, first: Int) {
        try containerHeader(at: offset, fixBase: 0x80, wide: 0xde, "map", as: type)
    }

    /// An array's or a map's header, which MessagePack lays out alike: a fix form (`fixBase` + a count below 16),
    /// the 16-bit form at `wide`, the 32-bit form at `wide + 1`.
    @inline(__always)
    private func containerHeader(
        at offset: Int, fixBase: UInt8, wide: UInt8, _ kind: StaticString, as type: Any.Type
    ) throws(ReadFailure) -> (count: Int, first: Int) {
        let byte = try byte(at: offset)
        if byte & 0xf0 == fixBase {
            return (Int(byte & 0x0f), offset + 1)
        }
        if byte == wide {
            try need(offset + 1, 2, "\(kind)16 header")
            return (Int(u16(offset + 1)), offset + 3)
        }
        if byte == wide + 1 {
            try need(offset + 1, 4, "\(kind)32 header")
            return (Int(u32(offset + 1)), offset + 5)
        }
        throw mismatch(type, at: offset, byte)
    }

    func tooDeep(at offset: Int) -> ReadFailure {
        .corrupted("Nesting too deep at offset \(offset): the array or map exceeds the decoder's nesting limit")
    }

    // MARK: Skipping and validating

    /// Finds where the value at `offset` ends, allowing `levels` more levels of arrays and maps.
    ///
    /// Runs in time proportional to the bytes it passes, whatever counts the headers claim. With `validate`, strings
    /// must be UTF-8 and timestamps well formed, as decoding them would require.
    func skip(at offset: Int, levels: Int, validate: Bool = false) throws(ReadFailure) -> Int {
        let byte = try byte(at: offset)
        // Scalars of fixed size (most values) need only a bounds check.
        let size = Int(Self.fixedSizes[Int(byte)])
        if size != 0 {
            guard size <= count - offset else { throw truncated(byte, at: offset, size: size) }
            return offset + size
        }
        if byte & 0xe0 == 0xa0 && !validate {
            let end = offset + 1 + Int(byte & 0x1f)
            guard end <= count else { throw truncated(byte, at: offset, size: end - offset) }
            return end
        }
        switch byte {
        case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3:
            return offset + 1
        case 0x80...0x8f, 0xde, 0xdf:
            let (count, first) = try mapHeader(at: offset, as: MessagePackValue.self)
            guard levels > 0 else { throw tooDeep(at: offset) }
            var position = first
            for _ in 0..<count {
                position = try skip(at: position, levels: levels - 1, validate: validate)
                position = try skip(at: position, levels: levels - 1, validate: validate)
            }
            return position
        case 0x90...0x9f, 0xdc, 0xdd:
            let (count, first) = try arrayHeader(at: offset, as: MessagePackValue.self)
            guard levels > 0 else { throw tooDeep(at: offset) }
            var position = first
            for _ in 0..<count {
                position = try skip(at: position, levels: levels - 1, validate: validate)
            }
            return position
        case 0xa0...0xbf, 0xd9, 0xda, 0xdb:
            let (start, length) = try stringRange(at: offset)
            if validate {
                _ = try makeString(start, length, at: offset)
            }
            return start + length
        case 0xc4, 0xc5, 0xc6:
            let (start, length) = try binaryRange(at: offset)
            return start + length
        case 0xc7, 0xc8, 0xc9, 0xd4...0xd8:
            let (type, start, length) = try extensionRange(at: offset, as: MessagePackValue.self)
            if validate && type == -1 {
                _ = try timestampPayload(start, length, at: offset)
            }
            return start + length
        case 0xca:
            try need(offset + 1, 4, "float32")
            return offset + 5
        case 0xcb:
            try need(offset + 1, 8, "float64")
            return offset + 9
        case 0xcc, 0xd0:
            try need(offset + 1, 1, Self.describe(byte))
            return offset + 2
        case 0xcd, 0xd1:
            try need(offset + 1, 2, Self.describe(byte))
            return offset + 3
        case 0xce, 0xd2:
            try need(offset + 1, 4, Self.describe(byte))
            return offset + 5
        case 0xcf, 0xd3:
            try need(offset + 1, 8, Self.describe(byte))
            return offset + 9
        default:
            throw .corrupted("Invalid byte 0xc1 at offset \(offset): it is never used in MessagePack")
        }
    }

    /// The whole size of each header byte's value when it is fixed (ints, floats, nil, bools, fixext), else 0.
    static let fixedSizes: [UInt8] = (0...255).map { (byte: Int) -> UInt8 in
        switch byte {
        case 0x00...0x7f, 0xe0...0xff, 0xc0, 0xc2, 0xc3: return 1
        case 0xcc, 0xd0: return 2
        case 0xcd, 0xd1: return 3
        case 0xce, 0xd2, 0xca: return 5
        case 0xcf, 0xd3, 0xcb: return 9
        default: return 0
        }
    }

    func truncated(_ byte: UInt8, at offset: Int, size: Int) -> ReadFailure {
        .corrupted(
            "Unexpected end of data at offset \(offset): \(Self.describe(byte)) needs \(size) bytes "
                + "(\(Swift.max(0, count - offset)) left)")
    }

    // MARK: Any value

    /// Decodes any value exactly, allowing `levels` more levels of arrays and maps.
    func value(at offset: Int, levels: Int) throws(ReadFailure) -> (MessagePackValue, Int) {
        let byte = try byte(at: offset)
        switch byte {
        case 0x00...0x7f:
            return (.uint(UInt64(byte)), offset + 1)
        case 0xe0...0xff:
            return (.int(Int64(Int8(bitPattern: byte))), offset + 1)
        case 0xc0:
            return (.nil, offset + 1)
        case 0xc2:
            return (.bool(false), offset + 1)
        case 0xc3:
            return (.bool(true), offset + 1)
        case 0xcc...0xd3:
            let (value, end) = try integerValue(at: offset)
            switch value {
            case .signed(let v): return (.int(v), end)
            case .unsigned(let v): return (.uint(v), end)
            }
        case 0xca:
            try need(offset + 1, 4, "float32")
            return (.float32(Float(bitPattern: u32(offset + 1))), offset + 5)
        case 0xcb:
            try need(offset + 1, 8, "float64")
            return (.float64(Double(bitPattern: u64(offset + 1))), offset + 9)
        case 0xa0...0xbf, 0xd9, 0xda, 0xdb:
            let (string, end) = try string(at: offset)
            return (.string(string), end)
        case 0xc4, 0xc5, 0xc6:
            let (data, end) = try binary(at: offset)
            return (.binary(data), end)
        case 0xc7, 0xc8, 0xc9, 0xd4...0xd8:
            let (type, start, length) = try extensionRange(at: offset, as: MessagePackValue.self)
            if type == -1 {
                return (.timestamp(try timestampPayload(start, length, at: offset)), start + length)
            }
            return (.extension(type: type, data: Data(bytes(start, length))), start + length)
        case 0x90...0x9f, 0xdc, 0xdd:
            let (count, first) = try arrayHeader(at: offset, as: MessagePackValue.self)
            guard levels > 0 else { throw tooDeep(at: offset) }
            var elements: [MessagePackValue] = []
            // Every element takes at least one byte, so the bytes left bound what a hostile count can reserve; and
            // at most 4,096 up front (as `DecodableArray`), as every nesting level reserves at once: bounded by the
            // bytes left only, 511 nested claimed arrays over 1 MiB reserved about 16 GiB.
            elements.reserveCapacity(Swift.min(count, self.count - first, 4096))
            var position = first
            for _ in 0..<count {
                let (element, end) = try value(at: position, levels: levels - 1)
                elements.append(element)
                position = end
            }
            return (.array(elements), position)
        case 0x80...0x8f, 0xde, 0xdf:
            let (count, first) = try mapHeader(at: offset, as: MessagePackValue.self)
            guard levels > 0 else { throw tooDeep(at: offset) }
            var pairs: [(key: MessagePackValue, value: MessagePackValue)] = []
            pairs.reserveCapacity(Swift.min(count, (self.count - first) / 2, 4096))
            var position = first
            for _ in 0..<count {
                let (key, keyEnd) = try value(at: position, levels: levels - 1)
                let (element, end) = try value(at: keyEnd, levels: levels - 1)
                pairs.append((key, element))
                position = end
            }
            return (.map(pairs), position)
        default:
            throw .corrupted("Invalid byte 0xc1 at offset \(offset): it is never used in MessagePack")
        }
    }
}

// MARK: UUIDs

extension ByteReader {
    /// A UUID from its 36-character text in either case, without building a `String`.
    func uuid(at offset: Int) throws(ReadFailure) -> UUID {
        try uuidAndEnd(at: offset).0
    }

    /// A UUID as `uuid(at:)` reads it, and where its string ends.
    func uuidAndEnd(at offset: Int) throws(ReadFailure) -> (UUID, Int) {
        let (start, length) = try stringRange(at: offset, as: UUID.self)
        guard let uuid = Self.uuid(bytes(start, length)) else {
            throw .corrupted("Invalid UUID string at offset \(offset)")
        }
        return (uuid, start + length)
    }

    /// The UUID spelt by `text` in canonical form (8-4-4-4-12 hex digits, either case), or nil.
    static func uuid(_ text: UnsafeBufferPointer<UInt8>) -> UUID? {
        guard text.count == 36, let base = text.baseAddress else { return nil }
        guard base[8] == UInt8(ascii: "-"), base[13] == UInt8(ascii: "-"), base[18] == UInt8(ascii: "-"),
            base[23] == UInt8(ascii: "-")
        else { return nil }
        // 32 digits into two words; any invalid digit sets a high bit in `invalid`.
        var high: UInt64 = 0
        var low: UInt64 = 0
        var invalid: UInt8 = 0
        @inline(__always) func digits(_ from: Int, _ to: Int, into word: inout UInt64) {
            for i in from..<to {
                let value = hexValue(base[i])
                invalid |= value
                word = word << 4 | UInt64(value & 0x0f)
            }
        }
        digits(0, 8, into: &high)
        digits(9, 13, into: &high)
        digits(14, 18, into: &high)
        digits(19, 23, into: &low)
        digits(24, 36, into: &low)
        guard invalid & 0xf0 == 0 else { return nil }
        let words = (high.bigEndian, low.bigEndian)
        return withUnsafeBytes(of: words) { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
    }

    /// A hex digit's value, or 0xff; selects rather than branches, since digits and letters come in random order.
    @inline(__always)
    static func hexValue(_ c: UInt8) -> UInt8 {
        let digit = c &- UInt8(ascii: "0")
        let letter = (c | 0x20) &- UInt8(ascii: "a")
        let letterValue = letter < 6 ? letter &+ 10 : 0xff
        return digit < 10 ? digit : letterValue
    }
}
