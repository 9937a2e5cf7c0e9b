import Foundation

/// The one growing buffer an encoding writes into, with every MessagePack form in its smallest size.
struct ByteWriter {
    var bytes: [UInt8]

    init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always)
    mutating func writeByte(_ byte: UInt8) {
        bytes.append(byte)
    }

    @inline(__always)
    mutating func writeBigEndian<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    mutating func writeNil() {
        bytes.append(0xc0)
    }

    mutating func writeBool(_ value: Bool) {
        bytes.append(value ? 0xc3 : 0xc2)
    }

    mutating func writeUInt(_ value: UInt64) {
        if value < 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value))
        } else if value <= 0xff {
            bytes.append(0xcc)
            bytes.append(UInt8(truncatingIfNeeded: value))
        } else if value <= 0xffff {
            bytes.append(0xcd)
            writeBigEndian(UInt16(truncatingIfNeeded: value))
        } else if value <= 0xffff_ffff {
            bytes.append(0xce)
            writeBigEndian(UInt32(truncatingIfNeeded: value))
        } else {
            bytes.append(0xcf)
            writeBigEndian(value)
        }
    }

    mutating func writeInt(_ value: Int64) {
        if value >= 0 {
            writeUInt(UInt64(value))
        } else if value >= -32 {
            bytes.append(UInt8(truncatingIfNeeded: value))
        } else if value >= -0x80 {
            bytes.append(0xd0)
            bytes.append(UInt8(truncatingIfNeeded: value))
        } else if value >= -0x8000 {
            bytes.append(0xd1)
            writeBigEndian(Int16(truncatingIfNeeded: value))
        } else if value >= -0x8000_0000 {
            bytes.append(0xd2)
            writeBigEndian(Int32(truncatingIfNeeded: value))
        } else {
            bytes.append(0xd3)
            writeBigEndian(value)
        }
    }

    mutating func writeFloat(_ value: Float) {
        bytes.append(0xca)
        writeBigEndian(value.bitPattern)
    }

    mutating func writeDouble(_ value: Double) {
        bytes.append(0xcb)
        writeBigEndian(value.bitPattern)
    }

    mutating func writeString(_ value: String) throws {
        var value = value
        try value.withUTF8 { utf8 in
            try writeStringHeader(utf8.count)
            bytes.append(contentsOf: utf8)
        }
    }

    mutating func writeStringHeader(_ count: Int) throws {
        if count < 32 {
            bytes.append(0xa0 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xff {
            bytes.append(0xd9)
            bytes.append(UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            bytes.append(0xda)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            bytes.append(0xdb)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("string", count)
        }
    }

    mutating func writeBinary(_ data: Data) throws {
        let count = data.count
        if count <= 0xff {
            bytes.append(0xc4)
            bytes.append(UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            bytes.append(0xc5)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            bytes.append(0xc6)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("binary", count)
        }
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    mutating func writeArrayHeader(_ count: Int) throws {
        if count < 16 {
            bytes.append(0x90 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            bytes.append(0xdc)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            bytes.append(0xdd)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("array", count)
        }
    }

    mutating func writeMapHeader(_ count: Int) throws {
        if count < 16 {
            bytes.append(0x80 | UInt8(truncatingIfNeeded: count))
        } else if count <= 0xffff {
            bytes.append(0xde)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        } else if count <= 0xffff_ffff {
            bytes.append(0xdf)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        } else {
            throw Self.tooLong("map", count)
        }
    }

    mutating func writeExtension(type: Int8, data: Data) throws {
        let count = data.count
        let typeByte = UInt8(bitPattern: type)
        switch count {
        case 1: bytes.append(0xd4)
        case 2: bytes.append(0xd5)
        case 4: bytes.append(0xd6)
        case 8: bytes.append(0xd7)
        case 16: bytes.append(0xd8)
        case 0...0xff:
            bytes.append(0xc7)
            bytes.append(UInt8(truncatingIfNeeded: count))
        case 0...0xffff:
            bytes.append(0xc8)
            writeBigEndian(UInt16(truncatingIfNeeded: count))
        case 0...0xffff_ffff:
            bytes.append(0xc9)
            writeBigEndian(UInt32(truncatingIfNeeded: count))
        default:
            throw Self.tooLong("extension", count)
        }
        bytes.append(typeByte)
        data.withUnsafeBytes { bytes.append(contentsOf: $0) }
    }

    /// Writes the timestamp extension in the smallest form that holds it exactly.
    mutating func writeTimestamp(_ timestamp: MessagePackTimestamp) {
        let seconds = timestamp.seconds
        let nanos = timestamp.nanoseconds
        if seconds >= 0 && seconds >> 34 == 0 {
            if nanos == 0 && seconds >> 32 == 0 {
                bytes.append(0xd6)
                bytes.append(0xff)
                writeBigEndian(UInt32(truncatingIfNeeded: seconds))
            } else {
                bytes.append(0xd7)
                bytes.append(0xff)
                writeBigEndian(UInt64(nanos) << 34 | UInt64(seconds))
            }
        } else {
            bytes.append(0xc7)
            bytes.append(12)
            bytes.append(0xff)
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
