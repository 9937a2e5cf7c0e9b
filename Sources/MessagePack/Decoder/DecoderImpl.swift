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

/// One reusable decoder per thread, so decoding record by record keeps its caches (containers, key indexes, stacks).
private let decoderThreadKey: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key) { pointer in
        if let pointer {
            Unmanaged<DecoderImpl>.fromOpaque(pointer).release()
        }
    }
    precondition(status == 0, "pthread_key_create failed: \(status)")
    return key
}()

/// The `Decoder` handed to every `init(from:)`, reading the input in place.
///
/// Containers remember byte offsets, not the decoder's state, so a failed attempt at one kind of container leaves the
/// decoder ready for the next. Each thread keeps one between calls (see `acquire`), because decoding many small
/// records one by one would otherwise rebuild its caches for every record.
final class DecoderImpl: Decoder, CodingPathStack {
    @exclusivity(unchecked) var reader: ByteReader
    @exclusivity(unchecked) var options: MessagePackDecoder
    @exclusivity(unchecked) var usesDefaultKeys = true
    @exclusivity(unchecked) var datesAreTimestamps = true
    /// Whether a decoding on this thread is using this decoder (a custom strategy may decode inside a decoding).
    var inUse = false
    /// Keys of the current coding path; only the first `depth` are meaningful.
    @exclusivity(unchecked) var keys: [any CodingKey] = []
    @exclusivity(unchecked) var depth = 0
    /// Where the value being decoded by the current `init(from:)` starts.
    @exclusivity(unchecked) var position = 0
    /// Known value ends, as (start, end) pairs by depth, so an array need not skip over an element it just decoded.
    @exclusivity(unchecked) var ends: [Int] = []
    /// One key index per depth, reused once its container is gone.
    @exclusivity(unchecked) var indexCache: [KeyIndex?] = []
    /// The last container `container(keyedBy:)` made at each depth, for the next map of the same type.
    @exclusivity(unchecked) var containerCache: [KeyedContainerSlot?] = []
    /// Which types `decodeValue` meets are arrays it decodes itself, so that the conformance check runs once a type.
    @exclusivity(unchecked) var arrayTypes = ArrayTypeCache()

    init(reader: ByteReader, options: MessagePackDecoder) {
        self.reader = reader
        self.options = options
        // One allocation each instead of regrowing from empty for every small record.
        keys.reserveCapacity(8)
        ends.reserveCapacity(16)
        indexCache.reserveCapacity(8)
        containerCache.reserveCapacity(8)
        begin(reader: reader, options: options)
    }

    /// This thread's decoder, ready to read `reader`; give it back with `relinquish()`.
    static func acquire(reader: ByteReader, options: MessagePackDecoder) -> DecoderImpl {
        guard let pointer = pthread_getspecific(decoderThreadKey) else {
            let impl = DecoderImpl(reader: reader, options: options)
            pthread_setspecific(decoderThreadKey, Unmanaged.passRetained(impl).toOpaque())
            return impl
        }
        let impl = Unmanaged<DecoderImpl>.fromOpaque(pointer).takeUnretainedValue()
        guard !impl.inUse else {
            // A decoding inside a decoding (from a custom date strategy, say) gets a decoder of its own.
            return DecoderImpl(reader: reader, options: options)
        }
        impl.begin(reader: reader, options: options)
        return impl
    }

    private func begin(reader: ByteReader, options: MessagePackDecoder) {
        self.reader = reader
        self.options = options
        if case .timestamp = options.dateDecodingStrategy {
            datesAreTimestamps = true
        } else {
            datesAreTimestamps = false
        }
        if case .useDefaultKeys = options.keyDecodingStrategy {
            usesDefaultKeys = true
        } else {
            usesDefaultKeys = false
        }
        depth = 0
        position = 0
        inUse = true
    }

    /// Ends a decoding: forgets the input and everything learnt about it, keeps the allocations.
    func relinquish() {
        reader = ByteReader(UnsafeRawBufferPointer(start: nil, count: 0))
        // Neither the caller's closures and userInfo nor large caches outlive the call.
        options = MessagePackDecoder()
        for i in ends.indices {
            ends[i] = -1
        }
        // An index left half read by a failed decoding must never be resumed on other input.
        for i in indexCache.indices {
            guard let index = indexCache[i] else { continue }
            let large = index.withUnsafeMutablePointerToHeader { header in
                header.pointee.complete = true
                header.pointee.parentKey = nil
                header.pointee.names = nil
                return header.pointee.capacity > 64
            }
            if large {
                indexCache[i] = nil
            }
        }
        for i in containerCache.indices {
            if let slot = containerCache[i], slot.index.withUnsafeMutablePointerToHeader({ $0.pointee.capacity > 64 }) {
                containerCache[i] = nil
            }
        }
        inUse = false
    }

    var userInfo: [CodingUserInfoKey: Any] { options.userInfo.mapValues { $0 as Any } }

    // MARK: Ends

    @inline(__always)
    func recordEnd(depth: Int, start: Int, end: Int) {
        let slot = 2 * depth
        while ends.count <= slot + 1 {
            ends.append(-1)
        }
        ends[slot] = start
        ends[slot + 1] = end
    }

    /// Where the value at `start`, at coding depth `depth`, ends.
    @inline(__always)
    func end(of start: Int, depth: Int) throws(ReadFailure) -> Int {
        let slot = 2 * depth
        if slot + 1 < ends.count && ends[slot] == start {
            return ends[slot + 1]
        }
        return try reader.skip(at: start, levels: options.nestingLimit - depth)
    }

    // MARK: Top level

    func decodeTopLevel<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try decodeValue(type, at: 0)
        let end: Int
        do {
            end = try self.end(of: 0, depth: 0)
        } catch {
            throw error.decodingError([])
        }
        guard end == reader.count else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: [],
                    debugDescription:
                        "Unexpected data at offset \(end): \(reader.count - end) bytes left over after the top-level value"
                ))
        }
        return value
    }

    // MARK: Containers

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        if depth < containerCache.count, let slot = containerCache[depth], slot.keyType == ObjectIdentifier(Key.self),
            try reopen(slot, start: position, depth: depth)
        {
            return unsafeDowncast(slot, to: KeyedContainerSlotFor<Key>.self).container
        }
        // decodeValue and decodeThroughSelf finish the lazy index when init(from:) returns.
        let decoder = try KeyedDecoder<Key>(impl: self, start: position, depth: depth, parentKey: nil, lazily: true)
        let container = KeyedDecodingContainer(decoder)
        while containerCache.count <= depth {
            containerCache.append(nil)
        }
        containerCache[depth] = KeyedContainerSlotFor(container: container, index: decoder.index)
        return container
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try UnkeyedDecoder(impl: self, start: position, depth: depth, parentKey: nil)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueDecoder(impl: self, start: position, depth: depth)
    }

    func checkNesting(depth: Int, at offset: Int) throws {
        guard depth < options.nestingLimit else {
            throw ReadFailure.tooDeep(at: offset, limit: options.nestingLimit).decodingError(codingPath)
        }
    }

    // MARK: Values

    /// Decodes a value one level below the container at `depth - 1`, under `key`.
    func decodeNested<T: Decodable>(_ type: T.Type, at offset: Int, depth nestedDepth: Int, key: any CodingKey) throws
        -> T
    {
        setKey(key, depth: nestedDepth)
        let savedDepth = depth
        depth = nestedDepth
        defer { depth = savedDepth }
        return try decodeValue(type, at: offset)
    }

    @inline(__always)
    func read<V>(_ body: () throws(ReadFailure) -> V) throws -> V {
        do {
            return try body()
        } catch {
            throw error.decodingError(codingPath)
        }
    }

    /// Decodes a value at the current depth, reading the types MessagePack represents natively directly.
    func decodeValue<T: Decodable>(_ type: T.Type, at offset: Int) throws -> T {
        if T.self == String.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.string(at: offset).0 }, as: T.self)
        } else if T.self == Int.self {
            return reinterpret(
                try read { () throws(ReadFailure) in try reader.integer(Int.self, at: offset).0 }, as: T.self)
        } else if T.self == Double.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.double(at: offset).0 }, as: T.self)
        } else if T.self == Bool.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.bool(at: offset).0 }, as: T.self)
        } else if T.self == Date.self {
            return reinterpret(try decodeDate(at: offset), as: T.self)
        } else if T.self == UUID.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.uuid(at: offset) }, as: T.self)
        } else if T.self == Data.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.binary(at: offset).0 }, as: T.self)
        } else if T.self == URL.self {
            let string = try read { () throws(ReadFailure) in try reader.string(at: offset).0 }
            guard let url = URL(string: string) else {
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(
                        codingPath: codingPath, debugDescription: "Invalid URL string at offset \(offset)"))
            }
            return reinterpret(url, as: T.self)
        } else if T.self == MessagePackValue.self {
            let levels = options.nestingLimit - depth
            return reinterpret(
                try read { () throws(ReadFailure) in try reader.value(at: offset, levels: levels).0 }, as: T.self)
        } else if T.self == MessagePackTimestamp.self {
            return reinterpret(try read { () throws(ReadFailure) in try reader.timestamp(at: offset).0 }, as: T.self)
        } else if let arrayType = arrayTypes.arrayType(T.self) {
            return try decodeArray(arrayType, at: offset, as: T.self)
        } else {
            let savedPosition = position
            position = offset
            defer { position = savedPosition }
            let value = try T(from: self)
            try finishKeyIndex(depth: depth, start: offset)
            return value
        }
    }

    /// Decodes an array of `Decodable` elements without the stdlib's `Array.init(from:)`, which appends one element
    /// at a time from empty, unspecialized, and fetches `Array<Element>` metadata for every element: ~1,200
    /// instructions an element for the 1–4 line items of an order.
    private func decodeArray<A: DecodableArray, T>(_ arrayType: A.Type, at offset: Int, as type: T.Type) throws -> T {
        reinterpret(try A.decode(from: self, at: offset), as: T.self)
    }

    func decodeDate(at offset: Int) throws -> Date {
        switch options.dateDecodingStrategy {
        case .timestamp:
            return try read { () throws(ReadFailure) in try reader.timestamp(at: offset).0 }.date
        case .deferredToDate:
            return try decodeThroughSelf(at: offset, Date.init(from:))
        case .secondsSince1970:
            return Date(timeIntervalSince1970: try read { () throws(ReadFailure) in try reader.double(at: offset).0 })
        case .millisecondsSince1970:
            return Date(
                timeIntervalSince1970: try read { () throws(ReadFailure) in try reader.double(at: offset).0 } / 1000)
        case .iso8601:
            let string = try read { () throws(ReadFailure) in try reader.string(at: offset).0 }
            do {
                return try Date(string, strategy: .iso8601)
            } catch {
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(
                        codingPath: codingPath,
                        debugDescription: "Expected an ISO 8601 date at offset \(offset) but found \"\(string)\""))
            }
        case .custom(let decode):
            return try decodeThroughSelf(at: offset, decode)
        }
    }

    func decodeThroughSelf<V>(at offset: Int, _ body: (any Decoder) throws -> V) throws -> V {
        let savedPosition = position
        position = offset
        defer { position = savedPosition }
        let value = try body(self)
        try finishKeyIndex(depth: depth, start: offset)
        return value
    }

    /// For `MessagePackValue.init(from:)` called with this decoder.
    func decodeValueHere() throws -> MessagePackValue {
        let levels = options.nestingLimit - depth
        return try read { () throws(ReadFailure) in try reader.value(at: position, levels: levels).0 }
    }

    /// For `MessagePackTimestamp.init(from:)` called with this decoder.
    func decodeTimestampHere() throws -> MessagePackTimestamp {
        try read { () throws(ReadFailure) in try reader.timestamp(at: position).0 }
    }
}
