/// Whether types are `DecodableArray`s, remembered by type in 16 slots: the conformance check costs a runtime
/// lookup, and `decodeValue` asks for every value that is not one of MessagePack's own types.
struct ArrayTypeCache {
    private var types = [ObjectIdentifier?](repeating: nil, count: 16)
    private var arrayTypes = [(any DecodableArray.Type)?](repeating: nil, count: 16)

    @inline(__always)
    mutating func arrayType(_ type: Any.Type) -> (any DecodableArray.Type)? {
        let id = ObjectIdentifier(type)
        let slot = Int(truncatingIfNeeded: UInt(bitPattern: id) >> 4) & 15
        if types[slot] == id {
            return arrayTypes[slot]
        }
        let arrayType = type as? any DecodableArray.Type
        types[slot] = id
        arrayTypes[slot] = arrayType
        return arrayType
    }
}
