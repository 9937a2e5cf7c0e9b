public import Foundation
internal import GRDB
public import JetbridgeModel

// The ground's view of the fleet (docs/PROTOCOL.md, "Announce"): announcements and confirmations per device and flight.
extension SQLiteStore {
    public func recordAnnouncement(device: String, flights: [String], at now: Date, newFlightsPerDay: Int) throws
        -> Int
    {
        guard !flights.isEmpty else { return 0 }
        return try calls.measure {
            try pool.write { db in
                let statement = try db.cachedStatement(sql: Self.announceSQL)
                let announced = try db.cachedStatement(sql: Self.announcedSQL)
                // How many new flights the device may still announce: read once, at its first new flight.
                var room: Int?
                var recorded = 0
                for flight in flights.sorted() {
                    if try Bool.fetchOne(announced, arguments: [device, flight]) == nil {
                        if room == nil {
                            let recent =
                                try Int.fetchOne(
                                    db, sql: Self.recentAnnouncementsSQL,
                                    arguments: [device, now.timeIntervalSince1970 - 86_400]) ?? 0
                            room = newFlightsPerDay > recent ? newFlightsPerDay - recent : 0
                        }
                        guard let left = room, left > 0 else { continue }
                        room = left - 1
                    }
                    try statement.execute(arguments: [device, flight, now.timeIntervalSince1970])
                    recorded += 1
                }
                return recorded
            }
        }
    }

    public func recordConfirmation(device: String, flight: String, at now: Date) throws {
        try calls.measure {
            try pool.write { db in
                try db.execute(sql: Self.confirmSQL, arguments: [now.timeIntervalSince1970, device, flight])
            }
        }
    }

    /// `first_announced_at` is set by the insert only: what ``recentAnnouncementsSQL`` counts.
    static let announceSQL = """
        INSERT INTO announcements (device, flight, announced_at, confirmed_at, first_announced_at) VALUES (?1, ?2, ?3, NULL, ?3)
        ON CONFLICT (device, flight) DO UPDATE SET announced_at = excluded.announced_at, confirmed_at = NULL
        """

    static let confirmSQL = "UPDATE announcements SET confirmed_at = ? WHERE device = ? AND flight = ?"

    /// Whether the device announced the flight before (its primary key).
    static let announcedSQL = "SELECT 1 FROM announcements WHERE device = ? AND flight = ?"

    /// The device's flights first announced after a time (its rows of the primary key, each checked): a flight
    /// announced again (the agent announces every flight it holds unconfirmed at each connection) is not new.
    static let recentAnnouncementsSQL = "SELECT count(*) FROM announcements WHERE device = ? AND first_announced_at > ?"
}

extension SQLiteStore {
    public func fleetReport(flight: FlightID, now: Date) throws -> FleetReport {
        try pool.read { db in
            let rows = try Row.fetchAll(db, sql: Self.fleetSQL, arguments: [flight.rawValue, flight.rawValue])
            return FleetReport(
                flight: flight,
                devices: rows.map { row in
                    FleetReport.Row(
                        device: row[0], announcedAt: (row[1] as Double?).map(Date.init(timeIntervalSince1970:)),
                        records: row[3], confirmedAt: (row[2] as Double?).map(Date.init(timeIntervalSince1970:)),
                        lastSync: (row[4] as Double?).map(Date.init(timeIntervalSince1970:)), now: now)
                })
        }
    }

    public func fleetCounts(since: Date, now: Date) throws -> [FleetFlightCounts] {
        try pool.read { db in
            let rows = try Row.fetchAll(db, sql: Self.fleetCountsSQL, arguments: [since.timeIntervalSince1970])
            return FleetFlightCounts.counting(
                rows.map(Self.announcement), now: now)
        }
    }

    public func consoleFleet(flights: [FlightID], now: Date) throws -> [String: FleetFlightCounts] {
        guard !flights.isEmpty else { return [:] }
        return try pool.read { db in
            let rows = try Row.fetchAll(
                db, sql: Self.consoleFleetSQL(flights: flights.count),
                arguments: StatementArguments(flights.map(\.rawValue)))
            return FleetFlightCounts.tally(
                rows.map(Self.announcement), now: now)
        }
    }

    /// The announcements of `flights` flights (one page of the console's board): one seek each on
    /// `announcements_flight`, the rows `fleetCountsSQL` reads for a flight.
    static func consoleFleetSQL(flights: Int) -> String {
        """
        SELECT a.flight, a.announced_at, a.confirmed_at, v.last_sync
        FROM announcements AS a LEFT JOIN devices AS v ON v.device = a.device
        WHERE a.flight IN (\(Array(repeating: "?", count: flights).joined(separator: ", ")))
        """
    }

    /// Every device with an announcement of the flight or a record first stored on it: its announcement, confirmation,
    /// records and last sync: a seek each on `announcements_flight` and `device_flights_flight`.
    static let fleetSQL = """
        SELECT d.device, a.announced_at, a.confirmed_at, coalesce(f.records, 0), v.last_sync
        FROM (SELECT device FROM announcements WHERE flight = ?1 UNION SELECT device FROM device_flights WHERE flight = ?2)
            AS d
        LEFT JOIN announcements AS a ON a.device = d.device AND a.flight = ?1
        LEFT JOIN device_flights AS f ON f.device = d.device AND f.flight = ?1
        LEFT JOIN devices AS v ON v.device = d.device
        ORDER BY d.device
        """

    /// The announcements of every flight announced since ?1 (`announcements_recent`, then `announcements_flight`).
    static let fleetCountsSQL = """
        SELECT a.flight, a.announced_at, a.confirmed_at, v.last_sync
        FROM announcements AS a LEFT JOIN devices AS v ON v.device = a.device
        WHERE a.flight IN (SELECT DISTINCT flight FROM announcements WHERE announced_at >= ?1)
        """

    /// One row of the fleet reads' `flight, announced_at, confirmed_at, last_sync`.
    private static func announcement(_ row: Row) -> FleetFlightCounts.Announcement {
        (
            flight: row[0], announcedAt: Date(timeIntervalSince1970: row[1]),
            confirmedAt: (row[2] as Double?).map(Date.init(timeIntervalSince1970:)),
            lastSync: (row[3] as Double?).map(Date.init(timeIntervalSince1970:))
        )
    }
}
