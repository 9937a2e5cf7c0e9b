/// Arrays that `DecoderImpl.decodeValue` decodes itself: the same checks, errors and element decoding as
/// `Array.init(from:)` through an `UnkeyedDecoder`, with room reserved up front.
protocol DecodableArray {
    static func decode(from impl: DecoderImpl, at start: Int) throws -> Self
}

extension Array: DecodableArray where Element: Decodable {
    static func decode(from impl: DecoderImpl, at start: Int) throws -> [Element] {
        let depth = impl.depth
        let count: Int
        var cursor: Int
        do {
            (count, cursor) = try impl.reader.arrayHeader(at: start, as: [Any].self)
        } catch {
            throw error.decodingError(impl.codingPath)
        }
        try impl.checkNesting(depth: depth, at: start)
        var array: [Element] = []
        // The count is not trusted for more than the input could hold, nor for much at all. (Reserving measured
        // better than appending from empty, and better than `Array(unsafeUninitializedCapacity:)`, unspecialized.)
        array.reserveCapacity(Swift.min(count, impl.reader.count &- cursor, 4096))
        for index in 0..<count {
            let element = try impl.decodeNested(Element.self, at: cursor, depth: depth + 1, key: IndexKey(index: index))
            do {
                cursor = try impl.end(of: cursor, depth: depth + 1)
            } catch {
                throw error.decodingError(impl.codingPath + [IndexKey(index: index)])
            }
            array.append(element)
        }
        impl.recordEnd(depth: depth, start: start, end: cursor)
        return array
    }
}
