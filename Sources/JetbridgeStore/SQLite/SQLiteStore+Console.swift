public import Foundation
internal import GRDB
public import JetbridgeModel
import SystemSupport

/// The console's reads (``ConsoleReading``), each bounded by an index: `scans(flight, tag, point)` gives a flight's
/// bags in tag order with their status without touching the table, `scans(flight, device)` the devices of a flight
/// and their counts, `orders(flight)` its orders. Lists of distinct flights and devices are loose index scans (one
/// seek per value, SQLite's recursive-CTE idiom), so they cost per flight, not per record. The plans are checked by
/// `ConsoleStoreTests` (EXPLAIN QUERY PLAN) and timed by `console-benchmark`.
extension SQLiteStore: ConsoleReading {
    public func consoleSummaryIsKept(flight: FlightID) -> Bool { consoleSales.holds(flight) }

    public func consoleFlights() throws -> [FlightID] {
        try pool.read { db in
            // From `orders`, not `flights`: a flight's row there stays after its last order moved to another
            // flight, and the board listed it with no orders while `report flights` did not.
            let withOrders = try String.fetchAll(db, sql: Self.orderFlightsSQL)
            let withScans = try String.fetchAll(db, sql: Self.scanFlightsSQL)
            return try Self.merged(withOrders, withScans).map(flightID)
        }
    }

    /// Two lists sorted by byte order (each loose index scan's), as one sorted list without repeats, in one pass: a
    /// year of flights is 200,000 on each side.
    static func merged(_ a: [String], _ b: [String]) -> [String] {
        var merged: [String] = []
        merged.reserveCapacity(max(a.count, b.count))
        var (i, j) = (0, 0)
        while i < a.count && j < b.count {
            if a[i] < b[j] {
                merged.append(a[i])
                i += 1
            } else if b[j] < a[i] {
                merged.append(b[j])
                j += 1
            } else {
                merged.append(a[i])
                (i, j) = (i + 1, j + 1)
            }
        }
        return merged + a[i...] + b[j...]
    }

    public func consoleSummary(flight: FlightID) throws -> ConsoleFlightSummary {
        try pool.read { db in
            let tally = try scanTally(flight, in: db)
            let counts = tally.counts
            let devices = Set(tally.devices.keys)
            let version = try Row.fetchOne(db, sql: Self.ordersVersionSQL, arguments: [flight.rawValue])
            let key = ConsoleSales.Version(
                count: version?[0] ?? 0, lastRow: version?[1] ?? 0, revisions: version?[2] ?? 0, rows: version?[3] ?? 0)
            if var summary = consoleSales.summary(flight, at: key) {
                summary.bags = counts
                summary.devices = devices.union(summary.devices).sorted()
                return summary
            }
            let summary = try sales(flight, bags: counts, scanDevices: devices, in: db)
            consoleSales.keep(summary, at: key)
            return summary
        }
    }

    public func consoleBagCounts(flight: FlightID) throws -> ConsoleBagCounts {
        try pool.read { db in try scanTally(flight, in: db).counts }
    }

    /// A flight's sales decoded from its orders (the part of a summary ``ConsoleSales`` keeps).
    private func sales(
        _ flight: FlightID, bags counts: ConsoleBagCounts, scanDevices: Set<String>, in db: Database
    ) throws -> ConsoleFlightSummary {
        var devices = scanDevices
        let orders: [Order]
        do {
            orders = try decodeOrders(
                db, sql: "SELECT record FROM orders WHERE flight = ?", arguments: [flight.rawValue])
        } catch let error as DatabaseError {
            throw error
        } catch {
            devices.formUnion(
                try String.fetchAll(
                    db, sql: "SELECT DISTINCT device FROM orders WHERE flight = ?", arguments: [flight.rawValue]))
            let count = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM orders WHERE flight = ?", arguments: [flight.rawValue])
            return ConsoleFlightSummary(
                flight: flight, devices: devices.sorted(), orders: count ?? 0, currency: "", revenue: 0,
                items: [], bags: counts, error: "\(error)")
        }
        devices.formUnion(orders.map(\.device))
        return Self.summary(flight: flight, orders: orders, bags: counts, devices: devices.sorted())
    }

    public func consoleDevices(flight: FlightID) throws -> [ConsoleFlightDevice] {
        try pool.read { db in
            var orders: [String: Int] = [:]
            var scans: [String: Int] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT device, count(*) FROM orders WHERE flight = ? GROUP BY device",
                arguments: [flight.rawValue])
            {
                orders[row[0]] = row[1]
            }
            scans = try scanTally(flight, in: db).devices
            let announced = try String.fetchAll(db, sql: Self.announcedDevicesSQL, arguments: [flight.rawValue])
            let devices = Set(orders.keys).union(scans.keys).union(announced).sorted()
            var statistics: [String: DeviceStatistics] = [:]
            for device in devices {
                if let row = try Row.fetchOne(
                    db, sql: "\(Self.deviceStatisticsSQL) WHERE device = ?", arguments: [device])
                {
                    statistics[device] = Self.statistics(row)
                }
            }
            return devices.map {
                ConsoleFlightDevice(
                    device: $0, orders: orders[$0] ?? 0, scans: scans[$0] ?? 0, statistics: statistics[$0])
            }
        }
    }

    public func consoleBags(flight: FlightID, status: BagStatus?, after: UUID?, limit: Int) throws -> ConsoleBagPage {
        let limit = min(max(1, limit), Self.consoleBagsPageLimit)
        return try pool.read { db in
            let unloading = try scanTally(flight, in: db).arrived > 0
            let having: String
            switch status {
            case nil: having = ""
            case .arrived: having = " HAVING max(point) = 1"
            case .missing where unloading, .inTransit where !unloading: having = " HAVING max(point) = 0"
            case .missing, .inTransit, .checked: return ConsoleBagPage(bags: [], next: nil)
            }
            let afterBytes = after.map { withUnsafeBytes(of: $0.uuid) { Data($0) } } ?? Data()
            let tags = try Data.fetchAll(
                db,
                sql: """
                    SELECT tag FROM scans WHERE flight = ? AND tag > ? GROUP BY tag\(having) ORDER BY tag LIMIT ?
                    """,
                arguments: [flight.rawValue, afterBytes, limit + 1])
            let page = Array(tags.prefix(limit))
            var bags: [ConsoleBag] = []
            if !page.isEmpty {
                let marks = Array(repeating: "?", count: page.count).joined(separator: ", ")
                var arguments: StatementArguments = [flight.rawValue]
                for tag in page { arguments += [tag] }
                let rows = try Row.fetchAll(
                    db,
                    sql: "SELECT \(Self.scanColumns) FROM scans WHERE flight = ? AND tag IN (\(marks)) ORDER BY tag",
                    arguments: arguments)
                bags = try Self.consoleBags(rows: rows, flight: flight, unloading: unloading)
            }
            return ConsoleBagPage(bags: bags, next: tags.count > limit ? bags.last?.bag.tagID : nil)
        }
    }

    public func consoleBag(tag: UUID) throws -> [ConsoleBag] {
        try pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    WITH RECURSIVE f(flight) AS (\(Self.scanFlightsRecursion))
                    SELECT \(Self.scanColumns.split(separator: ",").map { "s.\($0.trimmingCharacters(in: .whitespaces))" }.joined(separator: ", "))
                    FROM f JOIN scans s ON s.flight = f.flight AND s.tag = ? WHERE f.flight IS NOT NULL
                    ORDER BY s.flight
                    """,
                arguments: [withUnsafeBytes(of: tag.uuid) { Data($0) }])
            var result: [ConsoleBag] = []
            var index = 0
            while index < rows.count {
                let flightText: String = rows[index][0]
                var end = index
                while end < rows.count, (rows[end][0] as String) == flightText { end += 1 }
                let flight = try flightID(flightText)
                result += try Self.consoleBags(
                    rows: Array(rows[index..<end]), flight: flight,
                    unloading: scanTally(flight, in: db).arrived > 0)
                index = end
            }
            return result
        }
    }

    // MARK: Queries

    /// The most bags one page holds: their tags are bound one by one (SQLite allows 32,766 variables).
    static let consoleBagsPageLimit = 500

    static let scanColumns = "flight, tag, owner, weight, point, scanned_at, id, device"

    /// Distinct flights of `scans`, one seek each on `scans(flight, tag, point)`.
    static let scanFlightsRecursion = """
        SELECT (SELECT min(flight) FROM scans)
        UNION ALL
        SELECT (SELECT min(flight) FROM scans WHERE scans.flight > f.flight) FROM f WHERE f.flight IS NOT NULL
        """

    /// Distinct flights of the orders, one seek each on `orders(flight)`.
    static let orderFlightsSQL = """
        WITH RECURSIVE f(flight) AS (
            SELECT (SELECT min(flight) FROM orders)
            UNION ALL
            SELECT (SELECT min(flight) FROM orders WHERE orders.flight > f.flight) FROM f WHERE f.flight IS NOT NULL
        )
        SELECT flight FROM f WHERE flight IS NOT NULL
        """

    static let scanFlightsSQL = """
        WITH RECURSIVE f(flight) AS (\(scanFlightsRecursion)) SELECT flight FROM f WHERE flight IS NOT NULL
        """

    /// Distinct devices of one flight's scans, one seek each on `scans(flight, device)`.
    static let scanDevicesSQL = """
        WITH RECURSIVE d(device) AS (
            SELECT (SELECT min(device) FROM scans WHERE flight = ?1)
            UNION ALL
            SELECT (SELECT min(device) FROM scans WHERE flight = ?1 AND device > d.device) FROM d
            WHERE d.device IS NOT NULL
        )
        SELECT device FROM d WHERE device IS NOT NULL
        """

    static let scanDeviceCountsSQL = """
        SELECT device, count(*) FROM scans INDEXED BY scans_flight_device WHERE flight = ? GROUP BY device
        """

    /// A flight's bags: how many, and how many have a destination scan (every scan is at one of the two points, so
    /// the others departed), from the index alone.
    static let bagCountsSQL = """
        SELECT count(*), coalesce(sum(arrived), 0)
        FROM (SELECT max(point) AS arrived FROM scans INDEXED BY scans_flight_tag WHERE flight = ? GROUP BY tag)
        """

    /// What changes whenever a flight's orders do: a new order adds a row (and a higher rowid), a correction raises
    /// a revision (revisions only rise), an order moved away lowers the count, and one row leaving while another comes
    /// changes the sum of the rowids. Without that sum, one commit moving an order of revision 2 away and another
    /// order in at revision 2 (neither the newest row) left the rest equal, and the board kept the old totals. Read
    /// through `orders(flight)` and the rows' revisions: milliseconds, where decoding a big flight's orders again
    /// takes a second.
    static let ordersVersionSQL = """
        SELECT count(*), coalesce(max(rowid), 0), coalesce(sum(revision), 0), coalesce(sum(rowid), 0)
        FROM orders WHERE flight = ?
        """

    /// The devices that announced a flight, from `announcements_flight` alone.
    static let announcedDevicesSQL = "SELECT device FROM announcements WHERE flight = ?"

    static let deviceStatisticsSQL = """
        SELECT device, last_sync, batches, records, new_records, duplicates, rejects, last_reject_at,
            last_reject_reason, limited
        FROM devices
        """

    /// Every console query with example arguments, for EXPLAIN QUERY PLAN (tests and `console-benchmark`).
    public static let consoleQueries: [(name: String, sql: String, arguments: [String])] = [
        ("flights with scans", scanFlightsSQL, []),
        ("flights with orders", orderFlightsSQL, []),
        ("devices of a flight's scans", scanDevicesSQL, ["ZA101/2026-11-21"]),
        ("scans per device of a flight", scanDeviceCountsSQL, ["ZA101/2026-11-21"]),
        ("bags by status of a flight", bagCountsSQL, ["ZA101/2026-11-21"]),
        (
            "a flight's scans since a tally",
            "SELECT tag, point FROM scans INDEXED BY scans_flight_device WHERE flight = ? AND device = 'ramp-1' AND rowid > 5",
            ["ZA101/2026-11-21"]
        ),
        (
            "a tag's scans before a tally",
            "SELECT max(point) FROM scans INDEXED BY scans_flight_tag WHERE flight = ? AND tag = X'00' AND rowid <= 5",
            ["ZA101/2026-11-21"]
        ),
        ("the newest scan", "SELECT coalesce(max(rowid), 0) FROM scans", []),
        (
            "a page of missing bags",
            "SELECT tag FROM scans WHERE flight = ? AND tag > X'' GROUP BY tag HAVING max(point) = 0 ORDER BY tag LIMIT 51",
            ["ZA101/2026-11-21"]
        ),
        ("the scans of a page's bags", "SELECT \(scanColumns) FROM scans WHERE flight = ? AND tag IN (X'00') ORDER BY tag", ["ZA101/2026-11-21"]),
        (
            "one tag on every flight",
            "WITH RECURSIVE f(flight) AS (\(scanFlightsRecursion)) SELECT s.id FROM f JOIN scans s ON s.flight = f.flight AND s.tag = X'00' WHERE f.flight IS NOT NULL",
            []
        ),
        ("orders of a flight", "SELECT record FROM orders WHERE flight = ?", ["ZA101/2026-11-21"]),
        ("whether a flight's orders changed", ordersVersionSQL, ["ZA101/2026-11-21"]),
        ("orders per device of a flight", "SELECT device, count(*) FROM orders WHERE flight = ? GROUP BY device", ["ZA101/2026-11-21"]),
        ("devices that announced a flight", announcedDevicesSQL, ["ZA101/2026-11-21"]),
        ("devices by fleet state of a page of flights", consoleFleetSQL(flights: 2), ["ZA101/2026-11-21", "ZA300/2026-11-21"]),
        ("the devices of a flight (its page; the fleet report)", fleetSQL, ["ZA101/2026-11-21", "ZA101/2026-11-21"]),
    ]

    /// `EXPLAIN QUERY PLAN` of every console query: name, then the plan's lines.
    public func consoleQueryPlans() throws -> [(name: String, plan: [String])] {
        try pool.read { db in
            try Self.consoleQueries.map { query in
                let rows = try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN \(query.sql)", arguments: StatementArguments(query.arguments))
                return (query.name, rows.map { $0["detail"] as String })
            }
        }
    }

    // MARK: Helpers


    /// A flight's bags by status and its scans per device, from ``ConsoleTallies`` when kept, brought up to date with
    /// the scans stored since; counted from the indexes when not kept (or when more than
    /// ``ConsoleTallies/catchUpLimit`` scans came since).
    ///
    /// Scans are only ever inserted, and a new row's rowid is above every row before it (the store never deletes a
    /// scan, and one writer commits at a time), so the rows a snapshot holds beyond the one a tally was made in are
    /// exactly those with a higher rowid: found per device of the flight on `scans(flight, device)`, whose entries are
    /// ordered by rowid within a device.
    func scanTally(_ flight: FlightID, in db: Database) throws -> ConsoleTallies.Tally {
        let devices = try String.fetchAll(db, sql: Self.scanDevicesSQL, arguments: [flight.rawValue])
        let lastRow = try Int64.fetchOne(db, sql: "SELECT coalesce(max(rowid), 0) FROM scans") ?? 0
        if var tally = consoleTallies.tally(flight), tally.lastRow <= lastRow {
            guard tally.lastRow < lastRow else { return tally }
            var fresh: [(device: String, tag: Data, point: Int)] = []
            // Prepared once per connection: a catch-up after a bulk sync asks one seek per new bag.
            let since = try db.cachedStatement(
                sql: """
                    SELECT tag, point FROM scans INDEXED BY scans_flight_device
                    WHERE flight = ? AND device = ? AND rowid > ?
                    """)
            let before = try db.cachedStatement(
                sql: """
                    SELECT max(point) FROM scans INDEXED BY scans_flight_tag
                    WHERE flight = ? AND tag = ? AND rowid <= ?
                    """)
            for device in devices {
                let rows = try Row.fetchCursor(since, arguments: [flight.rawValue, device, tally.lastRow])
                while let row = try rows.next() {
                    fresh.append((device, row[0], row[1]))
                    if fresh.count > ConsoleTallies.catchUpLimit { break }
                }
                if fresh.count > ConsoleTallies.catchUpLimit { break }
            }
            if fresh.count <= ConsoleTallies.catchUpLimit {
                var newest: [Data: Int] = [:]
                for scan in fresh {
                    tally.devices[scan.device, default: 0] += 1
                    newest[scan.tag] = max(newest[scan.tag] ?? 0, scan.point)
                }
                for (tag, point) in newest {
                    let earlier = try Int.fetchOne(before, arguments: [flight.rawValue, tag, tally.lastRow])
                    if earlier == nil { tally.total += 1 }
                    if point == 1 && earlier != 1 { tally.arrived += 1 }
                }
                tally.lastRow = lastRow
                consoleTallies.keep(tally, for: flight)
                return tally
            }
        }
        var tally = ConsoleTallies.Tally(lastRow: lastRow, total: 0, arrived: 0, devices: [:])
        if let row = try Row.fetchOne(db, sql: Self.bagCountsSQL, arguments: [flight.rawValue]) {
            (tally.total, tally.arrived) = (row[0], row[1])
        }
        for row in try Row.fetchAll(db, sql: Self.scanDeviceCountsSQL, arguments: [flight.rawValue]) {
            tally.devices[row[0]] = row[1]
        }
        consoleTallies.keep(tally, for: flight)
        return tally
    }

    static func statistics(_ row: Row) -> DeviceStatistics {
        DeviceStatistics(
            device: row[0], lastSync: (row[1] as Double?).map(Date.init(timeIntervalSince1970:)),
            batches: row[2], records: row[3], new: row[4], duplicates: row[5], rejects: row[6],
            lastRejectAt: (row[7] as Double?).map(Date.init(timeIntervalSince1970:)),
            lastRejectReason: row[8], limited: row[9])
    }

    /// Folds scan rows (``scanColumns``, sorted by tag) of one flight into bags with their status and newest scan.
    static func consoleBags(rows: [Row], flight: FlightID, unloading: Bool) throws -> [ConsoleBag] {
        var folder = ConsoleBagFolder()
        for row in rows { folder.add(try storedScan(row: row, flight: flight)) }
        return folder.bags(unloading: unloading)
    }
}

/// The console's decoded sales per flight, with the version of the flight's orders they were decoded at
/// (``SQLiteStore/ordersVersionSQL``): a board polled every few seconds decodes a flight's orders again only when they
/// changed. At most ``limit`` flights are kept; past it the cache starts again empty.
final class ConsoleSales: Sendable {
    struct Version: Hashable, Sendable {
        var count: Int
        var lastRow: Int64
        var revisions: Int64
        /// The sum of the rows' rowids (PostgreSQL: `seq`s).
        var rows: Int64
    }

    static let limit = 20_000
    private let kept = Locked<[String: (Version, ConsoleFlightSummary)]>([:])

    func summary(_ flight: FlightID, at version: Version) -> ConsoleFlightSummary? {
        kept.withLock { kept in kept[flight.rawValue].flatMap { $0.0 == version ? $0.1 : nil } }
    }

    /// Whether a summary of `flight` is kept, at any version: reading it again costs a check of the version (and
    /// the changes since), not a first read of all its orders.
    func holds(_ flight: FlightID) -> Bool {
        kept.withLock { $0[flight.rawValue] != nil }
    }

    func keep(_ summary: ConsoleFlightSummary, at version: Version) {
        kept.withLock { kept in
            if kept.count >= Self.limit { kept = [:] }
            kept[summary.flight.rawValue] = (version, summary)
        }
    }
}

/// Per flight, its bags by status and its scans per device as of a version of its scans: on SQLite the scans up to a
/// rowid (``SQLiteStore/scanTally(_:in:)``), on PostgreSQL the number of the flight's scans (`PostgresStore`'s
/// `scanTally`). Counting a flight of 600,000 bags from the index reads 1.2 million entries (about 0.3 s of CPU, a
/// second on a busy machine), where catching up on the scans stored since the last answer reads only those, and
/// counting the flight's scans on PostgreSQL tells in 50 ms whether anything changed. At most ``ConsoleSales/limit``
/// flights are kept; past it the cache starts again empty.
final class ConsoleTallies: Sendable {
    struct Tally: Sendable {
        /// The version this was right at: on SQLite the highest rowid of `scans`, on PostgreSQL the number of the
        /// flight's scans. Both only rise.
        var lastRow: Int64
        var total: Int
        var arrived: Int
        var devices: [String: Int]

        var counts: ConsoleBagCounts { ConsoleBagCounts(total: total, arrived: arrived, departedOnly: total - arrived) }
    }

    /// Past this many new scans of one flight, counting again from the index is cheaper than catching up.
    static let catchUpLimit = 100_000
    private let kept = Locked<[String: Tally]>([:])

    func tally(_ flight: FlightID) -> Tally? { kept.withLock { $0[flight.rawValue] } }

    func keep(_ tally: Tally, for flight: FlightID) {
        kept.withLock { kept in
            if kept.count >= ConsoleSales.limit { kept = [:] }
            // A slower reader with an older snapshot must not put back a tally older than the one kept.
            if let current = kept[flight.rawValue], current.lastRow > tally.lastRow { return }
            kept[flight.rawValue] = tally
        }
    }
}
