#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

// Shared decoding helpers: they turn format slips into `ValidationError`s that name the field, so a rejected record
// says "id: 'xyz' is not a UUID" rather than Foundation's generic text.

extension KeyedDecodingContainer {
    func decodeUUID(forKey key: Key) throws -> UUID {
        let text = try decode(String.self, forKey: key)
        guard let uuid = UUID(canonical: text) else {
            throw ValidationError.invalidUUID(text, path: ValidationError.path(codingPath + [key]))
                .decodingError(at: codingPath + [key])
        }
        return uuid
    }

    /// Reads the record's `type` and fails unless it is `expected`.
    func checkRecordType(_ expected: String, forKey key: Key) throws {
        let type = try decode(String.self, forKey: key)
        guard type == expected else {
            throw ValidationError(
                .invalidRecordType, "record type is '\(Validation.visible(type.prefix(80)))' where '\(expected)' was expected",
                path: ValidationError.path(codingPath + [key])
            ).decodingError(at: codingPath + [key])
        }
    }
}

extension Date {
    /// The earliest time a record may carry: 2000-01-01T00:00:00Z (inclusive).
    public static let earliestRecordTime = Date(timeIntervalSince1970: 946_684_800)
    /// The time no record may reach: 2100-01-01T00:00:00Z (exclusive).
    public static let recordTimeLimit = Date(timeIntervalSince1970: 4_102_444_800)

    /// Dates in records lie in [2000-01-01, 2100-01-01) UTC: a clock set to 1970 or a hostile year 506713 is refused
    /// at capture and at the ground rather than shown on receipts. NaN fails the comparison too.
    func validate(path: @autoclosure () -> String) throws {
        let seconds = timeIntervalSince1970
        // Literals rather than the statics: this runs for every record.
        guard seconds >= 946_684_800, seconds < 4_102_444_800 else {
            throw ValidationError(
                .invalidDate,
                "the time \(Self.describe(seconds)) is outside 2000-01-01T00:00:00Z … 2100-01-01T00:00:00Z (exclusive); "
                    + "check the device's clock",
                path: path())
        }
    }

    /// Seconds since 1970 as a UTC date when that is meaningful, else the number itself.
    private static func describe(_ seconds: Double) -> String {
        guard seconds.isFinite, abs(seconds) < 1e14 else { return "\(seconds) s since 1970" }
        return Date.ISO8601FormatStyle().format(Date(timeIntervalSince1970: seconds.rounded(.down)))
    }
}

extension ValidationError {
    static func invalidUUID(_ text: String, path: String) -> ValidationError {
        ValidationError(
            .invalidUUID,
            "'\(Validation.visible(text.prefix(80)))' is not a UUID; expected the canonical form like F432BDB8-D84F-4461-8362-AFF89F6C493E",
            path: path)
    }
}

extension UUID {
    /// Parses the canonical form only: 36 characters, hex digits in groups of 8-4-4-4-12 joined by `-`, either case.
    ///
    /// Foundation's `UUID(uuidString:)` on Linux also takes some other spellings (it skips a space before a hex pair,
    /// for one), so two texts could name one id; records and tags are refused unless canonical (docs/PROTOCOL.md).
    public init?(canonical text: String) {
        let utf8 = Array(text.utf8)
        guard utf8.count == 36 else { return nil }
        for (index, byte) in utf8.enumerated() {
            let isHyphen = byte == UInt8(ascii: "-")
            guard [8, 13, 18, 23].contains(index) ? isHyphen : byte.isHexDigit else { return nil }
        }
        self.init(uuidString: text)
    }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self | 0x20)
    }
}
