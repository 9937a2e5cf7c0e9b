import Foundation

/// One value written in place.
struct SingleValueEncoder: SingleValueEncodingContainer {
    let impl: EncoderImpl
    let depth: Int
    /// Where this value starts; writing is allowed only while nothing has been written there.
    let start: Int

    var codingPath: [any CodingKey] { Array(impl.keys.prefix(depth)) }

    @inline(__always)
    func check() throws {
        guard impl.writer.count == start else {
            throw EncodingError.invalidValue(
                start,
                EncodingError.Context(
                    codingPath: codingPath,
                    debugDescription: "A single value container was asked to encode a second value"))
        }
    }

    mutating func encodeNil() throws {
        try check()
        impl.writer.writeNil()
    }

    mutating func encode(_ value: Int) throws {
        try check()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int8) throws {
        try check()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int16) throws {
        try check()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int32) throws {
        try check()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int64) throws {
        try check()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: UInt) throws {
        try check()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt8) throws {
        try check()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt16) throws {
        try check()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt32) throws {
        try check()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt64) throws {
        try check()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: Bool) throws {
        try check()
        impl.writer.writeBool(value)
    }

    mutating func encode(_ value: Float) throws {
        try check()
        impl.writer.writeFloat(value)
    }

    mutating func encode(_ value: Double) throws {
        try check()
        impl.writer.writeDouble(value)
    }

    mutating func encode(_ value: String) throws {
        try check()
        try impl.writer.writeString(value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try check()
        try impl.encodeValue(value)
        if impl.writer.count == start {
            impl.writer.writeByte(0x80)
        }
    }
}
