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

        enum CodingKeys: String, CodingKey, CaseIterable {
            case recordsPerFlight, recordsPerSecond, flightsPerDay, bytesPerSecond
        }

        /// Refuses a key it does not know (a misspelt limit would otherwise leave the default in force unseen).
        public init(from decoder: any Decoder) throws {
            do {
                try StrictKeys.check(decoder, known: CodingKeys.self)
            } catch let unknown as StrictKeys.UnknownKey {
                let device = decoder.codingPath.last?.stringValue ?? "?"
                throw AggregatorError(.dataError, "limits of '\(Validation.visible(device.prefix(60)))': \(unknown.message)")
            }
            let container = try decoder.container(keyedBy: CodingKeys.self)
            recordsPerFlight = try container.decodeIfPresent(Int.self, forKey: .recordsPerFlight)
            recordsPerSecond = try container.decodeIfPresent(Int.self, forKey: .recordsPerSecond)
            flightsPerDay = try container.decodeIfPresent(Int.self, forKey: .flightsPerDay)
            bytesPerSecond = try container.decodeIfPresent(Int.self, forKey: .bytesPerSecond)
        }

        func check(device: String) throws {
            for (name, value) in [
                ("recordsPerFlight", recordsPerFlight), ("recordsPerSecond", recordsPerSecond),
                ("flightsPerDay", flightsPerDay), ("bytesPerSecond", bytesPerSecond),
            ] {
                if let value, value < 1 {
                    throw AggregatorError(
                        .dataError, "limits of '\(device.prefix(60))': \(name) \(value) must be at least 1")
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

/// Holds each device to the rates of its ``DeviceLimits`` (records and bytes per second); owned by the network thread,
/// which asks it about every good batch before the batch is queued for the store.
///
/// It never reads the store (the flight limits are the store's, checked inside `apply`), and it needs only a batch's
/// record and byte counts: no copy of its records, no grouping by flight. Its table holds one token bucket per
/// device that sent recently: a bucket that has filled up again is dropped (a new one starts full, the same), so the
/// table is swept when it has grown to twice what the last sweep left, and it never holds more than
/// ``maximumBuckets`` (made-up device ids in insecure mode).
struct DeviceLimiter {
    /// Why a batch is refused for now, and when to send it again.
    struct Verdict: Equatable {
        var reason: String
        var retryAfter: Double
    }

    private struct Bucket {
        /// Records and bytes the device may still send at once.
        var records: Double
        var bytes: Double
        var at: ContinuousClock.Instant
        /// What the bucket holds when full, as its last batch set it (a batch larger than the burst raises it).
        var recordCapacity: Double
        var byteCapacity: Double
    }

    /// The allow list the limits come from.
    var allowlist: DeviceAllowlist
    private var buckets: [String: Bucket] = [:]
    /// The table's size at which the next sweep runs.
    private var sweepAt = DeviceLimiter.smallestSweep
    static let smallestSweep = 1_024
    /// The most buckets kept: past it, after a sweep, only the half that owe the longest refill stay (the others start
    /// full again).
    static let maximumBuckets = 100_000
    /// The longest wait a rate asks for, in seconds: as long as a flight's records limit asks for.
    static let longestRetryAfter = BatchLimit.recordsPerFlightRetryAfter

    init(allowlist: DeviceAllowlist) {
        self.allowlist = allowlist
    }

    /// Buckets held now (tests).
    var bucketCount: Int { buckets.count }

    /// Whether a batch of `records` records and `bytes` bytes from `device` may be queued now; takes its share of the
    /// device's rates if so.
    /// - Returns: `nil` to queue the batch, or why not (the rate it is past and when it fits).
    mutating func admit(device: String, records: Int, bytes: Int, now: ContinuousClock.Instant) -> Verdict? {
        let limits = allowlist.limits(for: device)
        let recordRate = Double(limits.recordsPerSecond)
        let byteRate = Double(limits.bytesPerSecond)
        let burst = Double(DeviceLimits.burstSeconds)
        // A single batch always fits a full bucket, however large (the data socket bounds a message's size).
        let recordCapacity = max(recordRate * burst, Double(records))
        let byteCapacity = max(byteRate * burst, Double(bytes))
        var bucket =
            buckets[device]
            ?? Bucket(
                records: recordCapacity, bytes: byteCapacity, at: now, recordCapacity: recordCapacity,
                byteCapacity: byteCapacity)
        let elapsed = max(0, (now - bucket.at).seconds)
        bucket.records = min(recordCapacity, bucket.records + recordRate * elapsed)
        bucket.bytes = min(byteCapacity, bucket.bytes + byteRate * elapsed)
        bucket.at = now
        bucket.recordCapacity = recordCapacity
        bucket.byteCapacity = byteCapacity
        let recordWait = (Double(records) - bucket.records) / recordRate
        let byteWait = (Double(bytes) - bucket.bytes) / byteRate
        if recordWait > 0 || byteWait > 0 {
            store(bucket, for: device, now: now)
            // A tenth of a second more than the wait, rounded up: the resend then fits. At most
            // ``longestRetryAfter``: a low rate against a large batch (1 record per second, 10,000 records) would ask
            // for hours, past what a device accepts (docs/PROTOCOL.md, "Bounds of an ack": it would ignore the ack
            // and resend on its ack timeout); the device asks again then, and its bucket has filled meanwhile.
            let wait = min(Self.longestRetryAfter, max(0.1, (max(recordWait, byteWait) * 10).rounded(.up) / 10))
            let reason =
                recordWait >= byteWait
                ? "device \(device) sends more than its limit of \(limits.recordsPerSecond) records per second"
                : "device \(device) sends more than its limit of \(limits.bytesPerSecond) bytes per second"
            return Verdict(reason: reason, retryAfter: wait)
        }
        bucket.records -= Double(records)
        bucket.bytes -= Double(bytes)
        store(bucket, for: device, now: now)
        return nil
    }

    private mutating func store(_ bucket: Bucket, for device: String, now: ContinuousClock.Instant) {
        if buckets.updateValue(bucket, forKey: device) == nil, buckets.count >= sweepAt { sweep(now: now) }
    }

    /// Drops the buckets that are full again by `now` (nothing owed: each has refilled to what its last batch made it
    /// hold, so a new one, starting full, lets nothing through sooner). Past ``maximumBuckets`` (a flood of made-up
    /// device ids, in insecure mode), it keeps the half that owe the longest refill: a device that sent far past its
    /// rate keeps its debt, and those forgiven owed least. (Before, the whole table was dropped, and every device
    /// could send a full burst again at once.)
    private mutating func sweep(now: ContinuousClock.Instant) {
        let allowlist = allowlist
        let owed = buckets.compactMap { device, bucket -> (device: String, seconds: Double)? in
            let seconds = Self.secondsToFill(bucket, allowlist.limits(for: device), now: now)
            return seconds > 0 ? (device, seconds) : nil
        }
        // At the bound, at most half stay, so the next sweep is at least that many new devices away (keeping all but
        // a few would sweep again at almost every new device).
        let kept =
            buckets.count >= Self.maximumBuckets && owed.count > Self.maximumBuckets / 2
            ? Array(owed.sorted { $0.seconds > $1.seconds }.prefix(Self.maximumBuckets / 2)) : owed
        let table = buckets
        buckets = Dictionary(uniqueKeysWithValues: kept.compactMap { kept in table[kept.device].map { (kept.device, $0) } })
        // Never past the bound: a sweep runs at it at the latest (before, a table of 65,537 owing buckets grew to
        // 131,072 before the next sweep).
        sweepAt = min(Self.maximumBuckets, max(Self.smallestSweep, buckets.count * 2))
    }

    /// How long `bucket` takes to fill up again from `now` at its device's rates (0 or less: it is full).
    private static func secondsToFill(_ bucket: Bucket, _ limits: DeviceLimits, now: ContinuousClock.Instant) -> Double {
        let elapsed = max(0, (now - bucket.at).seconds)
        return max(
            (bucket.recordCapacity - bucket.records) / Double(limits.recordsPerSecond),
            (bucket.byteCapacity - bucket.bytes) / Double(limits.bytesPerSecond)) - elapsed
    }
}
