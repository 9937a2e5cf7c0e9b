public import Foundation
import JetbridgeModel
public import JetbridgeProtocol
import NIOCore
import PostgresNIO

// The statements of one `PostgresStore.apply`: each table's rows bound as arrays and expanded by `unnest`, so that a
// group of batches costs a handful of round trips (flights, orders, scans, devices, receipt marks) instead of one per
// row. A 40,000-record group is about 8 statements; one round trip per row cost ~45,000 (store-benchmark,
// docs/BENCHMARKS.md, "PostgreSQL store").
//
// The per-record verdicts are the per-row engine's: one statement applies each table's rows in id order, and an id
// that comes more than once in a group (a resend, a revision and its correction) goes in several statements, the
// k-th occurrence in the k-th (see ``PostgresStore/rounds(_:)``), so each occurrence meets the row its predecessor
// left, exactly as one statement per row did. PostgreSQL refuses an `ON CONFLICT DO UPDATE` that touches one row
// twice, which is the other reason for the rounds.

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

    /// Upserts one round of orders (ids distinct, in id order) and answers the 1-based positions of the rows that
    /// changed nothing (a duplicate, an older revision, or another device's order), then, with position 0, the seat
    /// each moved order left (flight and seat). The highest revision wins, only for the owning device.
    ///
    /// The rows that changed nothing are read from the statement itself rather than from `RETURNING`: in a bulk sync
    /// they are none, so nothing comes back. The seat an update leaves comes from the row it replaced: the update
    /// copies it into `moved_from_flight`/`moved_from_seat`, which `RETURNING` shows (PostgreSQL 15 has no `OLD` in
    /// `RETURNING`); a row read before the statement could be another transaction's older version.
    static func upsertOrders(_ round: [PendingRow], of batches: [IncomingBatch]) -> PostgresQuery {
        var ids: [UUID] = []
        var revisions: [Int] = []
        var flights: [String] = []
        var seats: [String] = []
        var devices: [String] = []
        var records: [Data] = []
        ids.reserveCapacity(round.count)
        revisions.reserveCapacity(round.count)
        flights.reserveCapacity(round.count)
        seats.reserveCapacity(round.count)
        devices.reserveCapacity(round.count)
        records.reserveCapacity(round.count)
        for row in round {
            let incoming = batches[Int(row.batch)].records[Int(row.index)]
            guard case .order(let order) = incoming.record else { continue }
            ids.append(order.id)
            revisions.append(order.revision)
            flights.append(order.flight.rawValue)
            seats.append(order.seat.rawValue)
            devices.append(order.device)
            records.append(incoming.bytes)
        }
        let bytes = ByteaArray(records)
        return """
            WITH input AS (
                SELECT * FROM unnest(\(ids)::uuid[], \(revisions)::int8[], \(flights)::text[], \(seats)::text[],
                    \(devices)::text[], \(bytes)::bytea[])
                    WITH ORDINALITY AS t(id, revision, flight, seat, device, record, n)
            ), changed AS (
                INSERT INTO orders (id, revision, flight, seat, device, record)
                SELECT id, revision, flight, seat, device, record FROM input ORDER BY id
                ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, flight = excluded.flight,
                    seat = excluded.seat, device = excluded.device, record = excluded.record,
                    moved_from_flight = orders.flight, moved_from_seat = orders.seat
                WHERE excluded.revision > orders.revision AND excluded.device = orders.device
                RETURNING id, flight, seat, moved_from_flight, moved_from_seat
            )
            SELECT n, NULL::text, NULL::text FROM input
            WHERE NOT EXISTS (SELECT 1 FROM changed WHERE changed.id = input.id)
            UNION ALL
            SELECT 0, moved_from_flight, moved_from_seat FROM changed
            WHERE moved_from_flight IS NOT NULL AND (moved_from_flight <> flight OR moved_from_seat <> seat)
            """
    }

    /// The owners of stored orders `ids`, for the ownership refusal. A statement of its own, after the upsert: it
    /// sees a row another transaction committed while the upsert waited for it, which the upsert's snapshot does not.
    static func orderOwners(_ ids: [UUID]) -> PostgresQuery {
        "SELECT id, device FROM orders WHERE id = ANY(\(ids)::uuid[])"
    }

    /// Inserts one round of scans (ids distinct, in id order) and answers the 1-based positions of those already
    /// stored.
    static func insertScans(_ round: [PendingRow], of batches: [IncomingBatch]) -> PostgresQuery {
        var ids: [UUID] = []
        var flights: [String] = []
        var tags: [UUID] = []
        var points: [Int16] = []
        var times: [Double] = []
        var owners: [String] = []
        var weights: [Double] = []
        var devices: [String] = []
        for row in round {
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
        return """
            WITH input AS (
                SELECT * FROM unnest(\(ids)::uuid[], \(flights)::text[], \(tags)::uuid[], \(points)::int2[],
                    \(times)::float8[], \(owners)::text[], \(weights)::float8[], \(devices)::text[])
                    WITH ORDINALITY AS t(id, flight, tag, point, scanned_at, owner, weight, device, n)
            ), inserted AS (
                INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
                SELECT id, flight, tag, point, scanned_at, owner, weight, device FROM input ORDER BY id
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

    /// Adds one transaction's statistics to each device's row, in device order.
    static func addDeviceStatistics(
        _ devices: [(device: String, batches: Int, records: Int, new: Int, duplicates: Int)], at seconds: Double
    ) -> PostgresQuery {
        let names = devices.map(\.device)
        let batches = devices.map(\.batches)
        let records = devices.map(\.records)
        let new = devices.map(\.new)
        let duplicates = devices.map(\.duplicates)
        return """
            INSERT INTO devices (device, last_sync, batches, records, new_records, duplicates)
            SELECT device, \(seconds)::float8, batches, records, new, duplicates
            FROM unnest(\(names)::text[], \(batches)::int8[], \(records)::int8[], \(new)::int8[],
                \(duplicates)::int8[]) AS t(device, batches, records, new, duplicates)
            ORDER BY device COLLATE "C"
            ON CONFLICT (device) DO UPDATE SET last_sync = greatest(devices.last_sync, excluded.last_sync),
                batches = devices.batches + excluded.batches, records = devices.records + excluded.records,
                new_records = devices.new_records + excluded.new_records,
                duplicates = devices.duplicates + excluded.duplicates
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

    public func apply(_ batches: [IncomingBatch], at now: Date) throws -> [BatchOutcome] {
        guard !batches.isEmpty else { return [] }
        return try locked {
            // As in SQLite: a refusal rolls the transaction back and the group is stored again without that batch,
            // one refused batch per round.
            try Self.storeRefusingOnePerRound(batches) { refused in
                try transaction {
                    let pass = try store(batches, skipping: refused, now: now)
                    return (pass, pass.refusal == nil)
                }
            }
        }
    }

    /// One pass of ``apply(_:at:)`` inside a transaction: the SQLite store's `store` with the same verdicts, rows in
    /// a fixed order, each table's rows in one statement (`PostgresStore+Apply.swift`).
    func store(
        _ batches: [IncomingBatch], skipping refused: [Int: BatchRejection], now: Date
    ) throws -> (outcomes: [BatchOutcome], refusal: SQLiteStore.Refusal?) {
        var refusal: SQLiteStore.Refusal?
        func refuse(_ b: Int, _ i: Int, _ error: ValidationError) {
            refusal = Self.earliest(refusal, b, i, error, in: batches)
        }
        let total = batches.reduce(0) { $0 + $1.records.count }
        var orders: [PendingRow] = []
        var scans: [PendingRow] = []
        orders.reserveCapacity(total)
        scans.reserveCapacity(total)
        // Each flight's currency if this transaction creates it: its first order's, in arrival order.
        var firstCurrency: [String: String] = [:]
        for (b, batch) in batches.enumerated() where refused[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                switch incoming.record {
                case .order(let order):
                    orders.append(PendingRow(order.id, batch: b, index: i))
                    if firstCurrency[order.flight.rawValue] == nil {
                        firstCurrency[order.flight.rawValue] = order.currency
                    }
                case .scan(let scan): scans.append(PendingRow(scan.id, batch: b, index: i))
                }
            }
        }
        // Flights: the stored ones read first; the rest created in name order (the first writer of a flight fixes its
        // currency, a concurrent one waits for it), then read.
        var currencies: [String: String] = [:]
        func readCurrencies(_ flights: [String]) throws {
            for row in try run(Self.flightCurrencies(flights)) {
                let (flight, currency) = try row.decode((String, String).self)
                currencies[flight] = currency
            }
        }
        if !firstCurrency.isEmpty {
            try readCurrencies(Array(firstCurrency.keys))
            let missing = firstCurrency.filter { currencies[$0.key] == nil }.map { (flight: $0.key, currency: $0.value) }
            if !missing.isEmpty {
                try run(Self.insertFlights(missing.sorted { $0.flight < $1.flight }))
                try readCurrencies(missing.map(\.flight))
            }
        }
        for (b, batch) in batches.enumerated() where refused[b] == nil {
            for (i, incoming) in batch.records.enumerated() {
                guard case .order(let order) = incoming.record, let currency = currencies[order.flight.rawValue],
                    order.currency != currency
                else { continue }
                refuse(b, i, .flightCurrency(flight: order.flight.rawValue, stored: currency, incoming: order.currency))
            }
        }
        orders.sort()
        scans.sort()
        var newCounts = [Int](repeating: 0, count: batches.count)
        var dirty: Set<SeatKey> = []
        // Seats orders moved away from, once per move: marked with the others, after the devices rows.
        var left: [SeatKey: Int] = [:]
        // Orders, one statement per round; an unchanged row is a duplicate unless another device owns the order.
        var unchanged: [PendingRow] = []
        for round in Self.rounds(orders) {
            var kept = [Bool](repeating: true, count: round.count)
            for row in try run(Self.upsertOrders(round, of: batches)) {
                let (position, flight, seat) = try row.decode((Int, String?, String?).self)
                if position == 0, let flight, let seat {
                    left[SeatKey(flight: flight, seat: seat), default: 0] += 1
                } else {
                    kept[position - 1] = false
                }
            }
            for (row, changed) in zip(round, kept) {
                guard changed else {
                    unchanged.append(row)
                    continue
                }
                guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { continue }
                newCounts[Int(row.batch)] += 1
                dirty.insert(SeatKey(flight: order.flight.rawValue, seat: order.seat.rawValue))
            }
        }
        if !unchanged.isEmpty {
            func order(_ row: PendingRow) -> Order? {
                guard case .order(let order) = batches[Int(row.batch)].records[Int(row.index)].record else { return nil }
                return order
            }
            var owners: [UUID: String] = [:]
            for row in try run(Self.orderOwners(unchanged.compactMap { order($0)?.id })) {
                let (id, device) = try row.decode((UUID, String).self)
                owners[id] = device
            }
            for row in unchanged {
                guard let order = order(row), let owner = owners[order.id], owner != order.device else { continue }
                refuse(Int(row.batch), Int(row.index), .foreignOrder(order, owner: owner))
            }
        }
        if let refusal { return ([], refusal) }
        for round in Self.rounds(scans) {
            var inserted = [Bool](repeating: true, count: round.count)
            for row in try run(Self.insertScans(round, of: batches)) {
                inserted[try row.decode(Int.self) - 1] = false
            }
            for (row, new) in zip(round, inserted) where new { newCounts[Int(row.batch)] += 1 }
        }
        // Devices' statistics summed per device and written in device order (one row each).
        var devices: [String: (batches: Int, records: Int, new: Int, duplicates: Int)] = [:]
        let outcomes = Self.outcomes(of: batches, new: newCounts, skipping: refused) { header, records, new, duplicates in
            var sums = devices[header.device] ?? (0, 0, 0, 0)
            sums.batches += 1
            sums.records += records
            sums.new += new
            sums.duplicates += duplicates
            devices[header.device] = sums
        }
        if !devices.isEmpty {
            try run(
                Self.addDeviceStatistics(
                    devices.sorted { $0.key < $1.key }.map { ($0.key, $0.value.0, $0.value.1, $0.value.2, $0.value.3) },
                    at: now.timeIntervalSince1970))
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
        return (outcomes, nil)
    }

    public func recordRejection(device: String, reason: String, at now: Date) throws {
        let shown = InertText.escape(String(reason.prefix(500)))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, rejects, last_reject_at, last_reject_reason)
            VALUES (\(device), 1, \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET rejects = devices.rejects + 1,
                last_reject_at = excluded.last_reject_at, last_reject_reason = excluded.last_reject_reason
            """)
    }

    public func recordLimited(device: String, reason: String, at now: Date) throws {
        let shown = String(reason.prefix(500))
        let seconds = now.timeIntervalSince1970
        try countAgainstDevice(
            """
            INSERT INTO devices (device, limited, last_limited_at, last_limited_reason)
            VALUES (\(device), 1, \(seconds), \(shown))
            ON CONFLICT (device) DO UPDATE SET limited = devices.limited + 1,
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
