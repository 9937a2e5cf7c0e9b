#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension DecoderImpl {
    /// Opens a map for a keyed container: reads its header, and unless `lazily`, all its keys.
    func makeKeyIndex(start: Int, depth: Int, parentKey: (any CodingKey)?, lazily: Bool) throws -> KeyIndex {
        let parent = parentKey.map(ParentKey.init)
        let (count, first, capacity) = try openMap(start: start, depth: depth, parent: parent)
        let index = reusableIndex(depth: depth, capacity: capacity)
        try prepare(index, start: start, depth: depth, count: count, first: first, parent: parent, lazily: lazily)
        return index
    }

    /// Reads a map's header and checks its nesting.
    ///
    /// The parent key travels boxed (`ParentKey?`): passing an optional existential through these calls cost ~200
    /// instructions of outlined copies and destroys per map, for a key that only an error message reads.
    ///
    /// - Returns: the entries it claims, where the first key starts, and how many entries the bytes left can hold.
    @inline(__always)
    func openMap(start: Int, depth: Int, parent: ParentKey?) throws -> (Int, Int, Int) {
        // No closure for the path: a stored closure costs an allocation per map.
        let (count, first): (Int, Int)
        do {
            (count, first) = try reader.mapHeader(at: start, as: [String: Any].self)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: parent?.key))
        }
        try checkNesting(depth: depth, at: start)
        guard count <= options.maxMapEntries else {
            throw ReadFailure.tooManyEntries(count, at: start, limit: options.maxMapEntries).decodingError(
                path(depth: depth, parentKey: parent?.key))
        }
        return (count, first, Swift.min(count, (reader.count - first) / 2))
    }

    /// Points `index` at a new map; unless `lazily`, reads all its keys.
    func prepare(
        _ index: KeyIndex, start: Int, depth: Int, count: Int, first: Int, parent: ParentKey?, lazily: Bool
    ) throws {
        index.withUnsafeMutablePointerToHeader { header in
            header.pointee.count = 0
            header.pointee.last = -1
            header.pointee.endEntry = -1
            header.pointee.parentKey = parent
            header.pointee.names = nil
            header.pointee.start = start
            header.pointee.depth = depth
            header.pointee.total = count
            header.pointee.first = first
            header.pointee.complete = false
        }
        if lazily && usesDefaultKeys {
            return
        }
        // Key strategies convert every key up front, so they take the whole map at once.
        do {
            try completeKeyIndex(index)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: parent?.key))
        }
        if !usesDefaultKeys {
            let names = KeyIndex.convertedNames(self, index, path(depth: depth, parentKey: parent?.key))
            index.withUnsafeMutablePointerToHeader { $0.pointee.names = names }
        }
    }

    /// Reopens the cached container's index for the map at `start`, if it is large enough.
    func reopen(_ slot: KeyedContainerSlot, start: Int, depth: Int) throws -> Bool {
        let (count, first, capacity) = try openMap(start: start, depth: depth, parent: nil)
        let index = slot.index
        guard index.withUnsafeMutablePointerToHeader({ $0.pointee.capacity >= capacity }) else { return false }
        indexCache[depth] = index
        try prepare(index, start: start, depth: depth, count: count, first: first, parent: nil, lazily: true)
        return true
    }

    /// Reads the rest of a map's keys, checking the structure of every value not yet decoded.
    func completeKeyIndex(_ index: KeyIndex) throws(ReadFailure) {
        try index.withUnsafeMutablePointers { header, entries throws(ReadFailure) in
            while !header.pointee.complete {
                _ = try scanKey(header, entries)
            }
        }
    }

    /// Completes the index of the map at `start`, if a keyed container at `depth` left it partly read.
    ///
    /// Called when a value's `init(from:)` returns: it enforces what a lazy index skipped — every value's
    /// structure, no duplicate keys — and records the map's end for the container above.
    @inline(__always)
    func finishKeyIndex(depth: Int, start: Int) throws {
        guard depth < indexCache.count, let index = indexCache[depth] else { return }
        let pending = index.withUnsafeMutablePointerToHeader { header in
            header.pointee.start == start && !header.pointee.complete
        }
        guard pending else { return }
        do {
            try completeKeyIndex(index)
        } catch {
            throw error.decodingError(path(depth: depth, parentKey: index.parentKey))
        }
    }

    /// Reads the next key of a map, after stepping over the previous value (by its known end, when the container
    /// above decoded it). After the last key, checks for duplicates and records the map's end.
    ///
    /// - Returns: whether it added an entry.
    func scanKey(
        _ header: UnsafeMutablePointer<KeyIndex.Header>, _ entries: UnsafeMutablePointer<KeyIndex.Entry>
    ) throws(ReadFailure) -> Bool {
        let reader = self.reader
        let i = header.pointee.count
        let depth = header.pointee.depth
        var position =
            i == 0
            ? header.pointee.first
            : header.pointee.endEntry == i - 1
                ? header.pointee.endOffset : try end(of: entries[i - 1].value, depth: depth + 1)
        if i == header.pointee.total {
            try KeyIndex.checkDuplicates(
                reader, UnsafeBufferPointer(start: entries, count: i), mapOffset: header.pointee.start)
            header.pointee.complete = true
            recordEnd(depth: depth, start: header.pointee.start, end: position)
            return false
        }
        guard i < header.pointee.capacity else {
            throw .corrupted(
                "Unexpected end of data at offset \(position): the map at offset \(header.pointee.start) claims "
                    + "\(header.pointee.total) entries (\(reader.count - position) bytes left)")
        }
        let keyOffset = position
        let byte = try reader.byte(at: position)
        let entryKey: Int
        let entryLength: Int
        if byte & 0xe0 == 0xa0 {
            // fixstr, by far the most common key
            let length = Int(byte & 0x1f)
            try reader.need(position + 1, length, "fixstr")
            try KeyIndex.checkUTF8(reader, position + 1, length, at: position)
            entryKey = position + 1
            entryLength = length
            position += 1 + length
        } else {
            switch byte {
            case 0xd9, 0xda, 0xdb:
                let (keyStart, length) = try reader.stringRange(at: position)
                try KeyIndex.checkUTF8(reader, keyStart, length, at: position)
                entryKey = keyStart
                entryLength = length
                position = keyStart + length
            case 0x00...0x7f, 0xe0...0xff, 0xcc...0xd3:
                let (value, end) = try reader.integer(Int.self, at: position)
                entryKey = value
                entryLength = -1
                position = end
            default:
                throw ReadFailure(
                    kind: .typeMismatch(String.self),
                    message: "Expected a string or integer map key at offset \(keyOffset) but found "
                        + ByteReader.describe(byte))
            }
        }
        entries[i] = KeyIndex.Entry(key: entryKey, length: entryLength, value: position)
        header.pointee.count = i + 1
        return true
    }

    /// The index left at this depth by a container that is gone, or a new one: most maps are siblings of the same
    /// shape (the elements of an array), so this saves an allocation per map.
    func reusableIndex(depth: Int, capacity: Int) -> KeyIndex {
        if depth < indexCache.count, isKnownUniquelyReferenced(&indexCache[depth]) {
            let cached = indexCache[depth]!
            let fits = cached.withUnsafeMutablePointerToHeader { header in
                guard header.pointee.capacity >= capacity else { return false }
                header.pointee.count = 0
                header.pointee.last = -1
                return true
            }
            if fits {
                return cached
            }
        }
        let index = KeyIndex.make(capacity: Swift.max(capacity, 8))
        while indexCache.count <= depth {
            indexCache.append(nil)
        }
        indexCache[depth] = index
        return index
    }
}
