import Foundation
import JetbridgeModel
public import JetbridgeStore
import SystemSupport

/// What one device may send (issue 14): enough for any real flight, small enough that a stolen key cannot flood the
/// ground. Past a limit a batch is answered `limited` with a `retryAfter`, stored nowhere, and counted; it is never
/// rejected, set aside or dropped (docs/PROTOCOL.md).
///
/// The rates (records and bytes per second) are held on the network thread, before a batch is queued; the flight
/// limits (records per flight, flights per day) by the store, inside `apply` in the same transaction as the records
/// (``flightLimits``, ``DeviceAllowlist/storeLimits``).
public struct DeviceLimits: Hashable, Sendable {
    /// Distinct records (orders and scans) one device may have stored for one flight.
    public var recordsPerFlight: Int
    /// Records per second one device may send, on average; a burst of ``burstSeconds`` worth is allowed.
    public var recordsPerSecond: Int
    /// Distinct flights one device may first store records on in 24 hours.
    public var flightsPerDay: Int
    /// Bytes of batches (both frames) per second one device may send, on average; a burst of ``burstSeconds`` worth
    /// is allowed, and a single batch always fits (as for ``recordsPerSecond``).
    public var bytesPerSecond: Int

    /// 100,000 records per flight (a wide-body flight's sales and bag scans are a few thousand), 10,000 records/s (a
    /// device that was offline for days drains in seconds), 500 flights a day (a cart serves a handful, a gate or
    /// bag-room scanner at a hub a couple of hundred departures) and 2 MiB/s (10,000 records/s of ordinary orders
    /// and scans, 150–250 bytes each; a stolen key sending maximum-size orders is held to it rather than to its
    /// record count).
    public static let defaults = DeviceLimits(
        recordsPerFlight: 100_000, recordsPerSecond: 10_000, flightsPerDay: defaultFlightsPerDay,
        bytesPerSecond: defaultBytesPerSecond)
    /// ``defaults``' flights per day.
    public static let defaultFlightsPerDay = 500
    /// ``defaults``' bytes per second: 2 MiB.
    public static let defaultBytesPerSecond = 2 << 20
    /// How many seconds of the rate a device may send at once.
    public static let burstSeconds = 10

    public init(
        recordsPerFlight: Int, recordsPerSecond: Int, flightsPerDay: Int = DeviceLimits.defaultFlightsPerDay,
        bytesPerSecond: Int = DeviceLimits.defaultBytesPerSecond
    ) {
        self.recordsPerFlight = recordsPerFlight
        self.recordsPerSecond = recordsPerSecond
        self.flightsPerDay = flightsPerDay
        self.bytesPerSecond = bytesPerSecond
    }

    /// The limits the store holds the device to in `apply` (records per flight, flights per day).
    public var flightLimits: DeviceFlightLimits {
        DeviceFlightLimits(recordsPerFlight: recordsPerFlight, flightsPerDay: flightsPerDay)
    }

    /// Settings for one device in the allow list; a missing one keeps the value beneath it.
    public struct Override: Codable, Hashable, Sendable {
        public var recordsPerFlight: Int?
        public var recordsPerSecond: Int?
        public var flightsPerDay: Int?
        public var bytesPerSecond: Int?

        public init(
            recordsPerFlight: Int? = nil, recordsPerSecond: Int? = nil, flightsPerDay: Int? = nil,
            bytesPerSecond: Int? = nil
        ) {
            self.recordsPerFlight = recordsPerFlight
            self.recordsPerSecond = recordsPerSecond
            self.flightsPerDay = flightsPerDay
            self.bytesPerSecond = bytesPerSecond
        }

        func check(device: String) throws {
            for (name, value) in [
                ("recordsPerFlight", recordsPerFlight), ("recordsPerSecond", recordsPerSecond),
                ("flightsPerDay", flightsPerDay), ("bytesPerSecond", bytesPerSecond),
            ] {
                if let value, value < 1 {
                    throw AggregatorError(
                        .badConfiguration, "limits of '\(device.prefix(60))': \(name) \(value) must be at least 1")
                }
            }
        }
    }

    func applying(_ override: Override?) -> DeviceLimits {
        guard let override else { return self }
        return DeviceLimits(
            recordsPerFlight: override.recordsPerFlight ?? recordsPerFlight,
            recordsPerSecond: override.recordsPerSecond ?? recordsPerSecond,
            flightsPerDay: override.flightsPerDay ?? flightsPerDay,
            bytesPerSecond: override.bytesPerSecond ?? bytesPerSecond)
    }
}

/// Holds each device to its ``DeviceLimits``; owned by the network thread, which asks it about every good batch
/// before the batch is queued for the store.
struct DeviceLimiter {
    /// Why a batch is refused for now, and when to send it again.
    struct Verdict: Equatable {
        var reason: String
        var retryAfter: Double
    }

    private struct Bucket {
        var tokens: Double
        var at: ContinuousClock.Instant
    }

    private struct Pair: Hashable {
        var device: String
        var flight: String
    }

    /// The allow list the limits come from.
    var allowlist: DeviceAllowlist
    private var buckets: [String: Bucket] = [:]
    /// Records accepted per device and flight: the store's count when first seen, plus what was queued since (a resend
    /// counts again, so this errs high; it is recounted from the store before a batch is refused for it).
    private var perFlight: [Pair: Int] = [:]
    private var recountedAt: [Pair: ContinuousClock.Instant] = [:]
    /// How long a recount from the store stays good: a device at its limit must not cost a count per batch.
    static let recountInterval: Duration = .seconds(5)
    /// The wait suggested to a device that reached a flight's limit: the operator has to raise it.
    static let flightLimitRetryAfter = 300.0

    init(allowlist: DeviceAllowlist) {
        self.allowlist = allowlist
    }

    /// Whether `records` from `device` may be stored now; takes their share of the limits if so.
    /// - Parameters:
    ///   - count: The store's count of `device`'s records on a flight.
    ///   - unstored: How many of some records the store does not have yet (a resend of stored records adds none).
    /// - Returns: `nil` to store the batch, or why not.
    mutating func admit(
        device: String, records: [Record], now: ContinuousClock.Instant, count: (String, String) -> Int,
        unstored: ([Record]) -> Int
    ) -> Verdict? {
        let limits = allowlist.limits(for: device)
        var perBatch: [String: [Record]] = [:]
        for record in records { perBatch[record.flight.rawValue, default: []].append(record) }
        var exact: [String: Int] = [:]
        for (flight, onFlight) in perBatch {
            let pair = Pair(device: device, flight: flight)
            let known = perFlight[pair] ?? count(device, flight)
            perFlight[pair] = known
            guard known + onFlight.count > limits.recordsPerFlight else { continue }
            // Over by the estimate: count exactly, what is stored (at most every few seconds) and what is new.
            if recountedAt[pair].map({ now - $0 >= Self.recountInterval }) ?? true {
                recountedAt[pair] = now
                perFlight[pair] = count(device, flight)
            }
            let new = unstored(onFlight)
            if perFlight[pair]! + new <= limits.recordsPerFlight {
                exact[flight] = new
                continue
            }
            return Verdict(
                reason:
                    "device \(device) has \(perFlight[pair]!) records on flight \(flight); its limit is \(limits.recordsPerFlight) records per flight (raise it in the allow list's limits)",
                retryAfter: Self.flightLimitRetryAfter)
        }
        let rate = Double(limits.recordsPerSecond)
        let capacity = max(rate * Double(DeviceLimits.burstSeconds), Double(records.count))
        var bucket = buckets[device] ?? Bucket(tokens: capacity, at: now)
        let elapsed = now - bucket.at
        bucket.tokens = min(
            capacity,
            bucket.tokens + rate * elapsed.seconds)
        bucket.at = now
        let needed = Double(records.count)
        guard bucket.tokens >= needed else {
            buckets[device] = bucket
            let wait = ((needed - bucket.tokens) / rate * 10).rounded(.up) / 10
            return Verdict(
                reason:
                    "device \(device) sends more than its limit of \(limits.recordsPerSecond) records per second",
                retryAfter: max(0.1, wait))
        }
        bucket.tokens -= needed
        buckets[device] = bucket
        for (flight, onFlight) in perBatch {
            perFlight[Pair(device: device, flight: flight), default: 0] += exact[flight] ?? onFlight.count
        }
        return nil
    }
}
