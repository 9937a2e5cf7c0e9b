/// A bag's owner as printed on the tag: the given-name initial (one letter) and the first three letters of the family
/// name, such as `["D", "ZMU"]`.
///
/// Letters are ASCII `A–Z`; lowercase input is accepted and stored uppercase, so that `["d", "zmu"]` and
/// `["D", "ZMU"]` are the same owner and never count as a conflict. Encodes as a two-element array. Always valid.
public struct Owner: Codable, Hashable, Sendable, CustomStringConvertible {
    public let initial: String
    public let family: String

    public static let example = try! Owner(initial: "D", family: "ZMU")

    /// - Throws: ``ValidationError`` with code `invalidOwner`.
    public init(initial: String, family: String) throws {
        guard initial.utf8.count == 1, initial.utf8.allSatisfy({ $0.isASCIIUpper || $0.isASCIILower }) else {
            throw ValidationError(
                .invalidOwner, "owner initial '\(Validation.visible(initial.prefix(80)))' must be one letter A–Z, such as \"D\"",
                path: "owner[0]")
        }
        guard family.utf8.count == 3, family.utf8.allSatisfy({ $0.isASCIIUpper || $0.isASCIILower }) else {
            throw ValidationError(
                .invalidOwner, "owner family part '\(Validation.visible(family.prefix(80)))' must be three letters A–Z, such as \"ZMU\"",
                path: "owner[1]")
        }
        self.initial = initial.uppercased()
        self.family = family.uppercased()
    }

    /// `D ZMU`.
    public var description: String { "\(initial) \(family)" }

    public init(from decoder: any Decoder) throws {
        var container = try decoder.unkeyedContainer()
        func arity(_ count: Int?) -> DecodingError {
            let got = count.map { "\($0) elements" } ?? "a different number of elements"
            return ValidationError(
                .invalidOwner,
                "owner must be a two-element array [initial, family] such as [\"D\", \"ZMU\"]; got \(got)"
            ).decodingError(at: decoder.codingPath)
        }
        if let count = container.count, count != 2 { throw arity(count) }
        var parts: [String] = []
        while parts.count < 2 {
            guard !container.isAtEnd else { throw arity(parts.count) }
            parts.append(try container.decode(String.self))
        }
        guard container.isAtEnd else { throw arity(nil) }
        do {
            try self.init(initial: parts[0], family: parts[1])
        } catch var error as ValidationError {
            error.path = ""
            throw error.decodingError(at: decoder.codingPath)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.unkeyedContainer()
        try container.encode(initial)
        try container.encode(family)
    }
}
