import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One flight leg: `CARRIER NUMBER [SUFFIX] / YYYY-MM-DD`, for example `ZA101/2026-11-21`.
///
/// - Carrier: two characters `A–Z` or `0–9`, not both digits (IATA designators such as `ZA`, `U2`, `9W`).
/// - Number: 1–4 digits without a leading zero, so that one flight has one spelling (`ZA101`, never `ZA0101`).
/// - Suffix: an optional operational letter `A–Z` (`ZA101A`).
/// - Date: the scheduled departure date, a real calendar date (`2026-02-30` is rejected).
///
/// A `FlightID` value is always valid: every initializer and the decoder check the shape. It encodes as a plain
/// string.
public struct FlightID: Codable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The canonical text, such as `ZA101/2026-11-21`.
    public let rawValue: String

    public static let example = try! FlightID("ZA101/2026-11-21")

    /// Accepts only the canonical form (uppercase, no spaces), as written in records.
    /// - Throws: ``ValidationError`` with code `invalidFlight`.
    public init(_ text: String) throws {
        try Self.check(text)
        rawValue = text
    }

    /// Accepts what a person types: surrounding spaces are trimmed and letters are uppercased.
    /// - Throws: ``ValidationError`` with code `invalidFlight`.
    public init(parsing text: String) throws {
        try self.init(text.trimmingWhitespace().uppercased())
    }

    /// The two-character carrier designator, such as `ZA`.
    public var carrier: String { String(rawValue.prefix(2)) }
    /// The flight number with its optional suffix, such as `101` or `101A`.
    public var number: String { String(rawValue.dropFirst(2).prefix { $0 != "/" }) }
    /// The date part, `YYYY-MM-DD`.
    public var date: String { String(rawValue.suffix(10)) }

    public var description: String { rawValue }

    public static func < (lhs: FlightID, rhs: FlightID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        self = try ValidationError.decodeChecked(decoder) { try Self($0) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    private static func check(_ text: String) throws {
        func fail(_ why: String) -> ValidationError {
            ValidationError(
                .invalidFlight,
                "invalid flight '\(Validation.visible(text.prefix(80)))': \(why); expected CARRIER+NUMBER/YYYY-MM-DD such as ZA101/2026-11-21",
                path: "flight")
        }
        let bytes = Array(text.utf8)
        guard let slash = bytes.firstIndex(of: UInt8(ascii: "/")) else { throw fail("no '/' before the date") }
        let designator = bytes[..<slash]
        let date = Array(bytes[(slash + 1)...])
        guard designator.count >= 3 else { throw fail("carrier and number are too short") }
        let carrier = Array(designator.prefix(2))
        guard carrier.allSatisfy({ $0.isASCIIUpper || $0.isASCIIDigit }), !carrier.allSatisfy(\.isASCIIDigit) else {
            throw fail("the carrier must be two letters or digits, not both digits")
        }
        var number = Array(designator.dropFirst(2))
        if let last = number.last, last.isASCIIUpper { number.removeLast() }
        guard (1...4).contains(number.count), number.allSatisfy(\.isASCIIDigit) else {
            throw fail("the flight number must be 1–4 digits, optionally followed by one letter")
        }
        guard number.first != UInt8(ascii: "0") else { throw fail("the flight number must not start with 0") }
        guard date.count == 10, date[4] == UInt8(ascii: "-"), date[7] == UInt8(ascii: "-"),
            let year = Int(String(decoding: date[0..<4], as: UTF8.self)),
            let month = Int(String(decoding: date[5..<7], as: UTF8.self)),
            let day = Int(String(decoding: date[8..<10], as: UTF8.self)),
            date.enumerated().allSatisfy({ $0.offset == 4 || $0.offset == 7 || $0.element.isASCIIDigit })
        else { throw fail("the date must be YYYY-MM-DD") }
        guard year >= 1, (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day) else {
            throw fail("\(String(decoding: date, as: UTF8.self)) is not a calendar date")
        }
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }
}
