import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A passenger seat: a row number 1–99 without a leading zero, then one letter `A–K` except `I`, such as `17B`.
///
/// `I` is left out because seat maps skip it (it reads as `1`), so `17I` is a typo worth catching. A `Seat` value is
/// always valid; it encodes as a plain string.
public struct Seat: Codable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The canonical text, such as `17B`.
    public let rawValue: String

    public static let example = try! Seat("17B")

    /// Accepts only the canonical form (uppercase letter, no spaces), as written in records.
    /// - Throws: ``ValidationError`` with code `invalidSeat`.
    public init(_ text: String) throws {
        guard Self.isCanonical(text.utf8) else {
            throw ValidationError(
                .invalidSeat,
                "invalid seat '\(Validation.visible(text.prefix(80)))': use a row 1–99 and a letter A–K (no I), such as 17B",
                path: "seat")
        }
        rawValue = text
    }

    /// Row 1–99 without a leading zero, then `A–K` but not `I`; reads the UTF-8 in place, as every record's seat
    /// passes here.
    private static func isCanonical(_ utf8: String.UTF8View) -> Bool {
        let count = utf8.count
        guard count == 2 || count == 3 else { return false }
        let first = utf8[utf8.startIndex]
        let letter = utf8[utf8.index(before: utf8.endIndex)]
        guard letter >= UInt8(ascii: "A"), letter <= UInt8(ascii: "K"), letter != UInt8(ascii: "I"),
            first.isASCIIDigit, first != UInt8(ascii: "0")
        else { return false }
        return count == 2 || utf8[utf8.index(after: utf8.startIndex)].isASCIIDigit
    }

    /// Accepts what a person types: surrounding spaces are trimmed and the letter is uppercased.
    /// - Throws: ``ValidationError`` with code `invalidSeat`.
    public init(parsing text: String) throws {
        try self.init(text.trimmingWhitespace().uppercased())
    }

    /// The row number, 1–99.
    public var row: Int { Int(rawValue.dropLast())! }
    /// The seat letter.
    public var letter: Character { rawValue.last! }

    public var description: String { rawValue }

    /// Orders by row, then letter: `2A` before `10A`.
    public static func < (lhs: Seat, rhs: Seat) -> Bool { (lhs.row, lhs.letter) < (rhs.row, rhs.letter) }

    public init(from decoder: any Decoder) throws {
        self = try ValidationError.decodeChecked(decoder) { try Self($0) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
