public import Foundation
public import JetbridgeModel
import PostgresNIO

// The ground's view of the fleet (docs/PROTOCOL.md, "Announce"): announcements and confirmations per device and flight.
extension PostgresStore {
    public func recordAnnouncement(device: String, flights: [String], at now: Date, newFlightsPerDay: Int) throws
        -> Int
    {
        guard !flights.isEmpty else { return 0 }
        let seconds = now.timeIntervalSince1970
        return try locked {
            try transaction {
                // As SQLite's: a flight not announced before only while the device first announced fewer than
                // `newFlightsPerDay` in the last 24 hours. Two aggregators recording announces of one device at the
                // same moment each count without the other's: together they may let in up to twice the room.
                let sorted = flights.sorted()
                let known = Set(
                    try run(
                        "SELECT flight FROM announcements WHERE device = \(device) AND flight = ANY(\(sorted)::text[])"
                    ).map { try $0.decode(String.self) })
                var admitted = sorted
                if known.count < sorted.count {
                    let recent =
                        try run(
                            "SELECT count(*) FROM announcements WHERE device = \(device) AND first_announced_at > \(seconds - 86_400)"
                        ).first?.decode(Int.self) ?? 0
                    var room = newFlightsPerDay > recent ? newFlightsPerDay - recent : 0
                    admitted = sorted.filter { flight in
                        if known.contains(flight) { return true }
                        guard room > 0 else { return false }
                        room -= 1
                        return true
                    }
                }
                for flight in admitted {
                    try run(
                        """
                        INSERT INTO announcements (device, flight, announced_at, confirmed_at, first_announced_at)
                        VALUES (\(device), \(flight), \(seconds), NULL, \(seconds))
                        ON CONFLICT (device, flight) DO UPDATE SET announced_at = excluded.announced_at,
                            confirmed_at = NULL
                        """)
                }
                return (admitted.count, true)
            }
        }
    }

    public func recordConfirmation(device: String, flight: String, at now: Date) throws {
        let seconds = now.timeIntervalSince1970
        try locked {
            try transaction {
                try run(
                    "UPDATE announcements SET confirmed_at = \(seconds) WHERE device = \(device) AND flight = \(flight)")
                return ((), true)
            }
        }
    }
}

extension PostgresStore {
    public func fleetReport(flight: FlightID, now: Date) throws -> FleetReport {
        let name = flight.rawValue
        return try locked {
            let rows = try run(
                """
                SELECT d.device, a.announced_at, a.confirmed_at, coalesce(f.records, 0), v.last_sync
                FROM (SELECT device FROM announcements WHERE flight = \(name)
                      UNION SELECT device FROM device_flights WHERE flight = \(name)) AS d
                LEFT JOIN announcements AS a ON a.device = d.device AND a.flight = \(name)
                LEFT JOIN device_flights AS f ON f.device = d.device AND f.flight = \(name)
                LEFT JOIN devices AS v ON v.device = d.device
                ORDER BY d.device
                """)
            return FleetReport(
                flight: flight,
                devices: try rows.map { row in
                    let (device, announced, confirmed, records, lastSync) = try row.decode(
                        (String, Double?, Double?, Int, Double?).self)
                    return FleetReport.Row(
                        device: device, announcedAt: announced.map(Date.init(timeIntervalSince1970:)), records: records,
                        confirmedAt: confirmed.map(Date.init(timeIntervalSince1970:)),
                        lastSync: lastSync.map(Date.init(timeIntervalSince1970:)), now: now)
                })
        }
    }

    public func fleetCounts(since: Date, now: Date) throws -> [FleetFlightCounts] {
        let seconds = since.timeIntervalSince1970
        return try locked {
            let rows = try run(
                """
                SELECT a.flight, a.announced_at, a.confirmed_at, v.last_sync
                FROM announcements AS a LEFT JOIN devices AS v ON v.device = a.device
                WHERE a.flight IN (SELECT DISTINCT flight FROM announcements WHERE announced_at >= \(seconds))
                """)
            return FleetFlightCounts.counting(
                try rows.map(announcement), now: now)
        }
    }

    public func consoleFleet(flights: [FlightID], now: Date) throws -> [String: FleetFlightCounts] {
        guard !flights.isEmpty else { return [:] }
        let names = flights.map(\.rawValue)
        return try locked {
            // One page of the console's board: one probe each on `announcements_flight`.
            let rows = try run(
                """
                SELECT a.flight, a.announced_at, a.confirmed_at, v.last_sync
                FROM announcements AS a LEFT JOIN devices AS v ON v.device = a.device
                WHERE a.flight = ANY(\(names))
                """)
            return FleetFlightCounts.tally(
                try rows.map(announcement), now: now)
        }
    }

    /// One row of `SELECT a.flight, a.announced_at, a.confirmed_at, v.last_sync` (the fleet reads above).
    private func announcement(_ row: PostgresRow) throws -> FleetFlightCounts.Announcement {
        let (flight, announced, confirmed, lastSync) = try row.decode((String, Double, Double?, Double?).self)
        return (
            flight: flight, announcedAt: Date(timeIntervalSince1970: announced),
            confirmedAt: confirmed.map(Date.init(timeIntervalSince1970:)),
            lastSync: lastSync.map(Date.init(timeIntervalSince1970:))
        )
    }
}
