#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What a bag's QR code says: `{"id": "F432BDB8-…", "owner": ["D", "ZMU"], "weight": 42.0}`.
///
/// `weight` is in pounds, finite, 0…``maxWeight``. It is a `Double` in the model; records carry it as a `Float`
/// (MessagePack float 32), as docs/PROTOCOL.md's record format says, and decoding rounds it to 1/1000 lb. Float 32 resolves
/// better than 0.0001 lb up to ``maxWeight``, so any weight given to three decimals round-trips exactly:
/// `42.3` stays `42.3`.
public struct LuggageTag: Codable, Hashable, Sendable {
    public var id: UUID
    public var owner: Owner
    public var weight: Double

    /// Longest QR payload accepted, in UTF-8 bytes; checked before any JSON parsing so hostile input costs nothing.
    public static let maxPayloadBytes = 4096
    /// Heaviest accepted bag in pounds: far above any airline's limit, low enough that report sums stay exact.
    public static let maxWeight = 1000.0

    public init(id: UUID, owner: Owner, weight: Double) {
        self.id = id
        self.owner = owner
        self.weight = weight
    }

    public static let example = LuggageTag(
        id: UUID(uuidString: "F432BDB8-D84F-4461-8362-AFF89F6C493E")!, owner: .example, weight: 42.0)

    /// Decodes and validates one QR payload.
    ///
    /// Surrounding whitespace (a scanner's line ending) is ignored; keys other than `id`, `owner`, `weight` are
    /// ignored too, but a key given twice is rejected as ambiguous. Nesting deeper than 16 levels is rejected.
    /// - Parameter qrPayload: The JSON text from the code.
    /// - Returns: A valid tag.
    /// - Throws: ``ValidationError``: `payloadTooLarge`, `malformedJSON`, `missingField`, `wrongType`, `invalidUUID`,
    ///   `invalidOwner`, `invalidWeight`.
    public static func parse(qrPayload: String) throws -> LuggageTag {
        guard qrPayload.utf8.count <= maxPayloadBytes else {
            throw ValidationError(
                .payloadTooLarge,
                "tag payload is \(qrPayload.utf8.count) bytes; a tag is at most \(maxPayloadBytes) bytes of JSON")
        }
        // Only JSON whitespace may surround the object; error offsets count from the payload's first byte.
        let bytes = Array(qrPayload.utf8)
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        guard bytes.contains(where: { !isSpace($0) }) else {
            throw ValidationError(.malformedJSON, "tag payload is empty; expected JSON like \(exampleJSON)")
        }
        guard case .object(let members) = try TagJSON.parse(bytes) else {
            throw ValidationError(.malformedJSON, "tag payload must be a JSON object like \(exampleJSON)")
        }
        func field(_ key: String) throws -> TagJSON {
            guard let value = members.first(where: { $0.key == key })?.value, value != .null else {
                throw ValidationError(.missingField, "required field '\(key)' is missing", path: key)
            }
            return value
        }
        func wrongType(_ path: String, _ expected: String, _ value: TagJSON) -> ValidationError {
            ValidationError(.wrongType, "wrong type: expected \(expected), found \(value.kind)", path: path)
        }

        let idValue = try field("id")
        guard case .string(let idText) = idValue else { throw wrongType("id", "a UUID string", idValue) }
        guard let id = UUID(canonical: idText) else { throw ValidationError.invalidUUID(idText, path: "id") }

        let ownerValue = try field("owner")
        guard case .array(let parts) = ownerValue else { throw wrongType("owner", "an array", ownerValue) }
        guard parts.count == 2 else {
            throw ValidationError(
                .invalidOwner,
                #"owner must be a two-element array [initial, family] such as ["D", "ZMU"]; got \#(parts.count) elements"#,
                path: "owner")
        }
        let names = try parts.enumerated().map { index, part in
            guard case .string(let name) = part else { throw wrongType("owner[\(index)]", "a string", part) }
            return name
        }
        let owner: Owner
        do { owner = try Owner(initial: names[0], family: names[1]) } catch var error as ValidationError {
            error.path = "owner"
            throw error
        }

        let weightValue = try field("weight")
        guard case .number(let weight) = weightValue else { throw wrongType("weight", "a number", weightValue) }

        // Rounded to the 1/1000 lb a record keeps, then checked, as the ground decodes a record (docs/PROTOCOL.md):
        // before, 1000.0004 was refused here and accepted there. -0 is 0: one spelling for one weight.
        // Through float 32 first, as the record carries it: at 1000.0005 the two orders of rounding differ.
        let rounded = Self.recordPrecision(Double(Float(weight)))
        let tag = LuggageTag(id: id, owner: owner, weight: rounded == 0 ? 0 : rounded)
        try tag.validate()
        return tag
    }

    /// Checks the weight: finite and between 0 and ``maxWeight`` pounds.
    /// - Throws: ``ValidationError`` with code `invalidWeight`.
    public func validate(path: @autoclosure () -> String = "") throws {
        guard weight.isFinite, weight >= 0, weight <= Self.maxWeight else {
            throw ValidationError(
                .invalidWeight,
                "weight \(weight) is invalid; use a finite number of pounds from 0 to \(Self.maxWeight)",
                path: path().isEmpty ? "weight" : path() + ".weight")
        }
    }

    static let exampleJSON = #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 42.0}"#

    enum CodingKeys: String, CodingKey {
        case id, owner, weight
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decodeUUID(forKey: .id)
        owner = try container.decode(Owner.self, forKey: .owner)
        weight = Self.recordPrecision(try container.decode(Double.self, forKey: .weight))
    }

    /// Rounds a weight to the 1/1000 lb that survives the record's float 32, as decoding a record does; for decoders
    /// of records written by hand.
    public static func recordPrecision(_ weight: Double) -> Double {
        guard weight.isFinite else { return weight }
        return (weight * 1000).rounded() / 1000
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(owner, forKey: .owner)
        try container.encode(Float(weight), forKey: .weight)
    }
}
