#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The UTF-8 bytes and integer value of each case of one `CodingKey` enum, filled in as lookups meet them.
///
/// A lookup by key would otherwise call `stringValue` and `intValue` (witness calls; `stringValue` builds a `String`)
/// and `withUTF8` through a closure that copies the container: about 200 instructions and two retain/release pairs
/// per key, some 10% of decoding a record. With the table, a lookup reads the case's tag byte and indexes an array.
///
/// Only for keys that are a plain value of at most one byte (`_isPOD`, size ≤ 1), which every synthesized or
/// `enum CodingKeys: String` key is. Two such keys with the same bits are the same value, and a key's `stringValue`
/// and `intValue` depend only on its value, so the bits identify the name. Other key types take the general path.
final class KeyNames {
    struct Name {
        /// Nil until a lookup first meets the case.
        var bytes: UnsafeMutablePointer<UInt8>?
        var length: Int
        var intValue: Int?
    }

    let keyType: ObjectIdentifier
    /// By tag: 256 entries, since the tag is one byte.
    let names: UnsafeMutablePointer<Name>

    init(keyType: ObjectIdentifier) {
        self.keyType = keyType
        names = .allocate(capacity: 256)
        names.initialize(repeating: Name(bytes: nil, length: 0, intValue: nil), count: 256)
    }

    deinit {
        for i in 0..<256 {
            names[i].bytes?.deallocate()
        }
        names.deallocate()
    }

    @inline(__always)
    static func applies<Key: CodingKey>(to type: Key.Type) -> Bool {
        _isPOD(Key.self) && MemoryLayout<Key>.size <= 1
    }

    /// Fills in `key`'s entry, making the table for `Key` first if the index has none.
    @inline(never)
    static func learn<Key: CodingKey>(_ key: Key, tag: Int, _ header: UnsafeMutablePointer<KeyIndex.Header>)
        -> (UnsafeBufferPointer<UInt8>, Int?)
    {
        if header.pointee.keyNamesType != ObjectIdentifier(Key.self) {
            let table = KeyNames(keyType: ObjectIdentifier(Key.self))
            header.pointee.keyNames = table
            header.pointee.keyNamesTable = table.names
            header.pointee.keyNamesType = table.keyType
        }
        let name = header.pointee.keyNames!.learn(key, tag: tag)
        return (UnsafeBufferPointer(start: name.bytes, count: name.length), name.intValue)
    }

    /// The tag of a key of a type this table `applies(to:)`: the value's one byte (a size-0 key has one value).
    @inline(__always)
    static func tag<Key: CodingKey>(of key: Key) -> Int {
        MemoryLayout<Key>.size == 0 ? 0 : Int(unsafeBitCast(key, to: UInt8.self))
    }

    /// Fills in the entry of `key`, whose tag is `tag`, from its `stringValue` and `intValue`.
    @inline(never)
    func learn<Key: CodingKey>(_ key: Key, tag: Int) -> Name {
        var string = key.stringValue
        let length = string.utf8.count
        // At least one byte, so that an empty name still has an address and counts as learnt.
        let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: Swift.max(length, 1))
        string.withUTF8 { utf8 in
            if let base = utf8.baseAddress {
                bytes.initialize(from: base, count: length)
            }
        }
        names[tag] = Name(bytes: bytes, length: length, intValue: key.intValue)
        return names[tag]
    }
}
