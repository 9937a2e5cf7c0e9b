/// The `encode` methods for nil and the standard scalars, shared by the single-value and unkeyed containers: each
/// makes room for one value (`begin`) and writes it in its smallest form.
protocol ScalarEncodingContainer {
    var impl: EncoderImpl { get }
    /// Checks that one more value may be written here and accounts for it; throws `EncodingError` if not.
    mutating func begin() throws
}

extension ScalarEncodingContainer {
    mutating func encodeNil() throws {
        try begin()
        impl.writer.writeNil()
    }

    mutating func encode(_ value: Int) throws {
        try begin()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int8) throws {
        try begin()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int16) throws {
        try begin()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int32) throws {
        try begin()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: Int64) throws {
        try begin()
        impl.writer.writeInt(Int64(value))
    }

    mutating func encode(_ value: UInt) throws {
        try begin()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt8) throws {
        try begin()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt16) throws {
        try begin()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt32) throws {
        try begin()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: UInt64) throws {
        try begin()
        impl.writer.writeUInt(UInt64(value))
    }

    mutating func encode(_ value: Bool) throws {
        try begin()
        impl.writer.writeBool(value)
    }

    mutating func encode(_ value: Float) throws {
        try begin()
        impl.writer.writeFloat(value)
    }

    mutating func encode(_ value: Double) throws {
        try begin()
        impl.writer.writeDouble(value)
    }

    mutating func encode(_ value: String) throws {
        try begin()
        try impl.writer.writeString(value)
    }
}
