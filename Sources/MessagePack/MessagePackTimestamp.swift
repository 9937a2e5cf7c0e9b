#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// An exact point in time as MessagePack's timestamp extension (type −1) carries it.
///
/// `Date` is a `Double` and cannot hold every nanosecond of every second; use this type where the exact
/// value written by another system matters.
public struct MessagePackTimestamp: Hashable, Comparable, Sendable {
    /// Seconds since 1970-01-01T00:00:00Z; negative before it.
    public var seconds: Int64
    /// Nanoseconds added to `seconds`, always in `0..<1_000_000_000`.
    public var nanoseconds: UInt32

    /// Creates a timestamp.
    /// - Parameters:
    ///   - seconds: Seconds since 1970-01-01T00:00:00Z.
    ///   - nanoseconds: Nanoseconds within that second; must be below 1,000,000,000.
    public init(seconds: Int64, nanoseconds: UInt32 = 0) {
        precondition(nanoseconds < 1_000_000_000, "nanoseconds must be below 1,000,000,000")
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// Creates the timestamp nearest to a date, rounded to the nanosecond.
    /// - Parameter date: The date to convert; its seconds since 1970 must fit in `Int64` (any finite date
    ///   within ±292 billion years).
    public init(_ date: Date) {
        guard let timestamp = Self(exactly: date) else {
            preconditionFailure("\(date.timeIntervalSince1970) seconds since 1970 is not a MessagePack timestamp")
        }
        self = timestamp
    }

    /// The timestamp nearest to a date, or nil when the date is not finite or out of `Int64` seconds.
    init?(exactly date: Date) {
        // Split on the reference-date scale Date stores, so the whole seconds stay exact.
        let interval = date.timeIntervalSinceReferenceDate
        let whole = interval.rounded(.down)
        guard whole.isFinite, let wholeSeconds = Int64(exactly: whole) else { return nil }
        var nanos = ((interval - whole) * 1e9).rounded()
        var (secs, overflow) = wholeSeconds.addingReportingOverflow(Self.referenceOffset)
        guard !overflow else { return nil }
        if nanos >= 1e9 {
            nanos -= 1e9
            (secs, overflow) = secs.addingReportingOverflow(1)
            guard !overflow else { return nil }
        }
        self.seconds = secs
        self.nanoseconds = UInt32(nanos)
    }

    /// The nearest `Date`.
    public var date: Date {
        let (sinceReference, overflow) = seconds.subtractingReportingOverflow(Self.referenceOffset)
        if overflow {
            // Only within 31 years of Int64.min seconds, where Double cannot tell the difference anyway.
            return Date(timeIntervalSinceReferenceDate: Double(seconds) - Double(Self.referenceOffset))
        }
        return Date(timeIntervalSinceReferenceDate: Double(sinceReference) + Double(nanoseconds) / 1e9)
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }

    /// Seconds from 1970 to Foundation's reference date, 2001-01-01.
    static let referenceOffset: Int64 = 978_307_200
}

extension MessagePackTimestamp: Codable {
    private enum CodingKeys: String, CodingKey {
        case seconds, nanoseconds
    }

    /// Decodes the timestamp extension from `MessagePackDecoder`, or `{seconds, nanoseconds}` from other decoders.
    public init(from decoder: any Decoder) throws {
        if let impl = decoder as? DecoderImpl {
            self = try impl.decodeTimestampHere()
            return
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let seconds = try container.decode(Int64.self, forKey: .seconds)
        let nanoseconds = try container.decode(UInt32.self, forKey: .nanoseconds)
        guard nanoseconds < 1_000_000_000 else {
            throw DecodingError.dataCorruptedError(
                forKey: .nanoseconds, in: container, debugDescription: "nanoseconds \(nanoseconds) ≥ 1,000,000,000")
        }
        self.init(seconds: seconds, nanoseconds: nanoseconds)
    }

    /// Encodes the timestamp extension into `MessagePackEncoder`, or `{seconds, nanoseconds}` into other encoders.
    public func encode(to encoder: any Encoder) throws {
        if let impl = encoder as? EncoderImpl {
            try impl.encodeSingle { $0.writeTimestamp(self) }
            return
        }
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(seconds, forKey: .seconds)
        try container.encode(nanoseconds, forKey: .nanoseconds)
    }
}
