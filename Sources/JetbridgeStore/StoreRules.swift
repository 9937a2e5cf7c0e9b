import Foundation
import JetbridgeModel
import JetbridgeProtocol
import SystemSupport

/// What a round of ``StoreReader/storeInRounds(_:round:)`` decided about a batch it does not store.
enum BatchVerdict: Hashable, Sendable {
    /// Refused by a rule that needs the store (another device's order, a flight's second currency).
    case rejected(BatchRejection)
    /// Past one of its device's flight limits.
    case limited(BatchLimit)
}

/// A device and a flight: one row of `device_flights`.
struct DeviceFlight: Hashable, Sendable {
    var device: String
    var flight: String
}

/// The pairs whose rows a summary read in the last ``lifetime``, with the digest the rows gave: a summary that
/// differs from a valid kept digest still equal to it is answered from the kept digest, and the rows are read again
/// only once the read is older. Before, one stolen key asking 20 mismatching summaries a second of a 100,000-record
/// flight made the store thread read 2 million rows a second, and every device's commits waited behind it. A kept
/// digest that changes (an `apply` adds to it) or goes stale (a row changed or deleted: the triggers) is not the one
/// noted, so the rows are read at once; a row inserted by hand, which no trigger sees, is found within ``lifetime``.
///
/// Thread-safe; at most ``capacity`` pairs (then it starts again).
final class RowReadDigests: Sendable {
    static let capacity = 10_000
    static let lifetime: Duration = .seconds(10)
    private let read = Locked([DeviceFlight: (summary: DeliverySummary, at: ContinuousClock.Instant)]())

    /// Whether the rows of `pair` were read in the last ``lifetime`` and gave `kept`.
    func wereRead(_ pair: DeviceFlight, giving kept: DeliverySummary, now: ContinuousClock.Instant = .now) -> Bool {
        read.withLock { read in
            guard let entry = read[pair] else { return false }
            return entry.summary == kept && now - entry.at < Self.lifetime
        }
    }

    /// The rows of `pair` were read and gave `summary` (now its kept digest).
    func note(_ pair: DeviceFlight, _ summary: DeliverySummary, now: ContinuousClock.Instant = .now) {
        read.withLock { read in
            if read.count >= Self.capacity, read[pair] == nil { read = [:] }
            read[pair] = (summary, now)
        }
    }
}

/// What one round adds to one row of `device_flights`: its new records, and the sum of their element hashes modulo
/// 2⁶⁴ (``DeliverySummary``), kept as two 32-bit halves' sums so that neither engine's SQL ever wraps around (docs/STORE.md,
/// "Kept digests").
struct FlightIncrement: Sendable {
    var pair: DeviceFlight
    var records = 0
    var digest: UInt64 = 0

    /// The digest's high 32 bits.
    var digestHigh: Int64 { Int64(digest >> 32) }
    /// The digest's low 32 bits.
    var digestLow: Int64 { Int64(digest & 0xffff_ffff) }
}

/// What raising stored orders' revisions in one transaction does to the kept digests (docs/STORE.md, "Kept
/// digests"): each raised order leaves its old `(id, revision)` in its old (device, flight) and brings the new one to
/// its new flight (the same, unless the correction moved it). Per pair: rows held and the two halves' sums to add,
/// negative for what left.
struct RevisedDigests {
    struct Change: Equatable {
        var held = 0
        var high: Int64 = 0
        var low: Int64 = 0
    }

    private(set) var changes: [DeviceFlight: Change] = [:]

    var isEmpty: Bool { changes.isEmpty }

    mutating func revise(
        order id: UUID, device: String, from old: (flight: String, revision: Int), to new: (flight: String, revision: Int)
    ) {
        let removed = DeliverySummary.hash(order: id, revision: old.revision)
        let added = DeliverySummary.hash(order: id, revision: new.revision)
        changes[DeviceFlight(device: device, flight: old.flight), default: Change()].held -= 1
        changes[DeviceFlight(device: device, flight: old.flight)]!.high -= Int64(removed >> 32)
        changes[DeviceFlight(device: device, flight: old.flight)]!.low -= Int64(removed & 0xffff_ffff)
        changes[DeviceFlight(device: device, flight: new.flight), default: Change()].held += 1
        changes[DeviceFlight(device: device, flight: new.flight)]!.high += Int64(added >> 32)
        changes[DeviceFlight(device: device, flight: new.flight)]!.low += Int64(added & 0xffff_ffff)
    }
}

extension DeliverySummary {
    /// A kept digest as `device_flights` holds it: the count, and two sums whose `(high << 32) + low` modulo 2⁶⁴ is
    /// the digest (each sum of 32-bit halves stays far below 2⁶³ for any number of rows a flight can hold).
    init(count: Int, high: Int64, low: Int64) {
        self.init(count: count, digest: (UInt64(bitPattern: high) << 32) &+ UInt64(bitPattern: low))
    }

    /// The digest's high 32 bits, as a kept digest starts.
    var digestHigh: Int64 { Int64(digest >> 32) }
    /// The digest's low 32 bits.
    var digestLow: Int64 { Int64(digest & 0xffff_ffff) }
}

/// Per batch of a group, its records new to the store per flight (what the flight limits count), with little work
/// per record: each record's flight is numbered once, as a pass first walks the group (``note(_:_:flight:)``), and a
/// new record adds to a flat array. The numbering looks a flight up by its bytes in a small table of its own: through
/// `Dictionary<String, _>` (SipHash and a `String` comparison per record) the tally cost about 860 instructions per
/// record in `store-benchmark`, 5 % of `apply`.
struct NewRecordTally {
    /// The flights, by number.
    private(set) var flights: [String] = []
    /// Where each batch's records start in ``recordFlights``.
    private let offsets: [Int]
    /// Each record's flight number, batch after batch (-1: not noted, a skipped batch).
    private var recordFlights: [Int32]
    /// Batch × flight → new records, once ``startCounting()`` has sized it.
    private var counts: [Int] = []
    /// Batch × flight → the sum of the new records' element hashes modulo 2⁶⁴ (``DeliverySummary``): what the round
    /// adds to the kept digests of `device_flights` (docs/STORE.md, "Kept digests").
    private var digests: [UInt64] = []
    private var numbering = FlightNumbering()

    init(_ batches: [IncomingBatch]) {
        var offsets: [Int] = []
        offsets.reserveCapacity(batches.count)
        var total = 0
        for batch in batches {
            offsets.append(total)
            total += batch.records.count
        }
        self.offsets = offsets
        recordFlights = [Int32](repeating: -1, count: total)
    }

    /// Notes record `i` of batch `b`'s flight, and answers its number.
    @discardableResult
    mutating func note(_ b: Int, _ i: Int, flight: String) -> Int {
        let number = numbering.number(of: flight, adding: &flights)
        recordFlights[offsets[b] + i] = number
        return Int(number)
    }

    /// The number ``note(_:_:flight:)`` gave record `i` of batch `b`'s flight.
    func flightNumber(_ b: Int, _ i: Int) -> Int {
        Int(recordFlights[offsets[b] + i])
    }

    /// Sizes the counts, once every record of the batches to store is noted.
    mutating func startCounting() {
        counts = [Int](repeating: 0, count: offsets.count * flights.count)
        digests = [UInt64](repeating: 0, count: offsets.count * flights.count)
    }

    /// Counts record `i` of batch `b` as new to the store, with its element hash (``DeliverySummary/hash(of:)``).
    mutating func countNew(_ b: Int, _ i: Int, hash: UInt64) {
        let slot = b * flights.count + Int(recordFlights[offsets[b] + i])
        counts[slot] += 1
        digests[slot] &+= hash
    }

    /// Per batch, its new records per flight (flights with none left out).
    var newRecords: [[String: Int]] { perFlight(counts) }

    /// Per batch, the sum of its new records' element hashes per flight (flights with no new record left out).
    var newDigests: [[String: UInt64]] { perFlight(digests) }

    /// Per batch, `values` (batch × flight) by flight, for the flights the batch has new records on.
    private func perFlight<Value>(_ values: [Value]) -> [[String: Value]] {
        offsets.indices.map { b in
            var perFlight: [String: Value] = [:]
            for (f, flight) in flights.enumerated() where counts[b * flights.count + f] > 0 {
                perFlight[flight] = values[b * flights.count + f]
            }
            return perFlight
        }
    }
}

/// Numbers distinct flight ids in order of first sight: an open-addressing table keyed by a flight's UTF-8 bytes held
/// in three words (a valid flight id has 14–18 bytes; a longer text goes through a `Dictionary`).
struct FlightNumbering {
    private struct Key: Equatable {
        var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0

        static func == (a: Key, b: Key) -> Bool {
            a.count == b.count && a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2
        }

        var slotHash: UInt64 {
            (words.0 &* 0x9E37_79B9_7F4A_7C15) ^ (words.1 &* 0xC2B2_AE3D_27D4_EB4F)
                ^ (words.2 &* 0x1656_67B1_9E37_79F9) ^ UInt64(count)
        }
    }

    /// Flight number + 1 per slot (0: empty); a power of two, at most half full.
    private var slots = [Int32](repeating: 0, count: 64)
    private var keys: [Key] = []
    private var long: [String: Int32] = [:]

    /// `flight`'s number, appending it to `flights` when it is new.
    mutating func number(of flight: String, adding flights: inout [String]) -> Int32 {
        var key = Key()
        let fits =
            flight.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
                guard bytes.count <= 24 else { return false }
                key.count = bytes.count
                withUnsafeMutableBytes(of: &key.words) { $0.copyMemory(from: UnsafeRawBufferPointer(bytes)) }
                return true
            } ?? false
        guard fits else {
            if let known = long[flight] { return known }
            let number = Int32(flights.count)
            long[flight] = number
            flights.append(flight)
            return number
        }
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: key.slotHash >> 7) & mask
        while slots[slot] != 0 {
            let number = slots[slot] - 1
            if keys[Int(number)] == key { return number }
            slot = (slot + 1) & mask
        }
        let number = Int32(flights.count)
        flights.append(flight)
        while keys.count < flights.count - 1 { keys.append(Key(count: -1)) }  // numbers given to long texts
        keys.append(key)
        slots[slot] = number + 1
        if keys.count * 2 > slots.count { grow() }
        return number
    }

    private mutating func grow() {
        slots = [Int32](repeating: 0, count: slots.count * 2)
        let mask = slots.count - 1
        for (number, key) in keys.enumerated() where key.count >= 0 {
            var slot = Int(truncatingIfNeeded: key.slotHash >> 7) & mask
            while slots[slot] != 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(number) + 1
        }
    }
}

/// What the `device_flights` counters held before a round's transaction wrote to them, for
/// ``StoreReader/limitVerdicts(_:skipping:newRecords:refusal:counters:limits:now:)``.
struct FlightCounters {
    /// Records first stored per device and flight, for the pairs the round adds to; a pair absent here has no row (its
    /// device has stored nothing on that flight).
    var records: [DeviceFlight: Int] = [:]
    /// For each device the round adds a flight for: its flights first stored in the last 24 hours, and when the
    /// oldest of them was (Unix seconds; nil when there is none).
    var window: [String: (flights: Int, oldest: Double?)] = [:]
}

/// What both engines do the same way around their own SQL: the rounds of ``StoreWriter/apply(_:at:limits:)`` (a
/// refused or limited batch rolled back and the group stored again without it), the flight limits' verdicts, a
/// seat's receipt from its rows, and the flight walk of ``StoreReader/flightReports(flight:)``.
extension StoreReader {
    /// Stores a group in rounds until one decides about no more batches, and returns every batch's outcome.
    ///
    /// A round that finds a batch it must not store (refused by a rule, or past a flight limit) rolls its transaction
    /// back, and the group is stored again without that batch. Only the verdict on the earliest such batch is
    /// certain (later batches' verdicts may depend on what it would have stored), so it goes, with the later batches
    /// that are past a limit whatever the batches before them do (``limitVerdicts(_:skipping:newRecords:refusal:
    /// counters:limits:now:)``): a device at its limit sending many batches costs one round, not one per batch.
    /// Refusals are rare, and they cost a round each.
    /// - Parameters:
    ///   - batches: The group, in arrival order.
    ///   - round: One transaction that stores `batches` but those in `skipping`, committed only when it returns no
    ///     verdicts.
    /// - Returns: The last round's outcomes, with the skipped batches' outcomes carrying their rejection or limit.
    /// - Throws: What `round` throws; then nothing was stored.
    static func storeInRounds(
        _ batches: [IncomingBatch],
        round: (_ skipping: [Int: BatchVerdict]) throws -> (outcomes: [BatchOutcome], verdicts: [Int: BatchVerdict])
    ) throws -> [BatchOutcome] {
        var skipped: [Int: BatchVerdict] = [:]
        while true {
            let pass = try round(skipped)
            guard !pass.verdicts.isEmpty else {
                var outcomes = pass.outcomes
                for (index, verdict) in skipped {
                    switch verdict {
                    case .rejected(let rejection): outcomes[index].rejection = rejection
                    case .limited(let limit): outcomes[index].limit = limit
                    }
                }
                return outcomes
            }
            skipped.merge(pass.verdicts) { old, _ in old }
        }
    }

    /// `found`, or the refusal of record `i` of batch `b` when that comes first in arrival order: a pass keeps the
    /// earliest, the only one certain (``storeInRounds(_:round:)``).
    static func earliest(
        _ found: SQLiteStore.Refusal?, _ b: Int, _ i: Int, _ error: ValidationError, in batches: [IncomingBatch]
    ) -> SQLiteStore.Refusal? {
        if let found, (found.batch, found.rejection.index) <= (b, i) { return found }
        let header = batches[b].header
        return (b, BatchRejection(status: .rejected, header: header, index: i, reason: "record \(i): \(error)"))
    }

    /// The pairs a round adds records to, how many and their hashes' sum: each device's new records per flight summed
    /// over the batches not skipped (what the round adds to `device_flights`), in (device, flight) order.
    static func counterIncrements(
        _ batches: [IncomingBatch], skipping: [Int: BatchVerdict], newRecords: [[String: Int]],
        newDigests: [[String: UInt64]]
    ) -> [FlightIncrement] {
        var sums: [DeviceFlight: FlightIncrement] = [:]
        for (b, flights) in newRecords.enumerated() where skipping[b] == nil {
            for (flight, n) in flights where n > 0 {
                let pair = DeviceFlight(device: batches[b].header.device, flight: flight)
                sums[pair, default: FlightIncrement(pair: pair)].records += n
                sums[pair]!.digest &+= newDigests[b][flight] ?? 0
            }
        }
        // Device and flight ids are ASCII (docs/PROTOCOL.md), so String order is byte order, as `COLLATE "C"` sorts.
        return sums.values.sorted { ($0.pair.device, $0.pair.flight) < ($1.pair.device, $1.pair.flight) }
    }

    /// The verdicts a round is certain of: the earliest batch (in arrival order) that would take its device past a
    /// flight limit or is refused by a rule (`refusal`), and every later batch past a limit whatever the batches
    /// between do.
    ///
    /// Batches are taken in arrival order, each counted on top of the ones before it: a batch is past
    /// ``DeviceFlightLimits/recordsPerFlight`` when its device's records on a flight, with the new records of this
    /// batch and the earlier ones, would exceed it; past ``DeviceFlightLimits/flightsPerDay`` when the flights its
    /// device first stored in the last 24 hours, with the flights this batch and the earlier ones add, would. New
    /// records are new ids (a resend or a higher revision adds nothing). Limits come first: a batch past one is
    /// limited even when one of its records would be refused (it is refused when it is sent again within them).
    ///
    /// After the earliest verdict, a batch is judged with only what the batches before that verdict add (they are
    /// stored in every later round, and add the same) and what it adds itself: removing batches between can only
    /// leave it more to add, so a verdict then holds in every later round. A device at its limit sending many
    /// batches costs one round.
    /// - Parameters:
    ///   - newRecords: Per batch, its records new to the store in this round, per flight.
    ///   - refusal: The earliest batch this round refused by a rule, if any.
    ///   - counters: What `device_flights` held before the transaction, for the pairs the round adds to.
    /// - Returns: The batches not to store, and why; empty when the round may commit.
    static func limitVerdicts(
        _ batches: [IncomingBatch], skipping: [Int: BatchVerdict], newRecords: [[String: Int]],
        refusal: SQLiteStore.Refusal?, counters: FlightCounters, limits: StoreLimits, now: Date
    ) -> [Int: BatchVerdict] {
        var verdicts: [Int: BatchVerdict] = [:]
        // Past the earliest verdict, `records` and `windowFlights` stay what the batches before it made them.
        var decided = false
        var records = counters.records
        var windowFlights = counters.window.mapValues(\.flights)
        // Pairs earlier batches of this round added records to: not a new flight for the batches after them.
        var touched: Set<DeviceFlight> = []
        var limitsByDevice: [String: DeviceFlightLimits] = [:]
        for b in batches.indices where skipping[b] == nil {
            let device = batches[b].header.device
            let flights = newRecords[b].filter { $0.value > 0 }.sorted { $0.key < $1.key }
            defer { for (flight, _) in flights { touched.insert(DeviceFlight(device: device, flight: flight)) } }
            let limit: DeviceFlightLimits
            if flights.isEmpty {
                limit = .unlimited  // nothing new: a resend never counts
            } else if let known = limitsByDevice[device] {
                limit = known
            } else {
                limit = limits.limits(for: device)
                limitsByDevice[device] = limit
            }
            var verdict: BatchLimit?
            for (flight, n) in flights {
                let pair = DeviceFlight(device: device, flight: flight)
                let have = records[pair] ?? 0
                if n > limit.recordsPerFlight - have {
                    verdict = BatchLimit(
                        kind: .recordsPerFlight, device: device, flight: flight, count: have, adding: n,
                        limit: limit.recordsPerFlight, retryAfter: BatchLimit.recordsPerFlightRetryAfter)
                    break
                }
            }
            let newFlights = flights.map(\.key).filter {
                let pair = DeviceFlight(device: device, flight: $0)
                return counters.records[pair] == nil && !touched.contains(pair)
            }
            let adding = newFlights.count
            if verdict == nil, adding > 0 {
                let window = counters.window[device] ?? (0, nil)
                let have = windowFlights[device] ?? 0
                if adding > limit.flightsPerDay - have {
                    // The oldest of the day's flights leaves the window first; with none there, waiting does not help.
                    let wait = window.oldest.map { $0 + BatchLimit.window - now.timeIntervalSince1970 }
                    verdict = BatchLimit(
                        kind: .flightsPerDay, device: device, flight: newFlights.first!, count: have, adding: adding,
                        limit: limit.flightsPerDay,
                        retryAfter: min(max(1, (wait ?? .infinity).rounded(.up)), BatchLimit.longestRetryAfter))
                }
            }
            if let verdict {
                verdicts[b] = .limited(verdict)
                decided = true
            } else if !decided, let refusal, refusal.batch == b {
                verdicts[b] = .rejected(refusal.rejection)
                decided = true
            } else if !decided {
                for (flight, n) in flights { records[DeviceFlight(device: device, flight: flight), default: 0] += n }
                windowFlights[device, default: 0] += adding
            }
        }
        return verdicts
    }

    /// The outcomes of a pass that stored every batch but the `skipped` ones: a placeholder for those (the rerun puts
    /// the rejection or limit there; `limited` counts each limited one), and for the others their `new` records, the
    /// rest duplicates, each passed to `count` first (the devices' statistics). Both in arrival order.
    static func outcomes(
        of batches: [IncomingBatch], new newCounts: [Int], skipping skipped: [Int: BatchVerdict],
        count: (_ header: BatchHeader, _ records: Int, _ new: Int, _ duplicates: Int) throws -> Void,
        limited: (_ header: BatchHeader, _ limit: BatchLimit) throws -> Void
    ) rethrows -> [BatchOutcome] {
        var outcomes: [BatchOutcome] = []
        outcomes.reserveCapacity(batches.count)
        for (b, (batch, new)) in zip(batches, newCounts).enumerated() {
            let header = batch.header
            if let verdict = skipped[b] {
                if case .limited(let limit) = verdict { try limited(header, limit) }
                outcomes.append(
                    BatchOutcome(device: header.device, first: header.first, last: header.last, new: 0, duplicates: 0))
                continue
            }
            let duplicates = batch.records.count - new
            try count(header, batch.records.count, new, duplicates)
            outcomes.append(
                BatchOutcome(
                    device: header.device, first: header.first, last: header.last, new: new, duplicates: duplicates))
        }
        return outcomes
    }

    /// One seat's receipt from its orders, or nil after passing `failed` why it cannot be made (orders in two
    /// currencies, a total that overflows, an order that no longer decodes): that seat is left out, the others go on.
    static func makeReceipt(
        flight: FlightID, seat: Seat, orders: Result<[Order], any Error>, failed: (FlightID, Seat, any Error) -> Void
    ) -> Receipt? {
        do {
            return try Receipt(flight: flight, seat: seat, orders: orders.get())
        } catch {
            failed(flight, seat, error)
            return nil
        }
    }

    /// Groups `seat, record` rows that come in seat order by seat: each seat's decoded orders, or the error of the
    /// first of its orders that does not decode (the other seats go on).
    /// - Parameters:
    ///   - next: The next row, nil after the last.
    ///   - decode: Decodes one stored order.
    ///   - body: Takes each seat's orders, in seat order.
    static func forEachSeat(
        rows next: () throws -> (seat: String, record: Data)?, decode: (Data) throws -> Order,
        _ body: (String, Result<[Order], any Error>) throws -> Void
    ) throws {
        var current: String?
        var orders: [Order] = []
        var failure: (any Error)?
        func finishSeat() throws {
            guard let current else { return }
            try body(current, failure.map { .failure($0) } ?? .success(orders))
        }
        while let (seat, bytes) = try next() {
            if seat != current {
                try finishSeat()
                current = seat
                orders.removeAll(keepingCapacity: true)
                failure = nil
            }
            guard failure == nil else { continue }
            do { orders.append(try decode(bytes)) } catch { failure = error }
        }
        try finishSeat()
    }

    /// Emits the flights that have orders only and come before `group`'s flight, then `group` with its bags; with no
    /// `group` (after the last), every order-only flight left. Called for each bag group in flight order, then once
    /// with nil, it gives every flight one report, in flight order.
    /// - Parameters:
    ///   - group: The next flight with bags, and its bags.
    ///   - orderFlights: The flights that have orders, sorted.
    ///   - next: The first of `orderFlights` not emitted yet (0 before the first call).
    ///   - emit: Makes one flight's report.
    static func emitFlights(
        through group: (flight: FlightID, bags: [BagState])?, orderFlights: [String], next: inout Int,
        _ emit: (FlightID, [BagState]) throws -> Void
    ) throws {
        guard let (bagFlight, bags) = group else {
            for text in orderFlights[next...] { try emit(try flightID(text), []) }
            next = orderFlights.count
            return
        }
        while next < orderFlights.count, orderFlights[next] < bagFlight.rawValue {
            try emit(try flightID(orderFlights[next]), [])
            next += 1
        }
        if next < orderFlights.count, orderFlights[next] == bagFlight.rawValue { next += 1 }
        try emit(bagFlight, bags)
    }
}
