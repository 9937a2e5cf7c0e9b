public import Foundation

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
    /// - Parameter date: The date to convert.
    public init(_ date: Date) {
        // Split on the reference-date scale Date stores, so the whole seconds stay exact.
        let interval = date.timeIntervalSinceReferenceDate
        let whole = interval.rounded(.down)
        var nanos = ((interval - whole) * 1e9).rounded()
        var secs = Int64(whole) + Self.referenceOffset
        if nanos >= 1e9 {
            nanos -= 1e9
            secs += 1
        }
        self.seconds = secs
        self.nanoseconds = UInt32(nanos)
    }

    /// The nearest `Date`.
    public var date: Date {
        Date(timeIntervalSinceReferenceDate: Double(seconds - Self.referenceOffset) + Double(nanoseconds) / 1e9)
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
