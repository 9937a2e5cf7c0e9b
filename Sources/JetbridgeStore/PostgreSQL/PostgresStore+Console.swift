public import Foundation
public import JetbridgeModel
import PostgresNIO

/// The console's reads (``ConsoleReading``) on PostgreSQL, each bounded by an index as on SQLite: `scans (flight, tag,
/// point)` for a flight's bags and their status, `scans (flight, device)` for its devices (schema version 6 on merge:
/// see ``PostgresStore/migrations``), `orders (flight, seat)` for its orders. Distinct flights and devices are loose
/// index scans (a recursive CTE taking the next `min`), one probe per value.
extension PostgresStore: ConsoleReading {
    public func consoleSummaryIsKept(flight: FlightID) -> Bool { consoleSales.holds(flight) }

    public func consoleFlights() throws -> [FlightID] {
        try locked {
            let rows = try run(
                """
                WITH RECURSIVE f(flight) AS (
                    SELECT min(flight) FROM scans
                    UNION ALL
                    SELECT (SELECT min(s.flight) FROM scans s WHERE s.flight > f.flight) FROM f WHERE f.flight IS NOT NULL
                )
                , o(flight) AS (
                    SELECT min(flight) FROM orders
                    UNION ALL
                    SELECT (SELECT min(x.flight) FROM orders x WHERE x.flight > o.flight) FROM o WHERE o.flight IS NOT NULL
                )
                SELECT flight FROM f WHERE flight IS NOT NULL UNION SELECT flight FROM o WHERE flight IS NOT NULL
                ORDER BY 1
                """)
            return try rows.map { try flightID($0.decode(String.self)) }
        }
    }

    public func consoleSummary(flight: FlightID) throws -> ConsoleFlightSummary {
        try locked {
            let tally = try scanTally(flight)
            let counts = tally.counts
            var devices = Set(tally.devices.keys)
            // SQLite's `ordersVersionSQL`, with `seq` for the rowid.
            var key = ConsoleSales.Version(count: 0, lastRow: 0, revisions: 0, rows: 0)
            for row in try run(
                """
                SELECT count(*), coalesce(max(seq), 0), coalesce(sum(revision), 0)::bigint, coalesce(sum(seq), 0)::bigint
                FROM orders WHERE flight = \(flight.rawValue)
                """)
            {
                let (count, last, revisions, rows) = try row.decode((Int, Int, Int, Int).self)
                key = ConsoleSales.Version(
                    count: count, lastRow: Int64(last), revisions: Int64(revisions), rows: Int64(rows))
            }
            if var summary = consoleSales.summary(flight, at: key) {
                summary.bags = counts
                summary.devices = devices.union(summary.devices).sorted()
                return summary
            }
            let rows = try orderRecords(flight: flight.rawValue)
            let summary: ConsoleFlightSummary
            do {
                let orders = try decodeOrders(rows)
                devices.formUnion(orders.map(\.device))
                summary = Self.summary(flight: flight, orders: orders, bags: counts, devices: devices.sorted())
            } catch {
                devices.formUnion(
                    try run("SELECT DISTINCT device FROM orders WHERE flight = \(flight.rawValue)").map {
                        try $0.decode(String.self)
                    })
                summary = ConsoleFlightSummary(
                    flight: flight, devices: devices.sorted(), orders: rows.count, currency: "", revenue: 0, items: [],
                    bags: counts, error: "\(error)")
            }
            consoleSales.keep(summary, at: key)
            return summary
        }
    }

    public func consoleBagCounts(flight: FlightID) throws -> ConsoleBagCounts {
        try locked { try scanTally(flight).counts }
    }

    public func consoleDevices(flight: FlightID) throws -> [ConsoleFlightDevice] {
        try locked {
            var orders: [String: Int] = [:]
            var scans: [String: Int] = [:]
            for row in try run(
                "SELECT device, count(*) FROM orders WHERE flight = \(flight.rawValue) GROUP BY device")
            {
                let (device, count) = try row.decode((String, Int).self)
                orders[device] = count
            }
            scans = try scanTally(flight).devices
            let announced = try run("SELECT device FROM announcements WHERE flight = \(flight.rawValue)").map {
                try $0.decode(String.self)
            }
            let devices = Set(orders.keys).union(scans.keys).union(announced).sorted()
            var statistics: [String: DeviceStatistics] = [:]
            for row in try run(
                """
                SELECT device, last_sync, batches, records, new_records, duplicates, rejects, last_reject_at,
                    last_reject_reason, limited
                FROM devices WHERE device = ANY(\(devices))
                """)
            {
                let (device, lastSync, batches, records, new, duplicates, rejects, rejectAt, reason, limited) =
                    try row.decode((String, Double?, Int, Int, Int, Int, Int, Double?, String?, Int).self)
                statistics[device] = DeviceStatistics(
                    device: device, lastSync: lastSync.map(Date.init(timeIntervalSince1970:)), batches: batches,
                    records: records, new: new, duplicates: duplicates, rejects: rejects,
                    lastRejectAt: rejectAt.map(Date.init(timeIntervalSince1970:)), lastRejectReason: reason,
                    limited: limited)
            }
            return devices.map {
                ConsoleFlightDevice(
                    device: $0, orders: orders[$0] ?? 0, scans: scans[$0] ?? 0, statistics: statistics[$0])
            }
        }
    }

    public func consoleBags(flight: FlightID, status: BagStatus?, after: UUID?, limit: Int) throws -> ConsoleBagPage {
        let limit = min(max(1, limit), Self.consoleBagsPageLimit)
        return try locked {
            let unloading = try unloading(flight)
            let having: String
            switch status {
            case nil: having = ""
            case .arrived: having = "HAVING max(point) = 1"
            case .missing where unloading, .inTransit where !unloading: having = "HAVING max(point) = 0"
            case .missing, .inTransit, .checked: return ConsoleBagPage(bags: [], next: nil)
            }
            // The nil UUID sorts first; a tag that is the nil UUID is matched by `>=` on the first page only.
            let start = after ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
            let comparison = after == nil ? ">=" : ">"
            let tags = try run(
                """
                SELECT tag FROM scans WHERE flight = \(flight.rawValue) AND tag \(unescaped: comparison) \(start)
                GROUP BY tag \(unescaped: having) ORDER BY tag LIMIT \(limit + 1)
                """
            ).map { try $0.decode(UUID.self) }
            let page = Array(tags.prefix(limit))
            var bags: [ConsoleBag] = []
            if !page.isEmpty {
                let rows = try run(
                    """
                    SELECT flight, tag, owner, weight, point, scanned_at, id, device FROM scans
                    WHERE flight = \(flight.rawValue) AND tag = ANY(\(page)) ORDER BY tag, seq
                    """)
                bags = try consoleBags(rows, flight: flight, unloading: unloading)
            }
            return ConsoleBagPage(bags: bags, next: tags.count > limit ? bags.last?.bag.tagID : nil)
        }
    }

    public func consoleBag(tag: UUID) throws -> [ConsoleBag] {
        try locked {
            let rows = try run(
                """
                WITH RECURSIVE f(flight) AS (
                    SELECT min(flight) FROM scans
                    UNION ALL
                    SELECT (SELECT min(s.flight) FROM scans s WHERE s.flight > f.flight) FROM f WHERE f.flight IS NOT NULL
                )
                SELECT s.flight, s.tag, s.owner, s.weight, s.point, s.scanned_at, s.id, s.device
                FROM f JOIN scans s ON s.flight = f.flight AND s.tag = \(tag)
                ORDER BY s.flight, s.seq
                """)
            var byFlight: [(String, [PostgresRow])] = []
            for row in rows {
                let flightText = try row.makeRandomAccess()[0].decode(String.self)
                if byFlight.last?.0 == flightText {
                    byFlight[byFlight.count - 1].1.append(row)
                } else {
                    byFlight.append((flightText, [row]))
                }
            }
            return try byFlight.flatMap { flightText, rows in
                let flight = try flightID(flightText)
                return try consoleBags(rows, flight: flight, unloading: unloading(flight))
            }
        }
    }

    // MARK: Helpers

    /// The most bags one page holds (their tags are bound one by one).
    static let consoleBagsPageLimit = 500

    /// A flight's bags by status and its scans per device, kept per flight (``ConsoleTallies``) with the number of
    /// the flight's scans they were counted at, and counted again only when that number changed: counting the bags of
    /// a flight of 600,000 takes about 0.4 s (a `GROUP BY tag` over 1.2 million index entries), counting its scans
    /// 50 ms. Scans are only ever inserted (the store never deletes or changes one), so an unchanged number means
    /// unchanged scans. SQLite catches up by rowid instead; PostgreSQL's `seq` rises in insert order, not commit
    /// order, so a catch-up by `seq` could miss a row committed late.
    ///
    /// The bags and the devices are counted by two statements; each also sums the scans it read, and the tally is
    /// kept only when both sums agree (no scan came between them).
    private func scanTally(_ flight: FlightID) throws -> ConsoleTallies.Tally {
        let scans = try run("SELECT count(*) FROM scans WHERE flight = \(flight.rawValue)").first.map {
            try $0.decode(Int.self)
        } ?? 0
        if let tally = consoleTallies.tally(flight), tally.lastRow == Int64(scans) { return tally }
        var tally = ConsoleTallies.Tally(lastRow: 0, total: 0, arrived: 0, devices: [:])
        for row in try run(
            """
            SELECT count(*), count(*) FILTER (WHERE arrived = 1), coalesce(sum(scans), 0)::bigint
            FROM (SELECT max(point) AS arrived, count(*) AS scans FROM scans WHERE flight = \(flight.rawValue)
                GROUP BY tag) b
            """)
        {
            let (total, arrived, counted) = try row.decode((Int, Int, Int).self)
            (tally.total, tally.arrived, tally.lastRow) = (total, arrived, Int64(counted))
        }
        var perDevice = 0
        for row in try run("SELECT device, count(*) FROM scans WHERE flight = \(flight.rawValue) GROUP BY device") {
            let (device, count) = try row.decode((String, Int).self)
            tally.devices[device] = count
            perDevice += count
        }
        if Int64(perDevice) == tally.lastRow { consoleTallies.keep(tally, for: flight) }
        return tally
    }

    private func unloading(_ flight: FlightID) throws -> Bool {
        try run("SELECT EXISTS (SELECT 1 FROM scans WHERE flight = \(flight.rawValue) AND point = 1)").first
            .map { try $0.decode(Bool.self) } ?? false
    }

    /// Folds scan rows (sorted by tag, then arrival) of one flight into bags with their status and newest scan.
    private func consoleBags(
        _ rows: some Sequence<PostgresRow>, flight: FlightID, unloading: Bool
    ) throws -> [ConsoleBag] {
        var folder = ConsoleBagFolder()
        for row in rows {
            let (_, tag, ownerText, weight, pointValue, scannedAt, id, device) =
                try row.decode((String, UUID, String, Double, Int16, Double, UUID, String).self)
            let point: ScanPoint = pointValue == 0 ? .origin : .destination
            let scan = Scan(
                id: id, tag: LuggageTag(id: tag, owner: try ownerValue(ownerText), weight: weight), point: point,
                scannedAt: Date(timeIntervalSinceReferenceDate: scannedAt), flight: flight, device: device)
            folder.add(scan)
        }
        return folder.bags(unloading: unloading)
    }
}
