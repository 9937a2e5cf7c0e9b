import Foundation

/// The `Encoder` handed to every `encode(to:)`: one object per encoding, one byte buffer, a stack of open containers.
///
/// An open array or map starts with a one-byte fix header whose count is patched after each element; when the count
/// outgrows it (16, then 65,536) the payload moves right once to make room for the wider header. Only the innermost
/// open container may grow, so nothing after it has to move.
final class EncoderImpl: Encoder {
    struct Frame {
        var header: Int
        var count: Int
        let isMap: Bool
        let id: Int
    }

    var writer = ByteWriter(capacity: 256)
    var frames: [Frame] = []
    var nextFrameID = 0
    /// Keys of the current coding path; only the first `depth` are meaningful.
    var keys: [any CodingKey] = []
    var depth = 0
    /// Where the value being encoded by the current `encode(to:)` starts.
    var valueStart = 0
    var deferredError: (any Error)?
    let options: MessagePackEncoder
    let usesDefaultKeys: Bool
    var snakeCaseCache: [String: String] = [:]

    init(options: MessagePackEncoder) {
        self.options = options
        if case .useDefaultKeys = options.keyEncodingStrategy {
            usesDefaultKeys = true
        } else {
            usesDefaultKeys = false
        }
    }

    var codingPath: [any CodingKey] { Array(keys.prefix(depth)) }

    var userInfo: [CodingUserInfoKey: Any] { options.userInfo.mapValues { $0 as Any } }

    func path(depth: Int, parentKey: (any CodingKey)?) -> [any CodingKey] {
        guard let parentKey else { return Array(keys.prefix(depth)) }
        return Array(keys.prefix(depth - 1)) + [parentKey]
    }

    /// Keeps `keys[depth - 1]` right for a container that may be used after a sibling changed it.
    @inline(__always)
    func restore(parentKey: (any CodingKey)?, depth: Int) {
        guard let parentKey else { return }
        if keys.count >= depth {
            keys[depth - 1] = parentKey
        } else {
            keys.append(parentKey)
        }
    }

    // MARK: Top level

    func encodeTopLevel<T: Encodable>(_ value: T) throws {
        try encodeValue(value)
        if let deferredError {
            throw deferredError
        }
        if writer.bytes.isEmpty {
            throw EncodingError.invalidValue(
                value, EncodingError.Context(codingPath: [], debugDescription: "Top-level \(T.self) did not encode any values."))
        }
    }

    // MARK: Containers

    /// Opens an array or map with a placeholder fix header and makes it the innermost open container.
    func openFrame(isMap: Bool) -> Int {
        nextFrameID += 1
        frames.append(Frame(header: writer.bytes.count, count: 0, isMap: isMap, id: nextFrameID))
        writer.bytes.append(isMap ? 0x80 : 0x90)
        return nextFrameID
    }

    /// Makes the container `id` the innermost open one again, closing those opened inside it.
    @inline(__always)
    func activate(_ id: Int, codingPath: @autoclosure () -> [any CodingKey]) throws {
        if let last = frames.last, last.id == id {
            return
        }
        try reopen(id, codingPath: codingPath())
    }

    func reopen(_ id: Int, codingPath: [any CodingKey]) throws {
        if let index = frames.lastIndex(where: { $0.id == id }) {
            frames.removeSubrange((index + 1)...)
            return
        }
        if let deferredError {
            throw deferredError
        }
        throw EncodingError.invalidValue(
            id,
            EncodingError.Context(
                codingPath: codingPath,
                debugDescription:
                    "A container was written to after a container opened beside or around it; MessagePackEncoder "
                    + "writes bytes once, so fill each container before opening the next"))
    }

    /// Counts one more element in the innermost open container and patches its header.
    @inline(__always)
    func bump() throws {
        let top = frames.count - 1
        let count = frames[top].count + 1
        frames[top].count = count
        if count < 16 {
            writer.bytes[frames[top].header] = (frames[top].isMap ? 0x80 : 0x90) | UInt8(truncatingIfNeeded: count)
        } else {
            try grow(top, count)
        }
    }

    func grow(_ top: Int, _ count: Int) throws {
        let header = frames[top].header
        let isMap = frames[top].isMap
        if count <= 0xffff {
            if count == 16 {
                writer.bytes.insert(contentsOf: repeatElement(0, count: 2), at: header + 1)
            }
            writer.bytes[header] = isMap ? 0xde : 0xdc
            writer.bytes[header + 1] = UInt8(truncatingIfNeeded: count >> 8)
            writer.bytes[header + 2] = UInt8(truncatingIfNeeded: count)
        } else if count <= 0xffff_ffff {
            if count == 0x1_0000 {
                writer.bytes.insert(contentsOf: repeatElement(0, count: 2), at: header + 3)
            }
            writer.bytes[header] = isMap ? 0xdf : 0xdd
            writer.bytes[header + 1] = UInt8(truncatingIfNeeded: count >> 24)
            writer.bytes[header + 2] = UInt8(truncatingIfNeeded: count >> 16)
            writer.bytes[header + 3] = UInt8(truncatingIfNeeded: count >> 8)
            writer.bytes[header + 4] = UInt8(truncatingIfNeeded: count)
        } else {
            throw ByteWriter.tooLong(isMap ? "map" : "array", count)
        }
    }

    /// Writes an empty map where a super encoder was handed out but never used, as `JSONEncoder` does.
    @inline(__always)
    func settle(owed: Int) {
        if writer.bytes.count == owed {
            writer.bytes.append(0x80)
        }
    }

    func writeKey(_ key: some CodingKey, depth: Int) throws {
        if usesDefaultKeys {
            try writer.writeString(key.stringValue)
            return
        }
        switch options.keyEncodingStrategy {
        case .useDefaultKeys:
            try writer.writeString(key.stringValue)
        case .convertToSnakeCase:
            let name = key.stringValue
            if let converted = snakeCaseCache[name] {
                try writer.writeString(converted)
            } else {
                let converted = KeyConversion.toSnakeCase(name)
                snakeCaseCache[name] = converted
                try writer.writeString(converted)
            }
        case .custom(let convert):
            let path = Array(keys.prefix(depth)) + [key]
            try writer.writeString(convert(path).stringValue)
        }
    }

    func deadContainer<Key: CodingKey>(_ error: any Error, keyedBy: Key.Type) -> KeyedEncodingContainer<Key> {
        if deferredError == nil {
            deferredError = error
        }
        return KeyedEncodingContainer(KeyedEncoder<Key>(impl: self, frame: -1, depth: depth, parentKey: nil))
    }

    func misuse(_ what: String) -> EncodingError {
        EncodingError.invalidValue(
            what,
            EncodingError.Context(
                codingPath: codingPath,
                debugDescription: "\(what) was requested after this value had already written something"))
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if writer.bytes.count != valueStart {
            // A second keyed container for the same value (a subclass and its superclass) shares the map.
            if let frame = frames.last(where: { $0.header == valueStart }), frame.isMap {
                return KeyedEncodingContainer(KeyedEncoder<Key>(impl: self, frame: frame.id, depth: depth, parentKey: nil))
            }
            return deadContainer(misuse("A keyed container"), keyedBy: Key.self)
        }
        let id = openFrame(isMap: true)
        return KeyedEncodingContainer(KeyedEncoder<Key>(impl: self, frame: id, depth: depth, parentKey: nil))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if writer.bytes.count != valueStart {
            if let frame = frames.last(where: { $0.header == valueStart }), !frame.isMap {
                return UnkeyedEncoder(impl: self, frame: frame.id, depth: depth, parentKey: nil, count: frame.count)
            }
            if deferredError == nil {
                deferredError = misuse("An unkeyed container")
            }
            return UnkeyedEncoder(impl: self, frame: -1, depth: depth, parentKey: nil, count: 0)
        }
        let id = openFrame(isMap: false)
        return UnkeyedEncoder(impl: self, frame: id, depth: depth, parentKey: nil, count: 0)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueEncoder(impl: self, depth: depth, start: valueStart)
    }

    /// Lets `MessagePackValue` and `MessagePackTimestamp` write themselves as one value.
    func encodeSingle(_ body: (inout ByteWriter) throws -> Void) throws {
        guard writer.bytes.count == valueStart else {
            throw misuse("A single value")
        }
        try body(&writer)
    }

    // MARK: Values

    /// Encodes a value one level below the container at `depth - 1`, under `key`.
    func encodeNested<T: Encodable>(_ value: T, depth nestedDepth: Int, key: any CodingKey) throws {
        if keys.count >= nestedDepth {
            keys[nestedDepth - 1] = key
        } else {
            keys.append(key)
        }
        let savedDepth = depth
        depth = nestedDepth
        defer { depth = savedDepth }
        let start = writer.bytes.count
        try encodeValue(value)
        if writer.bytes.count == start {
            // A value that encodes nothing still needs a value after its key: `{}`, as JSONEncoder writes.
            writer.bytes.append(0x80)
        }
    }

    /// Encodes a value at the current depth, with the types MessagePack represents natively written directly.
    func encodeValue<T: Encodable>(_ value: T) throws {
        if T.self == String.self {
            try writer.writeString(reinterpret(value, as: String.self))
        } else if T.self == Int.self {
            writer.writeInt(Int64(reinterpret(value, as: Int.self)))
        } else if T.self == Double.self {
            writer.writeDouble(reinterpret(value, as: Double.self))
        } else if T.self == Bool.self {
            writer.writeBool(reinterpret(value, as: Bool.self))
        } else if T.self == Date.self {
            try encodeDate(reinterpret(value, as: Date.self))
        } else if T.self == UUID.self {
            writer.writeUUID(reinterpret(value, as: UUID.self))
        } else if T.self == Data.self {
            try writer.writeBinary(reinterpret(value, as: Data.self))
        } else if T.self == URL.self {
            try writer.writeString(reinterpret(value, as: URL.self).absoluteString)
        } else if T.self == MessagePackValue.self {
            try writer.writeValue(reinterpret(value, as: MessagePackValue.self))
        } else if T.self == MessagePackTimestamp.self {
            writer.writeTimestamp(reinterpret(value, as: MessagePackTimestamp.self))
        } else if let dictionary = value as? any SortedDictionaryEncodable {
            try dictionary.encodeSorted(into: self)
        } else {
            try encodeThroughSelf(value.encode(to:))
        }
    }

    func encodeThroughSelf(_ body: (any Encoder) throws -> Void) throws {
        let savedStart = valueStart
        valueStart = writer.bytes.count
        defer { valueStart = savedStart }
        try body(self)
    }

    func encodeDate(_ date: Date) throws {
        switch options.dateEncodingStrategy {
        case .timestamp:
            writer.writeTimestamp(MessagePackTimestamp(date))
        case .deferredToDate:
            try encodeThroughSelf(date.encode(to:))
        case .secondsSince1970:
            writer.writeDouble(date.timeIntervalSince1970)
        case .millisecondsSince1970:
            writer.writeDouble(date.timeIntervalSince1970 * 1000)
        case .iso8601:
            try writer.writeString(date.formatted(.iso8601))
        case .custom(let encode):
            try encodeThroughSelf { try encode(date, $0) }
        }
    }
}

/// Reads a value of generic type `T` as the concrete type `U` that the caller has just checked `T` to be.
@inline(__always)
func reinterpret<T, U>(_ value: T, as type: U.Type) -> U {
    withUnsafePointer(to: value) { UnsafeRawPointer($0).load(as: U.self) }
}

extension ByteWriter {
    /// Writes the canonical uppercase text of a UUID (`uuidString`) without building a `String`.
    mutating func writeUUID(_ uuid: UUID) {
        bytes.append(0xd9)
        bytes.append(36)
        let digits: StaticString = "0123456789ABCDEF"
        withUnsafeBytes(of: uuid.uuid) { raw in
            digits.withUTF8Buffer { hex in
                for i in 0..<16 {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        bytes.append(UInt8(ascii: "-"))
                    }
                    let byte = raw[i]
                    bytes.append(hex[Int(byte >> 4)])
                    bytes.append(hex[Int(byte & 0x0f)])
                }
            }
        }
    }
}

/// Dictionaries whose keys are sorted before encoding, so equal dictionaries give equal bytes in every process.
protocol SortedDictionaryEncodable {
    func encodeSorted(into impl: EncoderImpl) throws
}

/// Dictionary key types that become map keys: `String` as str, `Int` as an integer.
protocol MapKeyEncodable: Comparable {
    func write(into writer: inout ByteWriter) throws
    var codingKey: AnyCodingKey { get }
}

extension String: MapKeyEncodable {
    func write(into writer: inout ByteWriter) throws {
        try writer.writeString(self)
    }

    var codingKey: AnyCodingKey { AnyCodingKey(stringValue: self) }
}

extension Int: MapKeyEncodable {
    func write(into writer: inout ByteWriter) throws {
        writer.writeInt(Int64(self))
    }

    var codingKey: AnyCodingKey { AnyCodingKey(intValue: self) }
}

extension Dictionary: SortedDictionaryEncodable where Key: MapKeyEncodable, Value: Encodable {
    func encodeSorted(into impl: EncoderImpl) throws {
        try impl.writer.writeMapHeader(count)
        let depth = impl.depth
        for (key, value) in self.sorted(by: { $0.key < $1.key }) {
            try key.write(into: &impl.writer)
            try impl.encodeNested(value, depth: depth + 1, key: key.codingKey)
        }
    }
}
