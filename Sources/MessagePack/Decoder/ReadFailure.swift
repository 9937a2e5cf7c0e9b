/// Why a read failed, before the coding path is known; containers turn it into a `DecodingError`.
struct ReadFailure: Error {
    enum Kind {
        case typeMismatch(Any.Type)
        case valueNotFound(Any.Type)
        case corrupted
    }

    var kind: Kind
    var message: String

    static func corrupted(_ message: String) -> ReadFailure {
        ReadFailure(kind: .corrupted, message: message)
    }

    func decodingError(_ codingPath: [any CodingKey]) -> DecodingError {
        let context = DecodingError.Context(codingPath: codingPath, debugDescription: message)
        switch kind {
        case .typeMismatch(let type): return .typeMismatch(type, context)
        case .valueNotFound(let type): return .valueNotFound(type, context)
        case .corrupted: return .dataCorrupted(context)
        }
    }
}

extension ReadFailure {
    /// A key present twice in the map at `mapOffset`; `name` is quoted for a string key, digits for an integer key.
    static func duplicateKey(_ name: String, mapOffset: Int) -> ReadFailure {
        .corrupted("Duplicate key \(name) in the map at offset \(mapOffset)")
    }

    /// A map at `offset` with more entries than the decoder's `maxMapEntries`.
    static func tooManyEntries(_ count: Int, at offset: Int, limit: Int) -> ReadFailure {
        .corrupted("The map at offset \(offset) has \(count) entries; at most \(limit) are read")
    }

    /// A container at `offset` past the nesting limit.
    static func tooDeep(at offset: Int, limit: Int) -> ReadFailure {
        .corrupted("Nesting too deep at offset \(offset): more than \(limit) levels of arrays and maps")
    }
}
