#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Reads MessagePack values one at a time, in place, for hand-written decoders of hot record types.
///
/// Every read checks what `MessagePackDecoder` checks for the same Swift type, with the same code: lengths against
/// the bytes left, the never-used byte 0xc1, UTF-8 of strings and string keys, integer ranges (floats only when
/// exactly integral), well-formed timestamps. A failure is a `DecodingError` with the coding path the caller passes
/// and a description naming the byte offset, as the Codable decoder's. The reader does not track nesting: a caller
/// that opens containers checks its depth, and skips unknown values with ``skipValue(levels:validate:codingPath:)``.
///
/// A reader points into the bytes it was made for and is valid only inside the closure given to
/// ``withReader(_:_:)``; it is deliberately not `Sendable`. What it returns (`String`, numbers, `Date`, `UUID`,
/// ``StringBytes`` offsets) is plain data and outlives it.
///
/// ```swift
/// let point = try MessagePackReader.withReader(bytes) { reader in
///     var x = 0, y = 0
///     for _ in 0..<(try reader.readMapHeader()) {
///         switch try reader.readKey() {
///         case .string(let key) where reader.bytes(of: key, equal: "x"): x = try reader.read(Int.self)
///         case .string(let key) where reader.bytes(of: key, equal: "y"): y = try reader.read(Int.self)
///         default: try reader.skipValue(levels: 31)
///         }
///     }
///     try reader.expectEnd()
///     return (x, y)
/// }
/// ```
public struct MessagePackReader {
    let reader: ByteReader
    /// Where the next value starts, from the start of the bytes.
    public private(set) var offset: Int

    init(_ reader: ByteReader, offset: Int = 0) {
        self.reader = reader
        self.offset = offset
    }

    /// Runs `body` with a reader at the start of `bytes`, without copying them.
    /// - Parameters:
    ///   - bytes: MessagePack bytes in contiguous storage (`Data`, `[UInt8]`, a slice, a buffer pointer).
    ///   - body: Reads values; the reader must not escape it.
    /// - Returns: What `body` returns.
    public static func withReader<Result>(
        _ bytes: some ContiguousBytes, _ body: (inout MessagePackReader) throws -> Result
    ) rethrows -> Result {
        try bytes.withUnsafeBytes { buffer in
            var reader = MessagePackReader(ByteReader(buffer))
            return try body(&reader)
        }
    }

    /// The number of bytes this reader reads.
    public var count: Int { reader.count }

    /// Whether every byte has been read.
    public var isAtEnd: Bool { offset >= reader.count }

    /// A reader over `range` of this reader's bytes, with offsets counted from the start of `range`; valid as long
    /// as this one.
    public func reader(for range: Range<Int>) -> MessagePackReader {
        precondition(range.lowerBound >= 0 && range.upperBound <= reader.count, "range \(range) is outside the bytes")
        let slice = UnsafeRawBufferPointer(start: reader.base + range.lowerBound, count: range.count)
        return MessagePackReader(ByteReader(slice))
    }

    /// Fails unless every byte has been read, as `MessagePackDecoder` fails on bytes after the top-level value.
    public func expectEnd(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError) {
        guard offset == reader.count else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: codingPath(),
                    debugDescription:
                        "Unexpected data at offset \(offset): \(reader.count - offset) bytes left over after the top-level value"
                ))
        }
    }

    @inline(__always)
    private mutating func run<Value>(
        _ codingPath: () -> [any CodingKey], _ body: (ByteReader, Int) throws(ReadFailure) -> (Value, Int)
    ) throws(DecodingError) -> Value {
        do {
            let (value, end) = try body(reader, offset)
            offset = end
            return value
        } catch {
            throw error.decodingError(codingPath())
        }
    }

    // MARK: Containers

    /// Reads a map header.
    /// - Returns: The number of key-value pairs that follow; a hostile count is not checked against the bytes left,
    ///   so reserve no more than ``count`` allows.
    /// - Throws: `DecodingError.typeMismatch` (or `valueNotFound` for nil) when the value is not a map.
    public mutating func readMapHeader(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError) -> Int
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in
            try reader.mapHeader(at: offset, as: [String: Any].self)
        }
    }

    /// Reads an array header.
    /// - Returns: The number of elements that follow (unchecked, as for ``readMapHeader(codingPath:)``).
    public mutating func readArrayHeader(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError)
        -> Int
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in
            try reader.arrayHeader(at: offset, as: [Any].self)
        }
    }

    /// A map key as `MessagePackDecoder`'s keyed containers accept it.
    public enum Key: Sendable {
        /// A string key (UTF-8 checked).
        case string(StringBytes)
        /// An integer key that fits `Int`.
        case integer(Int)
    }

    /// Reads a map key: a string (checked as UTF-8) or an integer that fits `Int`, the keys a keyed container
    /// accepts.
    public mutating func readKey(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError) -> Key {
        let byte: UInt8
        do {
            byte = try reader.byte(at: offset)
        } catch {
            throw error.decodingError(codingPath())
        }
        switch byte {
        case 0xa0...0xbf, 0xd9, 0xda, 0xdb:
            return .string(try readStringBytes(codingPath: codingPath()))
        case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3:
            return .integer(try read(Int.self, codingPath: codingPath()))
        default:
            let failure = ReadFailure(
                kind: .typeMismatch(String.self),
                message: "Expected a string or integer map key at offset \(offset) but found "
                    + ByteReader.describe(byte))
            throw failure.decodingError(codingPath())
        }
    }

    /// Steps over one value of any type, allowing `levels` more levels of arrays and maps below it.
    ///
    /// Runs in time proportional to the bytes it passes, whatever counts the headers claim.
    /// - Parameters:
    ///   - levels: How deep the value may nest: 0 allows only scalars, 1 an array of scalars, and so on.
    ///   - validate: Also check strings as UTF-8 and timestamps as well formed, as decoding them would; without it
    ///     only the structure is checked, as `MessagePackDecoder` checks values under keys a type does not read.
    public mutating func skipValue(
        levels: Int, validate: Bool = true, codingPath: @autoclosure () -> [any CodingKey] = []
    ) throws(DecodingError) {
        do {
            offset = try reader.skip(at: offset, levels: levels, validate: validate)
        } catch {
            throw error.decodingError(codingPath())
        }
    }

    /// Fails if the map at `mapOffset` (already read whole, its values well formed) has a key twice, as
    /// `MessagePackDecoder`'s keyed containers fail.
    public func checkUniqueKeys(inMapAt mapOffset: Int, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError)
    {
        do {
            try reader.checkUniqueKeys(inMapAt: mapOffset)
        } catch {
            throw error.decodingError(codingPath())
        }
    }

    /// The error `MessagePackDecoder`'s keyed containers throw for a key present twice, for a decoder in this package
    /// that tracks the keys it reads itself (`RecordDecoder` in JetbridgeProtocol), so both word it alike.
    package static func duplicateKeyError(_ key: String, inMapAt mapOffset: Int, codingPath: [any CodingKey])
        -> DecodingError
    {
        ReadFailure.duplicateKey("\"\(key)\"", mapOffset: mapOffset).decodingError(codingPath)
    }

    /// The error `MessagePackDecoder` throws for a map at `offset` of `count` entries, over its `maxMapEntries`
    /// (`limit`), for a decoder in this package that reads maps itself.
    package static func tooManyEntriesError(_ count: Int, at offset: Int, limit: Int, codingPath: [any CodingKey])
        -> DecodingError
    {
        ReadFailure.tooManyEntries(count, at: offset, limit: limit).decodingError(codingPath)
    }

    /// The error `MessagePackDecoder` throws for an array or map at `offset` nested deeper than `limit` levels, for
    /// a decoder in this package that counts its depth itself.
    package static func nestingError(at offset: Int, limit: Int, codingPath: [any CodingKey]) -> DecodingError {
        ReadFailure.tooDeep(at: offset, limit: limit).decodingError(codingPath)
    }

    // MARK: Strings

    /// Where a string's bytes lie, from the start of the reader's bytes.
    public struct StringBytes: Hashable, Sendable {
        /// The offset of the first byte of the string's contents.
        public var start: Int
        /// The number of bytes.
        public var count: Int
    }

    /// Reads a string's header and checks its bytes as UTF-8, without making a `String`.
    public mutating func readStringBytes(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError)
        -> StringBytes
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in
            let (start, length) = try reader.stringRange(at: offset)
            if !ByteReader.isASCII(reader.bytes(start, length)) {
                _ = try reader.makeString(start, length, at: offset)
            }
            return (StringBytes(start: start, count: length), start + length)
        }
    }

    /// Reads a string's header and bounds only; the bytes are not checked as UTF-8 (compare them, or make a
    /// `String` with ``read(_:codingPath:)-(String.Type,_)``).
    public mutating func readUncheckedStringBytes(codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> StringBytes
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in
            let (start, length) = try reader.stringRange(at: offset)
            return (StringBytes(start: start, count: length), start + length)
        }
    }

    /// The bytes of a string this reader returned; valid as long as the reader.
    public func bytes(of string: StringBytes) -> UnsafeBufferPointer<UInt8> {
        reader.bytes(string.start, string.count)
    }

    /// Whether a string's bytes are exactly `literal`'s UTF-8.
    public func bytes(of string: StringBytes, equal literal: StaticString) -> Bool {
        guard literal.hasPointerRepresentation else {
            return String(decoding: bytes(of: string), as: UTF8.self) == literal.description
        }
        return string.count == literal.utf8CodeUnitCount
            && ByteReader.equal(reader.base + string.start, literal.utf8Start, string.count)
    }

    /// Whether a string's bytes are exactly `text`'s UTF-8.
    public func bytes(of string: StringBytes, equal text: String) -> Bool {
        let equal = text.utf8.withContiguousStorageIfAvailable { utf8 in
            utf8.count == string.count
                && (utf8.count == 0 || ByteReader.equal(reader.base + string.start, utf8.baseAddress!, string.count))
        }
        return equal ?? text.utf8.elementsEqual(bytes(of: string))
    }

    /// A `String` of bytes that ``readStringBytes(codingPath:)`` checked.
    public func string(_ string: StringBytes) -> String {
        String(decoding: bytes(of: string), as: UTF8.self)
    }

    /// Reads a string, checking it as UTF-8.
    public mutating func read(_ type: String.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> String
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.string(at: offset) }
    }

    /// Reads a UUID from its canonical 36-character text (hex digits in either case), as `UUID(uuidString:)`
    /// accepts it, without making a `String`.
    public mutating func read(_ type: UUID.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UUID
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.uuidAndEnd(at: offset) }
    }

    /// The UUID spelt by `text` in canonical form (8-4-4-4-12 hex digits, either case), or nil.
    public static func uuid(_ text: UnsafeBufferPointer<UInt8>) -> UUID? {
        ByteReader.uuid(text)
    }

    // MARK: Scalars

    /// Whether the next value is nil; reads it if so.
    public mutating func readNil(codingPath: @autoclosure () -> [any CodingKey] = []) throws(DecodingError) -> Bool {
        let byte: UInt8
        do {
            byte = try reader.byte(at: offset)
        } catch {
            throw error.decodingError(codingPath())
        }
        guard byte == 0xc0 else { return false }
        offset += 1
        return true
    }

    public mutating func read(_ type: Bool.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Bool
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.bool(at: offset) }
    }

    /// Reads a float 64, a float 32 (widened) or an integer that a `Double` holds exactly.
    public mutating func read(_ type: Double.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Double
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.double(at: offset) }
    }

    /// Reads a float 32, a float 64 that a `Float` holds exactly (or NaN), or an integer that a `Float` holds exactly.
    public mutating func read(_ type: Float.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Float
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.float(at: offset) }
    }

    // Integers: any width that holds the value, and floats that are exactly integral, as the Codable decoder reads
    // them. One non-generic method per type, so callers in other modules get specialized code.

    public mutating func read(_ type: Int.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Int
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(Int.self, at: offset) }
    }

    public mutating func read(_ type: Int8.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Int8
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(Int8.self, at: offset) }
    }

    public mutating func read(_ type: Int16.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Int16
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(Int16.self, at: offset) }
    }

    public mutating func read(_ type: Int32.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Int32
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(Int32.self, at: offset) }
    }

    public mutating func read(_ type: Int64.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Int64
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(Int64.self, at: offset) }
    }

    public mutating func read(_ type: UInt.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UInt
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(UInt.self, at: offset) }
    }

    public mutating func read(_ type: UInt8.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UInt8
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(UInt8.self, at: offset) }
    }

    public mutating func read(_ type: UInt16.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UInt16
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(UInt16.self, at: offset) }
    }

    public mutating func read(_ type: UInt32.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UInt32
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(UInt32.self, at: offset) }
    }

    public mutating func read(_ type: UInt64.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> UInt64
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.integer(UInt64.self, at: offset) }
    }

    // MARK: Timestamps

    /// Reads the timestamp extension (type −1) in its 32-, 64- or 96-bit form.
    public mutating func read(_ type: MessagePackTimestamp.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> MessagePackTimestamp
    {
        try run(codingPath) { reader, offset throws(ReadFailure) in try reader.timestamp(at: offset) }
    }

    /// Reads the timestamp extension as the nearest `Date`, as `MessagePackDecoder`'s default date strategy does.
    public mutating func read(_ type: Date.Type, codingPath: @autoclosure () -> [any CodingKey] = [])
        throws(DecodingError) -> Date
    {
        try read(MessagePackTimestamp.self, codingPath: codingPath()).date
    }
}

@available(*, unavailable, message: "a MessagePackReader points into bytes that only its closure keeps alive")
extension MessagePackReader: Sendable {}

extension ByteReader {
    /// Fails if the map at `mapOffset` has a key twice; keys compare as `MessagePackDecoder`'s keyed containers
    /// compare them (string bytes; integers by value).
    func checkUniqueKeys(inMapAt mapOffset: Int) throws(ReadFailure) {
        let (total, first) = try mapHeader(at: mapOffset, as: [String: Any].self)
        var keys: [KeyIndex.Entry] = []
        keys.reserveCapacity(Swift.min(total, (count - first) / 2))
        var position = first
        for _ in 0..<total {
            let byte = try byte(at: position)
            switch byte {
            case 0xa0...0xbf, 0xd9, 0xda, 0xdb:
                let (start, length) = try stringRange(at: position)
                position = start + length
                keys.append(KeyIndex.Entry(key: start, length: length, value: position))
            default:
                let (value, end) = try integer(Int.self, at: position)
                position = end
                keys.append(KeyIndex.Entry(key: value, length: -1, value: position))
            }
            position = try skip(at: position, levels: Int.max)
        }
        try keys.withUnsafeBufferPointer { keys throws(ReadFailure) in
            try KeyIndex.checkDuplicates(self, keys, mapOffset: mapOffset)
        }
    }
}
