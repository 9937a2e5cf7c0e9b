public import Foundation
public import JetbridgeProtocol

/// The limits ``StoreWriter/apply(_:at:limits:)`` holds one device to, checked against the `device_flights` counters
/// in the same transaction as the records (docs/STORE.md, "Per-device flight limits").
public struct DeviceFlightLimits: Hashable, Sendable {
    /// Records (orders and scans) the device may have first stored on one flight: new record ids only (a resend, or a
    /// higher revision of a stored order, adds nothing).
    public var recordsPerFlight: Int
    /// Distinct flights the device may have first stored a record on in the last 24 hours.
    public var flightsPerDay: Int

    public init(recordsPerFlight: Int, flightsPerDay: Int) {
        self.recordsPerFlight = recordsPerFlight
        self.flightsPerDay = flightsPerDay
    }

    /// No limit (the counters are still kept).
    public static let unlimited = DeviceFlightLimits(recordsPerFlight: .max, flightsPerDay: .max)
}

/// Each device's ``DeviceFlightLimits`` for one ``StoreWriter/apply(_:at:limits:)``.
///
/// `serve` builds it from its allow list (`devices.json`'s `limits`); the lookup runs on the store's thread, once per
/// device of a group, so it must not block.
public struct StoreLimits: Sendable {
    private let lookup: @Sendable (String) -> DeviceFlightLimits

    /// Limits from a function of the device id.
    public init(_ lookup: @escaping @Sendable (_ device: String) -> DeviceFlightLimits) {
        self.lookup = lookup
    }

    /// `devices[device]`, else `default`.
    public init(default defaultLimits: DeviceFlightLimits, devices: [String: DeviceFlightLimits] = [:]) {
        lookup = { devices[$0] ?? defaultLimits }
    }

    /// No device is limited (what ``StoreWriter/apply(_:at:)`` passes).
    public static let none = StoreLimits(default: .unlimited)

    /// The limits that hold for `device`.
    public func limits(for device: String) -> DeviceFlightLimits { lookup(device) }
}

/// Why ``StoreWriter/apply(_:at:limits:)`` did not store a batch: its device is past one of its flight limits. Nothing
/// of the batch was stored; the device sends it again after ``retryAfter`` (an ack `limited`, docs/PROTOCOL.md).
public struct BatchLimit: Hashable, Sendable {
    /// Which limit.
    public enum Kind: String, Hashable, Sendable {
        /// ``DeviceFlightLimits/recordsPerFlight``.
        case recordsPerFlight
        /// ``DeviceFlightLimits/flightsPerDay``.
        case flightsPerDay
    }

    public var kind: Kind
    /// The flight past its limit (``Kind/recordsPerFlight``), or the first new flight (``Kind/flightsPerDay``).
    public var flight: String
    /// What the device had before this batch: its records on ``flight``, or its flights of the last 24 hours.
    public var count: Int
    /// What this batch would add to ``count``: its new records on the flight, or its new flights.
    public var adding: Int
    /// The limit that holds for the device.
    public var limit: Int
    /// Seconds to wait before sending the batch again (1 … ``longestRetryAfter``).
    public var retryAfter: Double
    /// What happened, for people: names the device, the flight, the count and the limit.
    public var reason: String

    public init(kind: Kind, device: String, flight: String, count: Int, adding: Int, limit: Int, retryAfter: Double) {
        self.kind = kind
        self.flight = flight
        self.count = count
        self.adding = adding
        self.limit = limit
        self.retryAfter = retryAfter
        switch kind {
        case .recordsPerFlight:
            reason =
                "device \(device) has \(count) records on flight \(flight) and this batch adds \(adding) new; its "
                + "limit is \(limit) records per flight (raise recordsPerFlight in the allow list's limits)"
        case .flightsPerDay:
            reason =
                "device \(device) first stored records on \(count) flights in the last 24 h and this batch adds "
                + "\(adding) new (\(flight) first); its limit is \(limit) flights per day (raise flightsPerDay in the "
                + "allow list's limits)"
        }
    }

    /// The wait suggested past ``Kind/recordsPerFlight``: only an operator raising the limit lifts it.
    public static let recordsPerFlightRetryAfter: Double = 300
    /// The longest wait suggested past ``Kind/flightsPerDay`` (the protocol's bound on `retryAfter`, docs/PROTOCOL.md).
    public static let longestRetryAfter: Double = 3_600
    /// The window ``DeviceFlightLimits/flightsPerDay`` counts in.
    public static let window: TimeInterval = 86_400

    /// The `limited` ack for batch `first…last` of `device`.
    public func answer(device: String, first: UInt64, last: UInt64) -> Ack {
        Ack(device: device, first: first, last: last, status: .limited, reason: reason, retryAfter: retryAfter)
    }
}
