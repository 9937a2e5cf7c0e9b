public import Foundation
import JetbridgeModel
public import JetbridgeProtocol
import NIOCore
import PostgresNIO

// The statements of one `PostgresStore.apply`: each table's rows bound as arrays and expanded by `unnest`, so that a
// group of batches costs a handful of round trips (flights, orders, scans, devices, receipt marks) instead of one per
// row. A 40,000-record group is about a dozen statements (savepoints included); one round trip per row cost ~45,000 (store-benchmark,
// docs/BENCHMARKS.md, "PostgreSQL store").
//
// The per-record verdicts are the per-row engine's: each table's rows of a round go in id order, and an id that comes
// more than once in a group (a resend, a revision and its correction) goes in several rounds, the k-th occurrence in
// the k-th (see ``PostgresStore/rounds(_:)``), so each occurrence meets the row its predecessor left, exactly as one
// statement per row did. A round of orders asks which of its ids are stored, then inserts only the new rows with a
// plain `INSERT` and raises only the higher revisions; a round of scans is inserted with a plain `INSERT` at once: a
// speculative `INSERT … ON CONFLICT` per row cost about a third of PostgreSQL's CPU per record (issue 29). A plain
// insert fails on an id stored before or by another aggregator meanwhile (23505); each round has a savepoint to fall
// back to (``PostgresStore/writeOrders(_:of:owners:firstRound:)``, ``PostgresStore/writeScans(_:of:firstRound:)``).

extension PostgresStore {
    /// `rows`, sorted by id then arrival, split into rounds: round k holds the k-th occurrence of each id, still in id
    /// order. Almost every group is one round.
    static func rounds(_ rows: [PendingRow]) -> [[PendingRow]] {
        var rounds: [[PendingRow]] = []
        var occurrence = 0
        for (n, row) in rows.enumerated() {
            if n > 0, rows[n - 1].high == row.high, rows[n - 1].low == row.low {
                occurrence += 1
            } else {
                occurrence = 0
            }
            if occurrence == rounds.count { rounds.append([]) }
            rounds[occurrence].append(row)
        }
        return rounds
    }

    /// The columns of one round of orders (ids distinct, in id order), bound as arrays.
    struct OrderColumns {
        var ids: [UUID] = []
        var revisions: [Int] = []
        var flights: [String] = []
        var seats: [String] = []
        var devices: [String] = []
        var records: [Data] = []

        init(_ rows: some Collection<PendingRow>, of batches: [IncomingBatch]) {
            ids.reserveCapacity(rows.count)
            revisions.reserveCapacity(rows.count)
            flights.reserveCapacity(rows.count)
            seats.reserveCapacity(rows.count)
            devices.reserveCapacity(rows.count)
            records.reserveCapacity(rows.count)
            for row in rows {
                let incoming = batches[Int(row.batch)].records[Int(row.index)]
                guard case .order(let order) = incoming.record else { continue }
                ids.append(order.id)
                revisions.append(order.revision)
                flights.append(order.flight.rawValue)
                seats.append(order.seat.rawValue)
                devices.append(order.device)
                records.append(incoming.bytes)
            }
        }
    }

    /// Locks the stored orders among `ids` in id order and answers each one's revision, owning device and flight. The lock
    /// makes the answer the row's latest committed version (a row another transaction was changing is read once that
    /// one has ended) and keeps it so until the commit: the raise that follows changes exactly the rows it plans to.
    static func lockOrders(_ ids: [UUID]) -> PostgresQuery {
        "SELECT id, revision, device, flight FROM orders WHERE id = ANY(\(ids)::uuid[]) ORDER BY id FOR UPDATE"
    }

    /// Inserts orders none of which was stored when ``lockOrders(_:)`` looked, in the order given (id order: an
    /// `INSERT … SELECT` from `unnest` inserts the rows as the arrays hold them, with no sort of the records' bytes).
    /// A plain insert: an id another transaction stored since fails the statement with 23505.
    static func insertOrders(_ columns: OrderColumns) -> PostgresQuery {
        let bytes = ByteaArray(columns.records)
        return """
            INSERT INTO orders (id, revision, flight, seat, device, record)
            SELECT * FROM unnest(\(columns.ids)::uuid[], \(columns.revisions)::int8[], \(columns.flights)::text[],
                \(columns.seats)::text[], \(columns.devices)::text[], \(bytes)::bytea[])
            """
    }

    /// Raises stored orders (locked by ``lockOrders(_:)``) to a higher revision of the owning device and answers the
    /// 1-based position of each raised one, with the seat it left (flight and seat) when the revision moved the
    /// order. The update copies the replaced row's flight and seat into `moved_from_flight`/`moved_from_seat`, which
    /// `RETURNING` shows (PostgreSQL 15 has no `OLD` in `RETURNING`).
    static func raiseOrders(_ columns: OrderColumns) -> PostgresQuery {
        let bytes = ByteaArray(columns.records)
        return """
            UPDATE orders SET revision = input.revision, flight = input.flight, seat = input.seat,
                device = input.device, record = input.record, moved_from_flight = orders.flight,
                moved_from_seat = orders.seat
            FROM unnest(\(columns.ids)::uuid[], \(columns.revisions)::int8[], \(columns.flights)::text[],
                \(columns.seats)::text[], \(columns.devices)::text[], \(bytes)::bytea[])
                WITH ORDINALITY AS input(id, revision, flight, seat, device, record, n)
            WHERE orders.id = input.id AND input.revision > orders.revision AND input.device = orders.device
            RETURNING input.n,
                CASE WHEN moved_from_flight <> orders.flight OR moved_from_seat <> orders.seat THEN moved_from_flight END,
                CASE WHEN moved_from_flight <> orders.flight OR moved_from_seat <> orders.seat THEN moved_from_seat END
            """
    }

    /// The columns of one round of scans (ids distinct, in id order), bound as arrays.
    struct ScanColumns {
        var ids: [UUID] = []
        var flights: [String] = []
        var tags: [UUID] = []
        var points: [Int16] = []
        var times: [Double] = []
        var owners: [String] = []
        var weights: [Double] = []
        var devices: [String] = []

        init(_ rows: some Collection<PendingRow>, of batches: [IncomingBatch]) {
            for row in rows {
                guard case .scan(let scan) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
                ids.append(scan.id)
                flights.append(scan.flight.rawValue)
                tags.append(scan.tag.id)
                points.append(scan.point == .origin ? 0 : 1)
                times.append(scan.scannedAt.timeIntervalSinceReferenceDate)
                owners.append(scan.tag.owner.initial + scan.tag.owner.family)
                weights.append(scan.tag.weight)
                devices.append(scan.device)
            }
        }
    }

    /// Inserts scans in the order given (id order, as ``insertOrders(_:)``). A plain insert: a stored id, or one another
    /// transaction stores meanwhile, fails the statement with 23505.
    static func insertScans(_ columns: ScanColumns) -> PostgresQuery {
        """
        INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
        SELECT * FROM unnest(\(columns.ids)::uuid[], \(columns.flights)::text[], \(columns.tags)::uuid[],
            \(columns.points)::int2[], \(columns.times)::float8[], \(columns.owners)::text[],
            \(columns.weights)::float8[], \(columns.devices)::text[])
        """
    }

    /// The fallback of ``insertScans(_:)`` when one of the ids is stored: inserts the scans not stored, waiting for a
    /// transaction that is inserting the same id, and answers the 1-based positions of those already stored.
    static func insertScansIfAbsent(_ columns: ScanColumns) -> PostgresQuery {
        """
        WITH input AS (
            SELECT * FROM unnest(\(columns.ids)::uuid[], \(columns.flights)::text[], \(columns.tags)::uuid[],
                \(columns.points)::int2[], \(columns.times)::float8[], \(columns.owners)::text[],
                \(columns.weights)::float8[], \(columns.devices)::text[])
                WITH ORDINALITY AS t(id, flight, tag, point, scanned_at, owner, weight, device, n)
        ), inserted AS (
            INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
            SELECT id, flight, tag, point, scanned_at, owner, weight, device FROM input ORDER BY n
            ON CONFLICT (id) DO NOTHING
            RETURNING id
        )
        SELECT n FROM input WHERE NOT EXISTS (SELECT 1 FROM inserted WHERE inserted.id = input.id)
        """
    }

    /// The stored currency of each of `flights`.
    static func flightCurrencies(_ flights: [String]) -> PostgresQuery {
        "SELECT flight, currency FROM flights WHERE flight = ANY(\(flights)::text[])"
    }

    /// Creates the flights not stored yet with their first order's currency, in name order; a concurrent writer of
    /// the same flight waits for the first.
    static func insertFlights(_ flights: [(flight: String, currency: String)]) -> PostgresQuery {
        let names = flights.map(\.flight)
        let currencies = flights.map(\.currency)
        return """
            INSERT INTO flights (flight, currency)
            SELECT * FROM unnest(\(names)::text[], \(currencies)::text[]) AS t(flight, currency)
            ORDER BY flight COLLATE "C"
            ON CONFLICT DO NOTHING
            """
    }

    /// Adds one transaction's statistics to each device's row, in device order: its stored batches and records, and
    /// its batches limited by a flight limit with the last one's reason. `last_sync` moves only for a device with a
    /// stored batch.
    static func addDeviceStatistics(_ devices: [String: DeviceSums], at seconds: Double) -> PostgresQuery {
        let sorted = devices.sorted { $0.key < $1.key }
        let names = sorted.map(\.key)
        let batches = sorted.map(\.value.batches)
        let records = sorted.map(\.value.records)
        let new = sorted.map(\.value.new)
        let duplicates = sorted.map(\.value.duplicates)
        let limited = sorted.map(\.value.limited)
        let reasons = sorted.map(\.value.limitedReason)
        return """
            INSERT INTO devices (device, last_sync, batches, records, new_records, duplicates, limited, last_limited_at,
                last_limited_reason)
            SELECT device, CASE WHEN batches > 0 THEN \(seconds)::float8 END, batches, records, new, duplicates, limited,
                CASE WHEN limited > 0 THEN \(seconds)::float8 END, nullif(reason, '')
            FROM unnest(\(names)::text[], \(batches)::int8[], \(records)::int8[], \(new)::int8[],
                \(duplicates)::int8[], \(limited)::int8[], \(reasons)::text[])
                AS t(device, batches, records, new, duplicates, limited, reason)
            ORDER BY device COLLATE "C"
            ON CONFLICT (device) DO UPDATE SET last_sync = greatest(devices.last_sync, excluded.last_sync),
                batches = devices.batches + excluded.batches, records = devices.records + excluded.records,
                new_records = devices.new_records + excluded.new_records,
                duplicates = devices.duplicates + excluded.duplicates, limited = devices.limited + excluded.limited,
                last_limited_at = coalesce(excluded.last_limited_at, devices.last_limited_at),
                last_limited_reason = coalesce(excluded.last_limited_reason, devices.last_limited_reason)
            """
    }

    /// One device's share of a transaction, for ``addDeviceStatistics(_:at:)``.
    struct DeviceSums {
        var batches = 0
        var records = 0
        var new = 0
        var duplicates = 0
        var limited = 0
        /// The last limited batch's reason ("" for none).
        var limitedReason = ""
    }

    /// Adds a round's new records to each device's counter and kept digest on each flight (docs/STORE.md, "Kept
    /// digests"), in (device, flight) order (a concurrent writer of the same pair waits for this transaction), and
    /// answers each pair's count after the addition and whether this statement created its row (`xmax = 0`: an
    /// inserted row has none, an updated one this transaction's id). A pair's first row starts valid, as every row of
    /// the pair is this transaction's.
    static func addDeviceFlights(_ increments: [FlightIncrement], at seconds: Double) -> PostgresQuery {
        let devices = increments.map(\.pair.device)
        let flights = increments.map(\.pair.flight)
        let records = increments.map(\.records)
        let highs = increments.map(\.digestHigh)
        let lows = increments.map(\.digestLow)
        return """
            INSERT INTO device_flights (device, flight, records, first_stored_at, held, digest_hi, digest_lo, digest_valid)
            SELECT device, flight, records, \(seconds)::float8, records, hi, lo, true
            FROM unnest(\(devices)::text[], \(flights)::text[], \(records)::int8[], \(highs)::int8[], \(lows)::int8[])
                AS t(device, flight, records, hi, lo)
            ORDER BY device COLLATE "C", flight COLLATE "C"
            ON CONFLICT (device, flight) DO UPDATE SET records = device_flights.records + excluded.records,
                held = device_flights.held + excluded.held, digest_hi = device_flights.digest_hi + excluded.digest_hi,
                digest_lo = device_flights.digest_lo + excluded.digest_lo
            RETURNING device, flight, records, xmax = 0
            """
    }

    /// Adds what raised revisions did to the kept digests of pairs this transaction holds locked (``RevisedDigests``).
    static func reviseDigests(_ changes: [(key: DeviceFlight, value: RevisedDigests.Change)]) -> PostgresQuery {
        let devices = changes.map(\.key.device)
        let flights = changes.map(\.key.flight)
        let held = changes.map(\.value.held)
        let highs = changes.map(\.value.high)
        let lows = changes.map(\.value.low)
        return """
            UPDATE device_flights SET held = device_flights.held + d.held,
                digest_hi = device_flights.digest_hi + d.hi, digest_lo = device_flights.digest_lo + d.lo
            FROM unnest(\(devices)::text[], \(flights)::text[], \(held)::int8[], \(highs)::int8[], \(lows)::int8[])
                AS d(device, flight, held, hi, lo)
            WHERE device_flights.device = d.device AND device_flights.flight = d.flight
            """
    }

    /// Marks pairs' kept digests stale, as the trigger would (an insert that waits on no lock).
    static func markStale(_ pairs: [DeviceFlight]) -> PostgresQuery {
        let devices = pairs.map(\.device)
        let flights = pairs.map(\.flight)
        return "INSERT INTO stale_digests (device, flight) SELECT * FROM unnest(\(devices)::text[], \(flights)::text[])"
    }

    /// The advisory lock key (with the device's `hashtext`) that serialises adding flights for one device: another
    /// aggregator's new flight of the same device cannot slip past the flights-per-day count in between.
    static let deviceFlightsLock: Int32 = 0x4A62_4446

    /// Takes the flights-per-day lock of each of `devices`, in device order.
    static func lockDevicesFlights(_ devices: [String]) -> PostgresQuery {
        """
        SELECT pg_advisory_xact_lock(\(deviceFlightsLock)::int4, hashtext(device))
        FROM (SELECT device FROM unnest(\(devices)::text[]) AS t(device) ORDER BY device COLLATE "C") AS ordered
        """
    }

    /// Each of `devices`' flights first stored after `cutoff`, and the oldest of them.
    static func deviceWindows(_ devices: [String], after cutoff: Double) -> PostgresQuery {
        """
        SELECT device, count(*), min(first_stored_at) FROM device_flights
        WHERE device = ANY(\(devices)::text[]) AND first_stored_at > \(cutoff)::float8 GROUP BY device
        """
    }

    /// Marks seats whose receipts are behind (each seat once), by flight and seat, raising each seat's generation
    /// by its count: one for a new order or a higher revision there, one per order that left it (SQLite's trigger
    /// and its per-seat mark give the same generations).
    static func markDirty(_ seats: [(seat: SeatKey, count: Int)]) -> PostgresQuery {
        let flights = seats.map(\.seat.flight)
        let names = seats.map(\.seat.seat)
        let counts = seats.map(\.count)
        return """
            INSERT INTO dirty_receipts (flight, seat, generation)
            SELECT flight, seat, count
            FROM unnest(\(flights)::text[], \(names)::text[], \(counts)::int8[]) AS t(flight, seat, count)
            ORDER BY flight COLLATE "C", seat COLLATE "C"
            ON CONFLICT (flight, seat) DO UPDATE SET generation = dirty_receipts.generation + excluded.generation
            """
    }
}

/// Records' bytes as one `bytea[]` parameter, written straight from the `Data` values (no `ByteBuffer` per record).
struct ByteaArray: PostgresNonThrowingEncodable, PostgresDynamicTypeEncodable {
    static var psqlType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    let elements: [Data]

    init(_ elements: [Data]) {
        self.elements = elements
    }

    func encode<JSONEncoder: PostgresJSONEncoder>(
        into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>
    ) {
        // PostgreSQL's binary array: dimensions, a null flag, the element type; per dimension its length and lower
        // bound; then each element as a length and its bytes.
        buffer.writeInteger(elements.isEmpty ? 0 : 1, as: Int32.self)
        buffer.writeInteger(0, as: Int32.self)
        buffer.writeInteger(PostgresDataType.bytea.rawValue)
        guard !elements.isEmpty else { return }
        buffer.writeInteger(Int32(elements.count))
        buffer.writeInteger(1, as: Int32.self)
        for element in elements {
            buffer.writeInteger(Int32(element.count))
            buffer.writeBytes(element)
        }
    }
}

extension PostgresStore {
    // MARK: Writing

    public func apply(_ batches: [IncomingBatch], at now: Date, limits: StoreLimits) throws -> [BatchOutcome] {
        guard !batches.isEmpty else { return [] }
        return try locked {
            // As in SQLite: a refused or limited batch rolls the transaction back and the group is stored again
            // without it.
            try Self.storeInRounds(batches) { skipping in
                try transaction {
                    let pass = try store(batches, skipping: skipping, now: now, limits: limits)
                    return (pass, pass.verdicts.isEmpty)
                }
            }
        }
    }

    /// Fixes each new flight's currency and refuses an order in another than its flight's, as SQLite's store does.
    ///
    /// A flight's currency is what the store says, else that of the first order (in arrival order) this transaction
    /// stores on it. Only stored orders count: before, every order did, and a resend of a stored order naming another
    /// flight (a duplicate, acked as stored) fixed that flight's currency. The stored flights are read first; the
    /// rest are created in name order (the first writer of a flight fixes its currency, a concurrent one waits for
    /// it), then read.
    func checkCurrencies(
        of stored: [PendingRow], in batches: [IncomingBatch], refuse: (Int, Int, ValidationError) -> Void
    ) throws {
        guard !stored.isEmpty else { return }
        let arrival = stored.sorted { ($0.batch, $0.index) < ($1.batch, $1.index) }
        var firstCurrency: [String: String] = [:]
        for row in arrival {
            guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
            if firstCurrency[order.flight.rawValue] == nil { firstCurrency[order.flight.rawValue] = order.currency }
        }
        var currencies: [String: String] = [:]
        func readCurrencies(_ flights: [String]) throws {
            for row in try run(Self.flightCurrencies(flights)) {
                let (flight, currency) = try row.decode((String, String).self)
                currencies[flight] = currency
            }
        }
        try readCurrencies(Array(firstCurrency.keys))
        let missing = firstCurrency.filter { currencies[$0.key] == nil }.map { (flight: $0.key, currency: $0.value) }
        if !missing.isEmpty {
            try run(Self.insertFlights(missing.sorted { $0.flight < $1.flight }))
            try readCurrencies(missing.map(\.flight))
        }
        for row in arrival {
            guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record,
                let currency = currencies[order.flight.rawValue], order.currency != currency
            else { continue }
            refuse(
                Int(row.batch), Int(row.index),
                .flightCurrency(flight: order.flight.rawValue, stored: currency, incoming: order.currency))
        }
    }

    /// One pass of ``apply(_:at:limits:)`` inside a transaction: the SQLite store's `store` with the same verdicts,
    /// rows in a fixed order, each table's rows in one statement.
    func store(
        _ batches: [IncomingBatch], skipping skipped: [Int: BatchVerdict], now: Date, limits: StoreLimits
    ) throws -> (outcomes: [BatchOutcome], verdicts: [Int: BatchVerdict]) {
        var refusal: SQLiteStore.Refusal?
        func refuse(_ b: Int, _ i: Int, _ error: ValidationError) {
            refusal = Self.earliest(refusal, b, i, error, in: batches)
        }
        let total = batches.reduce(0) { $0 + $1.records.count }
        var orders: [PendingRow] = []
        var scans: [PendingRow] = []
        orders.reserveCapacity(total)
        scans.reserveCapacity(total)
        // Per batch, its records new to the store (new ids) per flight: what the flight limits count.
        var tally = NewRecordTally(batches)
        for (b, batch) in batches.enumerated() where skipped[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                switch incoming.record {
                case .order(let order):
                    orders.append(PendingRow(order.id, batch: b, index: i))
                    tally.note(b, i, flight: order.flight.rawValue)
                case .scan(let scan):
                    scans.append(PendingRow(scan.id, batch: b, index: i))
                    tally.note(b, i, flight: scan.flight.rawValue)
                }
            }
        }
        tally.startCounting()
        orders.sort()
        scans.sort()
        var newCounts = [Int](repeating: 0, count: batches.count)
        var dirty: Set<SeatKey> = []
        // Seats orders moved away from, once per move: marked with the others, after the devices rows.
        var left: [SeatKey: Int] = [:]
        // Orders, round by round; an unchanged row is a duplicate unless another device owns the order. The
        // corrections' effect on the kept digests: added after the flight counters (docs/STORE.md, "Kept digests");
        // `jetbridge.applying` keeps the trigger from marking their pairs meanwhile.
        var revised = RevisedDigests()
        try run("SELECT set_config('jetbridge.applying', 'on', true)")
        var unchanged: [PendingRow] = []
        // The orders this transaction stores (inserted or raised): only they can fix a flight's currency.
        var storedOrders: [PendingRow] = []
        var owners: [UUID: String] = [:]
        for (n, round) in Self.rounds(orders).enumerated() {
            for (k, write) in try writeOrders(round, of: batches, owners: &owners, firstRound: n == 0).enumerated() {
                let row = round[k]
                if case .unchanged = write {
                    unchanged.append(row)
                    continue
                }
                storedOrders.append(row)
                guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
                newCounts[Int(row.batch)] += 1
                switch write {
                case .inserted:
                    tally.countNew(
                        Int(row.batch), Int(row.index),
                        hash: DeliverySummary.hash(order: order.id, revision: order.revision))
                case .raised(let leftSeat, let revision, let flight):
                    if let leftSeat { left[leftSeat, default: 0] += 1 }
                    revised.revise(
                        order: order.id, device: order.device, from: (flight: flight, revision: revision),
                        to: (flight: order.flight.rawValue, revision: order.revision))
                case .unchanged:
                    break
                }
                dirty.insert(SeatKey(flight: order.flight.rawValue, seat: order.seat.rawValue))
            }
        }
        for row in unchanged {
            guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record,
                let owner = owners[order.id], owner != order.device
            else { continue }
            refuse(Int(row.batch), Int(row.index), .foreignOrder(order, owner: owner))
        }
        try checkCurrencies(of: storedOrders, in: batches, refuse: refuse)
        // The scans go in even after a refusal: whether a batch before the refused one is past a limit, which would
        // make it the earliest verdict, depends on them.
        for (n, round) in Self.rounds(scans).enumerated() {
            for (row, new) in zip(round, try writeScans(round, of: batches, firstRound: n == 0)) where new {
                newCounts[Int(row.batch)] += 1
                let record = batches[Int(row.batch)].records[Int(row.index)].record
                tally.countNew(Int(row.batch), Int(row.index), hash: DeliverySummary.hash(of: record))
            }
        }
        let newRecords = tally.newRecords
        // The flight counters: added to first (each pair's row locked until the commit, so that a concurrent writer
        // of the same device and flight waits and then counts on top of this one), then checked; a verdict rolls the
        // additions back with the rest.
        let increments = Self.counterIncrements(
            batches, skipping: skipped, newRecords: newRecords, newDigests: tally.newDigests)
        let verdicts = Self.limitVerdicts(
            batches, skipping: skipped, newRecords: newRecords, refusal: refusal,
            counters: try flightCounters(increments, now: now), limits: limits, now: now)
        if !verdicts.isEmpty { return ([], verdicts) }
        if !revised.isEmpty {
            // The pairs the counters just locked take the difference; any other is marked stale (locking it now
            // would be out of the lock order), and read from its rows at its next summary.
            let locked = Set(increments.map(\.pair))
            let changes = revised.changes.sorted { ($0.key.device, $0.key.flight) < ($1.key.device, $1.key.flight) }
            let adjusted = changes.filter { locked.contains($0.key) }
            let marked = changes.filter { !locked.contains($0.key) }.map(\.key)
            if !adjusted.isEmpty { try run(Self.reviseDigests(adjusted)) }
            if !marked.isEmpty { try run(Self.markStale(marked)) }
        }
        // Devices' statistics summed per device and written in device order (one row each).
        var devices: [String: DeviceSums] = [:]
        let outcomes = Self.outcomes(of: batches, new: newCounts, skipping: skipped) {
            header, records, new, duplicates in
            devices[header.device, default: DeviceSums()].batches += 1
            devices[header.device]!.records += records
            devices[header.device]!.new += new
            devices[header.device]!.duplicates += duplicates
        } limited: { header, limit in
            devices[header.device, default: DeviceSums()].limited += 1
            devices[header.device]!.limitedReason = String(limit.reason.prefix(500))
        }
        if !devices.isEmpty {
            try run(Self.addDeviceStatistics(devices, at: now.timeIntervalSince1970))
        }
        // Receipt marks last, as every transaction takes them (docs/STORE.md, "Lock order").
        var marks = left
        for seat in dirty { marks[seat, default: 0] += 1 }
        if !marks.isEmpty {
            try run(
                Self.markDirty(
                    marks.sorted { ($0.key.flight, $0.key.seat) < ($1.key.flight, $1.key.seat) }.map {
                        (seat: $0.key, count: $0.value)
                    }))
        }
        return (outcomes, [:])
    }

    /// What storing one order did.
    enum OrderWrite {
        /// A new order.
        case inserted
        /// A higher revision of the owning device replaced the stored one (of revision `from` on flight `on`); the
        /// seat it left, if it moved.
        case raised(left: SeatKey?, from: Int, on: String)
        /// Nothing: a duplicate, an older revision, or another device's order.
        case unchanged
    }

    /// Stores one round of orders (ids distinct, in id order) and answers what each did; `owners` gets the owning
    /// device of each order that was stored before and is not new in this round.
    ///
    /// The stored ones are locked and read first (``lockOrders(_:)``), the new ones inserted with a plain `INSERT`,
    /// then the higher revisions raised: no speculative insert per row. Every row this takes it takes in id order,
    /// stored rows first and new ones after, as every other transaction does (docs/STORE.md, "Lock order").
    ///
    /// A group's first round is tried first without asking about its first revisions: an order's first revision is
    /// almost always new when it arrives, and asking cost a B-tree probe per order (issue 29). Only the corrections
    /// (revision 2 or more) are locked and read; the first revisions go in with the new corrections. When one of them
    /// was stored (a resend), the insert fails with 23505 and the round is done again asking about every id.
    ///
    /// Another aggregator may store one of the new ids in between (it commits, or was inserting it and commits while
    /// the insert waits): the insert fails with 23505 (unique_violation), the round is rolled back to its savepoint,
    /// which releases its locks, and done again from the lock, which now sees that row stored. Each attempt again finds
    /// one more id stored, so this ends.
    func writeOrders(
        _ round: [PendingRow], of batches: [IncomingBatch], owners: inout [UUID: String], firstRound: Bool
    ) throws -> [OrderWrite] {
        let columns = OrderColumns(round, of: batches)
        var lastAbsent = Int.max
        var asking = firstRound ? columns.revisions.indices.filter { columns.revisions[$0] > 1 } : nil
        while true {
            try run("SAVEPOINT orders_round")
            var stored: [UUID: (revision: Int, device: String, flight: String)] = [:]
            let locking = asking.map { asked in asked.map { columns.ids[$0] } } ?? columns.ids
            if !locking.isEmpty {
                for row in try run(Self.lockOrders(locking)) {
                    let (id, revision, device, flight) = try row.decode((UUID, Int, String, String).self)
                    stored[id] = (revision, device, flight)
                }
            }
            var writes = [OrderWrite](repeating: .unchanged, count: round.count)
            var absent: [Int] = []
            var raised: [Int] = []
            for k in columns.ids.indices {
                if let row = stored[columns.ids[k]] {
                    if columns.revisions[k] > row.revision, columns.devices[k] == row.device { raised.append(k) }
                } else {
                    absent.append(k)
                }
            }
            if !absent.isEmpty {
                let new = absent.count == columns.ids.count ? columns : Self.subset(columns, absent)
                do {
                    try run(Self.insertOrders(new))
                } catch let error as PostgresStoreError
                    where error.sqlState == "23505" && (asking != nil || absent.count < lastAbsent)
                {
                    logger.debug(
                        "orders stored before or meanwhile by another transaction; the round is done again",
                        metadata: ["orders": .stringConvertible(absent.count)])
                    try run("ROLLBACK TO SAVEPOINT orders_round")
                    if asking == nil { lastAbsent = absent.count }
                    asking = nil
                    continue
                }
                for k in absent { writes[k] = .inserted }
            }
            if !raised.isEmpty {
                for row in try run(Self.raiseOrders(Self.subset(columns, raised))) {
                    let (position, flight, seat) = try row.decode((Int, String?, String?).self)
                    let left = flight.flatMap { flight in seat.map { SeatKey(flight: flight, seat: $0) } }
                    let k = raised[position - 1]
                    let before = stored[columns.ids[k]]!
                    writes[k] = .raised(left: left, from: before.revision, on: before.flight)
                }
            }
            try run("RELEASE SAVEPOINT orders_round")
            for (id, row) in stored { owners[id] = row.device }
            return writes
        }
    }

    /// The rows of `columns` at `positions`, in that order.
    static func subset(_ columns: OrderColumns, _ positions: [Int]) -> OrderColumns {
        var subset = columns
        subset.ids = positions.map { columns.ids[$0] }
        subset.revisions = positions.map { columns.revisions[$0] }
        subset.flights = positions.map { columns.flights[$0] }
        subset.seats = positions.map { columns.seats[$0] }
        subset.devices = positions.map { columns.devices[$0] }
        subset.records = positions.map { columns.records[$0] }
        return subset
    }

    /// Stores one round of scans (ids distinct, in id order) and answers whether each was new.
    ///
    /// A scan is almost always new when it arrives, so the round goes in with a plain `INSERT` (in id order) without
    /// asking first which ids are stored: asking cost a B-tree probe per scan, about a quarter of PostgreSQL's CPU
    /// per record (issue 29). When one of them is stored (a resend, or another aggregator storing the same batch, which
    /// the insert waits for), the insert fails with 23505 (unique_violation): it is rolled back to its savepoint and
    /// the round goes in with ``insertScansIfAbsent(_:)``, `ON CONFLICT DO NOTHING`, which answers the stored ones (and
    /// locks no stored row, so it keeps the lock order). A group's later rounds (ids that came again in the group, all
    /// stored by the first) go in that way at once.
    func writeScans(_ round: [PendingRow], of batches: [IncomingBatch], firstRound: Bool) throws -> [Bool] {
        let columns = ScanColumns(round, of: batches)
        var new = [Bool](repeating: true, count: round.count)
        guard firstRound else {
            for row in try run(Self.insertScansIfAbsent(columns)) { new[try row.decode(Int.self) - 1] = false }
            return new
        }
        try run("SAVEPOINT scans_round")
        do {
            try run(Self.insertScans(columns))
        } catch let error as PostgresStoreError where error.sqlState == "23505" {
            logger.debug(
                "scans stored before; inserted if absent", metadata: ["scans": .stringConvertible(round.count)])
            try run("ROLLBACK TO SAVEPOINT scans_round")
            for row in try run(Self.insertScansIfAbsent(columns)) { new[try row.decode(Int.self) - 1] = false }
        }
        try run("RELEASE SAVEPOINT scans_round")
        return new
    }

    /// Adds a round's `increments` to `device_flights` and answers what the rows held before: each pair's count, and
    /// for the devices this round gives a new flight, their flights of the last 24 hours (read under the devices'
    /// flights locks, taken after the counters' row locks: every writer takes them in that order).
    func flightCounters(_ increments: [FlightIncrement], now: Date) throws -> FlightCounters {
        var counters = FlightCounters()
        guard !increments.isEmpty else { return counters }
        let added = Dictionary(increments.map { ($0.pair, $0.records) }, uniquingKeysWith: +)
        var created: [String: Int] = [:]
        for row in try run(Self.addDeviceFlights(increments, at: now.timeIntervalSince1970)) {
            let (device, flight, records, isNew) = try row.decode((String, String, Int, Bool).self)
            let pair = DeviceFlight(device: device, flight: flight)
            if isNew {
                created[device, default: 0] += 1
            } else {
                counters.records[pair] = records - (added[pair] ?? 0)
            }
        }
        guard !created.isEmpty else { return counters }
        let devices = created.keys.sorted()
        try run(Self.lockDevicesFlights(devices))
        for device in devices { counters.window[device] = (0, nil) }
        for row in try run(Self.deviceWindows(devices, after: now.timeIntervalSince1970 - BatchLimit.window)) {
            let (device, flights, oldest) = try row.decode((String, Int, Double?).self)
            // This round's own new rows are in the window too (first stored now); they are not "before".
            let own = created[device] ?? 0
            counters.window[device] = (flights - own, flights - own > 0 ? oldest : nil)
        }
        return counters
    }

    public func recordRejection(device: String, reason: String, at now: Date, times: Int) throws {
        let shown = InertText.escape(String(reason.prefix(500)))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, rejects, last_reject_at, last_reject_reason)
            VALUES (\(device), \(times), \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET rejects = devices.rejects + excluded.rejects,
                last_reject_at = excluded.last_reject_at, last_reject_reason = excluded.last_reject_reason
            """)
    }

    public func recordLimited(device: String, reason: String, at now: Date, times: Int) throws {
        let shown = String(reason.prefix(500))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, limited, last_limited_at, last_limited_reason)
            VALUES (\(device), \(times), \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET limited = devices.limited + excluded.limited,
                last_limited_at = excluded.last_limited_at, last_limited_reason = excluded.last_limited_reason
            """)
    }

    /// Runs one `devices` upsert (a rejection or a limited batch counted) in a transaction of its own.
    func countAgainstDevice(_ upsert: PostgresQuery) throws {
        try locked {
            try transaction {
                try run(upsert)
                return ((), true)
            }
        }
    }
}
