public import Foundation

/// What a bag's QR code says: `{"id": "F432BDB8-…", "owner": ["D", "ZMU"], "weight": 42.0}`.
///
/// `weight` is in pounds, finite, 0…``maxWeight``. It is a `Double` in the model and encodes as a MessagePack float
/// (float 64, DESIGN.md's `Float` family), so the value a scanner read round-trips exactly: `42.3` stays `42.3`.
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
    /// ignored too.
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
        let text = qrPayload.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else {
            throw ValidationError(.malformedJSON, "tag payload is empty; expected JSON like \(exampleJSON)")
        }
        let tag: LuggageTag
        do {
            tag = try JSONDecoder().decode(LuggageTag.self, from: Data(text.utf8))
        } catch let error as DecodingError {
            if case .typeMismatch(_, let context) = error, context.codingPath.isEmpty {
                throw ValidationError(.malformedJSON, "tag payload must be a JSON object like \(exampleJSON)")
            }
            var reason = ValidationError(error, malformed: .malformedJSON)
            if reason.code == .malformedJSON {
                reason.message = "tag payload is not valid JSON; expected \(exampleJSON)"
            }
            throw reason
        }
        try tag.validate()
        return tag
    }

    /// Checks the weight: finite and between 0 and ``maxWeight`` pounds.
    /// - Throws: ``ValidationError`` with code `invalidWeight`.
    public func validate(path: String = "") throws {
        guard weight.isFinite, weight >= 0, weight <= Self.maxWeight else {
            throw ValidationError(
                .invalidWeight,
                "weight \(weight) is invalid; use a finite number of pounds from 0 to \(Self.maxWeight)",
                path: path.isEmpty ? "weight" : path + ".weight")
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
        weight = try container.decode(Double.self, forKey: .weight)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(owner, forKey: .owner)
        try container.encode(weight, forKey: .weight)
    }
}
