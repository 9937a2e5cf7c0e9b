#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One value read in place.
struct SingleValueDecoder: SingleValueDecodingContainer {
    let impl: DecoderImpl
    let start: Int
    let depth: Int
    let codingPath: [any CodingKey]

    init(impl: DecoderImpl, start: Int, depth: Int) {
        self.impl = impl
        self.start = start
        self.depth = depth
        self.codingPath = impl.path(depth: depth, parentKey: nil)
    }

    @inline(__always)
    private func read<V>(_ body: (Int) throws(ReadFailure) -> V) throws -> V {
        do {
            return try body(start)
        } catch {
            throw error.decodingError(codingPath)
        }
    }

    func decodeNil() -> Bool {
        start < impl.reader.count && impl.reader.base[start] == 0xc0
    }

    func decode(_ type: Int.Type) throws -> Int {
        try read { offset throws(ReadFailure) in try impl.reader.integer(Int.self, at: offset).0 }
    }

    func decode(_ type: Int8.Type) throws -> Int8 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(Int8.self, at: offset).0 }
    }

    func decode(_ type: Int16.Type) throws -> Int16 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(Int16.self, at: offset).0 }
    }

    func decode(_ type: Int32.Type) throws -> Int32 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(Int32.self, at: offset).0 }
    }

    func decode(_ type: Int64.Type) throws -> Int64 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(Int64.self, at: offset).0 }
    }

    func decode(_ type: UInt.Type) throws -> UInt {
        try read { offset throws(ReadFailure) in try impl.reader.integer(UInt.self, at: offset).0 }
    }

    func decode(_ type: UInt8.Type) throws -> UInt8 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(UInt8.self, at: offset).0 }
    }

    func decode(_ type: UInt16.Type) throws -> UInt16 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(UInt16.self, at: offset).0 }
    }

    func decode(_ type: UInt32.Type) throws -> UInt32 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(UInt32.self, at: offset).0 }
    }

    func decode(_ type: UInt64.Type) throws -> UInt64 {
        try read { offset throws(ReadFailure) in try impl.reader.integer(UInt64.self, at: offset).0 }
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        try read { offset throws(ReadFailure) in try impl.reader.bool(at: offset).0 }
    }

    func decode(_ type: String.Type) throws -> String {
        try read { offset throws(ReadFailure) in try impl.reader.string(at: offset).0 }
    }

    func decode(_ type: Double.Type) throws -> Double {
        try read { offset throws(ReadFailure) in try impl.reader.double(at: offset).0 }
    }

    func decode(_ type: Float.Type) throws -> Float {
        try read { offset throws(ReadFailure) in try impl.reader.float(at: offset).0 }
    }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let savedDepth = impl.depth
        let savedKeys = impl.keys
        impl.keys = codingPath
        impl.depth = depth
        defer {
            impl.depth = savedDepth
            impl.keys = savedKeys
        }
        return try impl.decodeValue(type, at: start)
    }
}
