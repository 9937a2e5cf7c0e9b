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

/// The one growing buffer an encoding writes into, with every MessagePack form in its smallest size.
///
/// Raw `malloc` memory rather than `[UInt8]`: appends need no uniqueness check, and the finished buffer becomes the
/// returned `Data` without a copy. The owner calls `deallocate()` or `takeData()` exactly once.
struct ByteWriter {
    var base: UnsafeMutablePointer<UInt8>
    var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = Swift.max(capacity, 16)
        base = malloc(self.capacity)!.assumingMemoryBound(to: UInt8.self)
    }

    func deallocate() {
        free(base)
    }

    /// Hands the buffer to a `Data` that frees it; the writer must not be used afterwards.
    func takeData() -> Data {
        guard count > 0 else {
            free(base)
            return Data()
        }
        return Data(bytesNoCopy: base, count: count, deallocator: .free)
    }

    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    @inline(__always)
    mutating func reserve(_ extra: Int) {
        if extra > capacity &- count {
            grow(extra)
        }
    }

    @inline(never)
    mutating func grow(_ extra: Int) {
        capacity = Swift.max(capacity * 2, count + extra)
        base = realloc(base, capacity)!.assumingMemoryBound(to: UInt8.self)
    }

    @inline(__always)
    mutating func writeByte(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count &+= 1
    }

    @inline(__always)
    mutating func writeBigEndian<T: FixedWidthInteger>(_ value: T) {
        reserve(MemoryLayout<T>.size)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: T.self)
        count &+= MemoryLayout<T>.size
    }

    @inline(__always)
    mutating func writeBytes(_ bytes: UnsafeRawBufferPointer) {
        let length = bytes.count
        guard length > 0 else { return }
        reserve(length)
        UnsafeMutableRawPointer(base + count).copyMemory(from: bytes.baseAddress!, byteCount: length)
        count &+= length
    }

    @inline(__always)
    mutating func writeBytes(_ bytes: UnsafeBufferPointer<UInt8>) {
        writeBytes(UnsafeRawBufferPointer(bytes))
    }

    /// Sets a byte already written (a container header being patched).
    @inline(__always)
    func patch(_ offset: Int, _ byte: UInt8) {
        base[offset] = byte
    }

    /// Opens `length` bytes at `offset`, moving what follows to the right.
    mutating func insertGap(_ length: Int, at offset: Int) {
        reserve(length)
        (base + offset + length).update(from: base + offset, count: count - offset)
        count += length
    }

    /// Forgets everything written from `offset` on.
    mutating func truncate(to offset: Int) {
        count = offset
    }

    mutating func writeNil() {
        writeByte(0xc0)
    }

    mutating func writeBool(_ value: Bool) {
        writeByte(value ? 0xc3 : 0xc2)
    }

    mutating func writeUInt(_ value: UInt64) {
        if value < 0x80 {
            writeByte(UInt8(truncatingIfNeeded: value))
        } else if value <= 0xff {
            writeByte(0xcc)
            writeByte(UInt8(truncatingIfNeeded: value))
        } else if value <= 0xffff {
            writeByte(0xcd)
            writeBigEndian(UInt16(truncatingIfNeeded: value))
        } else if value <= 0xffff_ffff {
            writeByte(0xce)
            writeBigEndian(UInt32(truncatingIfNeeded: value))
        } else {
            writeByte(0xcf)
            writeBigEndian(value)
        }
    }

    mutating func writeInt(_ value: Int64) {
        if value >= 0 {
            writeUInt(UInt64(value))
        } else if value >= -32 {
            writeByte(UInt8(truncatingIfNeeded: value))
        } else if value >= -0x80 {
            writeByte(0xd0)
            writeByte(UInt8(truncatingIfNeeded: value))
        } else if value >= -0x8000 {
            writeByte(0xd1)
            writeBigEndian(Int16(truncatingIfNeeded: value))
        } else if value >= -0x8000_0000 {
            writeByte(0xd2)
            writeBigEndian(Int32(truncatingIfNeeded: value))
        } else {
            writeByte(0xd3)
            writeBigEndian(value)
        }
    }

    mutating func writeFloat(_ value: Float) {
        writeByte(0xca)
        writeBigEndian(value.bitPattern)
    }

    mutating func writeDouble(_ value: Double) {
        writeByte(0xcb)
        writeBigEndian(value.bitPattern)
    }

    mutating func writeString(_ value: String) throws {
        var value = value
        try value.withUTF8 { utf8 in
            try writeStringHeader(utf8.count)
            writeBytes(utf8)
        }
    }

    mutating func writeStringHeader(_ count: Int) throws {
        if count < 32 {
            writeByte(0xa0 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xff {
            writeByte(0xd9)
            writeByte(UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            writeByte(0xda)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            writeByte(0xdb)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("string", count)
        }
    }

    mutating func writeBinary(_ data: Data) throws {
        let count = data.count
        if count <= 0xff {
            writeByte(0xc4)
            writeByte(UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            writeByte(0xc5)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            writeByte(0xc6)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("binary", count)
        }
        data.withUnsafeBytes { writeBytes($0) }
    }

    mutating func writeArrayHeader(_ count: Int) throws {
        if count < 16 {
            writeByte(0x90 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            writeByte(0xdc)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            writeByte(0xdd)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("array", count)
        }
    }

    mutating func writeMapHeader(_ count: Int) throws {
        if count < 16 {
            writeByte(0x80 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            writeByte(0xde)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            writeByte(0xdf)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("map", count)
        }
    }

    mutating func writeExtension(type: Int8, data: Data) throws {
        let count = data.count
        let typeByte = UInt8(bitPattern: type)
        switch count {
        case 1: writeByte(0xd4)
        case 2: writeByte(0xd5)
        case 4: writeByte(0xd6)
        case 8: writeByte(0xd7)
        case 16: writeByte(0xd8)
        case 0...0xff:
            writeByte(0xc7)
            writeByte(UInt8(truncatingIfNeeded: count))
        case 0...0xffff:
            writeByte(0xc8)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        case 0...0xffff_ffff:
            writeByte(0xc9)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        default:
            throw Self.tooLong("extension", count)
        }
        writeByte(typeByte)
        data.withUnsafeBytes { writeBytes($0) }
    }

    /// Writes the timestamp extension in the smallest form that holds it exactly.
    mutating func writeTimestamp(_ timestamp: MessagePackTimestamp) {
        let seconds = timestamp.seconds
        let nanos = timestamp.nanoseconds
        if seconds >= 0 && seconds >> 34 == 0 {
            if nanos == 0 && seconds >> 32 == 0 {
                writeByte(0xd6)
                writeByte(0xff)
                writeBigEndian(UInt32(truncatingIfNeeded: seconds))
            } else {
                writeByte(0xd7)
                writeByte(0xff)
                writeBigEndian(UInt64(nanos) << 34 | UInt64(seconds))
            }
        } else {
            writeByte(0xc7)
            writeByte(12)
            writeByte(0xff)
            writeBigEndian(nanos)
            writeBigEndian(seconds)
        }
    }

    mutating func writeValue(_ value: MessagePackValue) throws {
        switch value {
        case .nil: writeNil()
        case .bool(let v): writeBool(v)
        case .int(let v): writeInt(v)
        case .uint(let v): writeUInt(v)
        case .float32(let v): writeFloat(v)
        case .float64(let v): writeDouble(v)
        case .string(let v): try writeString(v)
        case .binary(let v): try writeBinary(v)
        case .array(let elements):
            try writeArrayHeader(elements.count)
            for element in elements {
                try writeValue(element)
            }
        case .map(let pairs):
            try writeMapHeader(pairs.count)
            for pair in pairs {
                try writeValue(pair.key)
                try writeValue(pair.value)
            }
        case .extension(let type, let data): try writeExtension(type: type, data: data)
        case .timestamp(let v): writeTimestamp(v)
        }
    }

    static func tooLong(_ what: String, _ count: Int) -> EncodingError {
        EncodingError.invalidValue(
            count,
            EncodingError.Context(
                codingPath: [],
                debugDescription: "A \(what) of \(count) elements or bytes exceeds MessagePack's limit of 2³²−1"))
    }
}
