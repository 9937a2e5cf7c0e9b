public import Foundation
public import JetbridgeModel
public import JetbridgeProtocol
import NIOCore
import NIOPosix
import PostgresNIO

// Reads: counts, orders, bags, receipts and reports, each one statement (or a few) on the store's connection.
extension PostgresStore {
    // MARK: Reading

    /// Deprecated (``StoreReader/recordCount(device:flight:)``): `apply` checks the limit itself.
    public func recordCount(device: String, flight: String) throws -> Int {
        try locked {
            try run("SELECT records FROM device_flights WHERE device = \(device) AND flight = \(flight)").first?
                .decode(Int.self) ?? 0
        }
    }

    /// What the store holds of `device`'s records on `flight` (docs/PROTOCOL.md, "Proof of delivery"): from the
    /// pair's kept digest when it is valid and equals `expected` (a primary-key read and an index probe of
    /// `stale_digests`), else from the rows, read through the `(device, flight)` indexes (schema version 5, index-only
    /// once the table is vacuumed), and the kept digest set to them (docs/STORE.md, "Kept digests"; SQLiteStore's
    /// `deliverySummary` says why).
    ///
    /// The rows are read again in a transaction that clears the pair's stale marks before it reads the rows, so a
    /// change committed after the clearing leaves its mark and one committed before it is in the rows read: the kept
    /// digest never counts a row that is gone. It first locks the pair's `device_flights` row, so a concurrent `apply`
    /// of the pair either committed before (its rows are read) or adds its rows' hashes after this commits; without
    /// the lock the kept digest could lose that addition (a digest short of the rows: a needless read of the rows at
    /// the next summary, never a wrong answer).
    public func deliverySummary(
        device: String, flight: String, expected: DeliverySummary?
    ) throws -> DeliverySummary {
        let pair = DeviceFlight(device: device, flight: flight)
        return try locked {
            if let expected {
                let rows = try run(
                    """
                    SELECT held, digest_hi, digest_lo FROM device_flights
                    WHERE device = \(device) AND flight = \(flight) AND digest_valid
                        AND NOT EXISTS (SELECT 1 FROM stale_digests WHERE device = \(device) AND flight = \(flight))
                    """)
                if let row = rows.first {
                    let (held, high, low) = try row.decode((Int, Int64, Int64).self)
                    let kept = DeliverySummary(count: held, high: high, low: low)
                    if kept == expected || rowReads.wereRead(pair, giving: kept) { return kept }
                }
            }
            let summary = try transaction {
                try run("SELECT 1 FROM device_flights WHERE device = \(device) AND flight = \(flight) FOR UPDATE")
                try run("DELETE FROM stale_digests WHERE device = \(device) AND flight = \(flight)")
                var summary = DeliverySummary()
                for row in try run("SELECT id, revision FROM orders WHERE device = \(device) AND flight = \(flight)") {
                    let (id, revision) = try row.decode((UUID, Int).self)
                    summary.add(order: id, revision: revision)
                }
                for row in try run("SELECT id FROM scans WHERE device = \(device) AND flight = \(flight)") {
                    summary.add(scan: try row.decode(UUID.self))
                }
                try run(
                    """
                    UPDATE device_flights SET held = \(summary.count), digest_hi = \(summary.digestHigh),
                        digest_lo = \(summary.digestLow), digest_valid = true
                    WHERE device = \(device) AND flight = \(flight)
                    """)
                return (summary, true)
            }
            // A pair with no rows (a flight made up) is not kept: asking about such pairs must not push out the others.
            if summary.count > 0 { rowReads.note(pair, summary) }
            return summary
        }
    }

    /// Deprecated (``StoreReader/unstoredCount(of:)``).
    public func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int {
        try locked {
            var count = 0
            for record in records {
                let rows =
                    if case .order = record {
                        try run("SELECT 1 FROM orders WHERE id = \(record.id)")
                    } else {
                        try run("SELECT 1 FROM scans WHERE id = \(record.id)")
                    }
                if rows.first == nil { count += 1 }
            }
            return count
        }
    }

    public func lastCommit() throws -> Date? {
        try locked {
            try run("SELECT max(last_sync) FROM devices").first?.decode(Double?.self)
                .map(Date.init(timeIntervalSince1970:))
        }
    }

    public func orders(flight: FlightID?) throws -> [Order] {
        try locked {
            if let flight {
                try decodeOrders(orderRecords(flight: flight.rawValue))
            } else {
                try decodeOrders(run("SELECT record FROM orders ORDER BY flight, seq"))
            }
        }
    }

    public func bags(flight: FlightID?) throws -> [BagState] {
        try locked {
            try snapshot {
                var bags: [BagState] = []
                try forEachBagGroup(flight: flight) { _, group in bags += group }
                return bags
            }
        }
    }

    public func receipt(flight: FlightID, seat: Seat) throws -> Receipt? {
        let orders = try locked {
            try run(
                "SELECT record FROM orders WHERE flight = \(flight.rawValue) AND seat = \(seat.rawValue) ORDER BY seq"
            ).map { try decodeOrder($0.decode(Data.self)) }
        }
        return orders.isEmpty ? nil : try Receipt(flight: flight, seat: seat, orders: orders)
    }

    public func receipts(flight: FlightID) throws -> [Receipt] {
        try Receipt.all(orders: orders(flight: flight))
    }

    public func dirtyReceiptCount() throws -> Int {
        try locked { try run("SELECT count(*) FROM dirty_receipts").first?.decode(Int.self) ?? 0 }
    }

    public func flightReports(flight: FlightID?) throws -> FlightReports {
        try locked {
            try snapshot { try flightReportsInSnapshot(flight: flight) }
        }
    }

    /// ``flightReports(flight:)`` in a transaction ``snapshot(_:)`` opened: orders and bags as of one moment.
    private func flightReportsInSnapshot(flight: FlightID?) throws -> FlightReports {
        let orderFlights =
            if let flight {
                try run("SELECT DISTINCT flight FROM orders WHERE flight = \(flight.rawValue)")
                    .map { try $0.decode(String.self) }
            } else {
                try run("SELECT DISTINCT flight FROM orders ORDER BY flight").map { try $0.decode(String.self) }
            }
        var reports: [FlightReport] = []
        func emit(_ flight: FlightID, _ bags: [BagState]) throws {
            let rows = try orderRecords(flight: flight.rawValue)
            do {
                let orders = try decodeOrders(rows)
                reports.append(try FlightReport(flight: flight, orders: orders, bags: bags))
            } catch {
                reports.append(FlightReport(flight: flight, error: "\(error)", orders: rows.count, bags: bags))
            }
        }
        var next = 0
        try forEachBagGroup(flight: flight) { flight, bags in
            try Self.emitFlights(through: (flight, bags), orderFlights: orderFlights, next: &next, emit)
        }
        try Self.emitFlights(through: nil, orderFlights: orderFlights, next: &next, emit)
        return FlightReports(flights: reports)
    }

    public func itemReport(flight: FlightID?) throws -> ItemReport {
        ItemReport(flights: try flightReports(flight: flight).flights)
    }

    public func luggageReport(flight: FlightID?, status: Set<BagStatus>) throws -> LuggageReport {
        let groups = try locked {
            try snapshot {
                var groups: [BagStatus: [LuggageReport.Row]] = [:]
                try forEachBagGroup(flight: flight) { _, bags in
                    for row in LuggageReport.rows(forFlight: bags) where status.isEmpty || status.contains(row.status) {
                        groups[row.status, default: []].append(row)
                    }
                }
                return groups
            }
        }
        return LuggageReport(bags: BagStatus.reportOrder.flatMap { groups[$0] ?? [] })
    }

    public func deviceReport() throws -> DeviceReport {
        try locked {
            let rows = try run(
                """
                SELECT device, last_sync, batches, records, new_records, duplicates, rejects, last_reject_at,
                    last_reject_reason, limited
                FROM devices ORDER BY device
                """)
            return DeviceReport(
                devices: try rows.map { row in
                    let (device, lastSync, batches, records, new, duplicates, rejects, rejectAt, reason, limited) =
                        try row.decode((String, Double?, Int, Int, Int, Int, Int, Double?, String?, Int).self)
                    return DeviceStatistics(
                        device: device, lastSync: lastSync.map(Date.init(timeIntervalSince1970:)), batches: batches,
                        records: records, new: new, duplicates: duplicates, rejects: rejects,
                        lastRejectAt: rejectAt.map(Date.init(timeIntervalSince1970:)), lastRejectReason: reason,
                        limited: limited)
                })
        }
    }

    /// Groups `seat, seq, record` rows (in any order) by seat, in seat order: each seat's decoded orders in arrival
    /// (`seq`) order, or the error of the first order that does not decode (the other seats go on).
    ///
    /// The rows are sorted here, not by an `ORDER BY`: PostgreSQL's sort carries each row's record bytes and spilled
    /// to temporary files past `work_mem` (18 MB for a flight's 73,500 orders; 150 ms against 30 ms unsorted).
    func forEachSeat(
        _ rows: PostgresQueryResult, _ body: (String, Result<[Order], any Error>) throws -> Void
    ) throws {
        var keyed: [(seat: String, seq: Int, record: Data)] = []
        keyed.reserveCapacity(rows.count)
        for row in rows { keyed.append(try row.decode((String, Int, Data).self)) }
        // Seats are ASCII (`Seat`), so String's order is the byte order of `COLLATE "C"`.
        keyed.sort { ($0.seat, $0.seq) < ($1.seat, $1.seq) }
        var next = 0
        try Self.forEachSeat(
            rows: {
                guard next < keyed.count else { return nil }
                defer { next += 1 }
                return (keyed[next].seat, keyed[next].record)
            }, decode: decodeOrder, body)
    }

    /// `flight`'s stored orders' bytes in arrival (`seq`) order, sorted here for the reason ``forEachSeat(_:_:)``
    /// gives.
    func orderRecords(flight: String) throws -> [Data] {
        var keyed = try run("SELECT seq, record FROM orders WHERE flight = \(flight)").map {
            try $0.decode((Int, Data).self)
        }
        keyed.sort { $0.0 < $1.0 }
        return keyed.map(\.1)
    }

    // MARK: Internals

    func decodeOrder(_ bytes: Data) throws -> Order {
        var stream = RecordCoding.Stream()
        return try decodeOrder(bytes, stream: &stream)
    }

    /// Decodes stored orders in row order, checking what they share (their flight id) once.
    func decodeOrders(_ rows: some Sequence<PostgresRow>) throws -> [Order] {
        var stream = RecordCoding.Stream()
        return try rows.map { try decodeOrder($0.decode(Data.self), stream: &stream) }
    }

    /// Decodes stored orders' bytes in the order given, checking what they share (their flight id) once.
    func decodeOrders(_ records: [Data]) throws -> [Order] {
        var stream = RecordCoding.Stream()
        return try records.map { try decodeOrder($0, stream: &stream) }
    }

    /// Decodes a stored order, the rows before it having left what they share in `stream`.
    func decodeOrder(_ bytes: Data, stream: inout RecordCoding.Stream) throws -> Order {
        let record: JetbridgeModel.Record
        do { record = try stream.decode(bytes) } catch {
            throw StoreError(
                .undecodableRecord,
                "a stored order no longer decodes (\(error)); open the store with the codec it was written with",
                path: location.redacted)
        }
        guard case .order(let order) = record else {
            throw StoreError(.corruptRow, "a row of the orders table holds a \(record) record", path: location.redacted)
        }
        return order
    }

    /// Runs `body` in one read-only transaction that sees the store as of one moment (`REPEATABLE READ`), which a
    /// cursor of ``forEachBagGroup(flight:_:)`` needs. Called inside ``locked(timeout:_:)``.
    ///
    /// On a standby, replaying the primary's cleanup cancels a snapshot held past `max_standby_streaming_delay`
    /// (SQLSTATE 40001), or ends the connection when it waits between two fetches: `body` then runs again from the
    /// start, on a new connection if need be, at most ``snapshotAttempts`` times in all, so it must start from
    /// nothing each time (keep what it builds inside it).
    static let snapshotAttempts = 3

    func snapshot<T>(_ body: () throws -> T) throws -> T {
        var attempt = 1
        while true {
            try run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            do {
                let value = try body()
                try run("COMMIT")
                return value
            } catch let error as PostgresStoreError
                where (error.sqlState == "40001" || broken) && attempt < Self.snapshotAttempts
            {
                if broken {
                    try reconnectIfNeeded()
                } else {
                    _ = try? run("ROLLBACK")
                }
                logger.debug("report snapshot read again", metadata: ["attempt": .stringConvertible(attempt)])
                attempt += 1
            } catch {
                if !broken { _ = try? run("ROLLBACK") }
                throw error
            }
        }
    }

    /// How many scans one `FETCH` of ``forEachBagGroup(flight:_:)`` brings.
    public static let bagCursorRows = 10_000

    /// Streams merged bags one flight at a time, flights in order, bags in tag id order, as SQLite's does.
    ///
    /// The scans come through a server-side cursor, ``bagCursorRows`` at a time, folded through ``BagState`` as
    /// they come: memory holds one flight's bags and one fetch. Before, a whole-store report (`report flights` with
    /// no `--flight`) held every scan of the store as rows, then every bag, at once. Runs in a transaction
    /// ``snapshot(_:)`` opened.
    func forEachBagGroup(flight: FlightID?, _ body: (FlightID, [BagState]) throws -> Void) throws {
        let columns = "flight, tag, owner, weight, point, scanned_at, id, device"
        if let flight {
            try run(
                "DECLARE jetbridge_bags NO SCROLL CURSOR FOR SELECT \(unescaped: columns) FROM scans WHERE flight = \(flight.rawValue) ORDER BY tag, seq"
            )
        } else {
            try run(
                "DECLARE jetbridge_bags NO SCROLL CURSOR FOR SELECT \(unescaped: columns) FROM scans ORDER BY flight, tag, seq"
            )
        }
        var currentText = ""
        var current: FlightID?
        var group: [BagState] = []
        while true {
            var fetched = 0
            for row in try run("FETCH FORWARD \(unescaped: String(Self.bagCursorRows)) FROM jetbridge_bags") {
                fetched += 1
                let (flightText, tag, ownerText, weight, point, scannedAt, id, device) =
                    try row.decode((String, UUID, String, Double, Int16, Double, UUID, String).self)
                if flightText != currentText || current == nil {
                    if let current, !group.isEmpty { try body(current, group) }
                    group = []
                    current = try flightID(flightText)
                    currentText = flightText
                }
                let scan = Scan(
                    id: id, tag: LuggageTag(id: tag, owner: try ownerValue(ownerText), weight: weight),
                    point: point == 0 ? .origin : .destination,
                    scannedAt: Date(timeIntervalSinceReferenceDate: scannedAt), flight: current!, device: device)
                if let last = group.last, last.tagID == scan.tag.id {
                    group[group.count - 1].apply(scan)
                } else {
                    group.append(BagState(scan: scan))
                }
            }
            if fetched < Self.bagCursorRows { break }
        }
        try run("CLOSE jetbridge_bags")
        if let current, !group.isEmpty { try body(current, group) }
    }
}
