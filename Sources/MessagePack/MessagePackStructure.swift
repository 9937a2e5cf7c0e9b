/// Works on MessagePack bytes without decoding them: frames arrays of records that are already encoded, and finds
/// and checks the elements of such arrays.
///
/// The wire protocol sends "a MessagePack array of records", each record bytes read back from a queue. The sender
/// writes `arrayHeader(count:)` and then the records as they are; the receiver calls `arrayElements(in:)` and
/// decodes each element on its own, so it can name the index of a bad record.
public enum MessagePackStructure {
    /// The header of an array of `count` elements, in its smallest form.
    /// - Parameter count: The number of elements that will follow; at most 2³²−1.
    /// - Returns: 1, 3 or 5 bytes.
    public static func arrayHeader(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= 0xffff_ffff, "A MessagePack array holds at most 2³²−1 elements")
        return header { try! $0.writeArrayHeader(count) }
    }

    /// The header of a map of `count` key-value pairs, in its smallest form.
    /// - Parameter count: The number of pairs that will follow; at most 2³²−1.
    /// - Returns: 1, 3 or 5 bytes.
    public static func mapHeader(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= 0xffff_ffff, "A MessagePack map holds at most 2³²−1 pairs")
        return header { try! $0.writeMapHeader(count) }
    }

    /// What `write` puts into a 5-byte buffer, the most a header takes.
    private static func header(_ write: (inout ByteWriter) -> Void) -> [UInt8] {
        var writer = ByteWriter(capacity: 5)
        defer { writer.deallocate() }
        write(&writer)
        return writer.bytes
    }

    /// Finds the elements of a top-level array and checks that each is one well-formed value.
    ///
    /// Every element is checked as `MessagePackValue` decoding would check it (lengths, the never-used byte 0xc1,
    /// nesting, UTF-8 of strings, timestamps) without building anything; a hostile count or length cannot make it
    /// allocate or loop beyond the bytes given.
    /// - Parameters:
    ///   - bytes: One MessagePack array and nothing after it, for example a `Data` or `[UInt8]`.
    ///   - nestingLimit: The deepest nesting accepted, counting the outer array as one level.
    /// - Returns: The byte range of each element, in the indices of `bytes`, so `bytes[range]` is the element.
    /// - Throws: `MessagePackStructure.Error` naming the element index and byte offset of the first problem.
    public static func arrayElements<Bytes: Collection<UInt8>>(
        in bytes: Bytes, nestingLimit: Int = 512
    ) throws(MessagePackStructure.Error) -> [Range<Int>] where Bytes.Index == Int {
        let base = bytes.startIndex
        let found: Result<[Range<Int>], MessagePackStructure.Error>? = bytes.withContiguousStorageIfAvailable {
            buffer in
            Result { () throws(MessagePackStructure.Error) in
                try elements(ByteReader(UnsafeRawBufferPointer(buffer)), nestingLimit: nestingLimit, shift: base)
            }
        }
        if let found {
            return try found.get()
        }
        let copy = Array(bytes)
        return try copy.withUnsafeBytes { buffer in
            Result { () throws(MessagePackStructure.Error) in
                try elements(ByteReader(buffer), nestingLimit: nestingLimit, shift: base)
            }
        }.get()
    }

    static func elements(
        _ reader: ByteReader, nestingLimit: Int, shift: Int
    ) throws(MessagePackStructure.Error) -> [Range<Int>] {
        let count: Int
        var position: Int
        do throws(ReadFailure) {
            (count, position) = try reader.arrayHeader(at: 0, as: [Any].self)
            guard nestingLimit > 0 else { throw reader.tooDeep(at: 0) }
        } catch {
            throw Error(index: nil, offset: 0, message: error.message)
        }
        var ranges: [Range<Int>] = []
        // Every element takes at least one byte, so the bytes left bound what a hostile count can reserve.
        ranges.reserveCapacity(Swift.min(count, reader.count - position))
        for index in 0..<count {
            let start = position
            do {
                position = try reader.skip(at: start, levels: nestingLimit - 1, validate: true)
            } catch {
                throw Error(index: index, offset: start, message: error.message)
            }
            ranges.append((start + shift)..<(position + shift))
        }
        guard position == reader.count else {
            throw Error(
                index: nil, offset: position,
                message:
                    "Unexpected data at offset \(position): \(reader.count - position) bytes left over after the array")
        }
        return ranges
    }

    /// Why `arrayElements(in:)` refused its input.
    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        /// The index of the bad element, or nil when the array itself is malformed.
        public var index: Int?
        /// The byte offset, from the start of the input, where the element or problem starts.
        public var offset: Int
        /// What is wrong, with the exact offset.
        public var message: String

        public var description: String {
            if let index {
                return "Element \(index) (at offset \(offset)) is malformed: \(message)"
            }
            return message
        }
    }
}
