public import Foundation
internal import GRDB
import JetbridgeModel

// The ground's view of the fleet (docs/PROTOCOL.md, "Announce"): announcements and confirmations per device and flight.
extension SQLiteStore {
    public func recordAnnouncement(device: String, flights: [String], at now: Date) throws {
        guard !flights.isEmpty else { return }
        try calls.measure {
            try pool.write { db in
                let statement = try db.cachedStatement(sql: Self.announceSQL)
                for flight in flights {
                    try statement.execute(arguments: [device, flight, now.timeIntervalSince1970])
                }
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

    static let announceSQL = """
        INSERT INTO announcements (device, flight, announced_at, confirmed_at) VALUES (?, ?, ?, NULL)
        ON CONFLICT (device, flight) DO UPDATE SET announced_at = excluded.announced_at, confirmed_at = NULL
        """

    static let confirmSQL = "UPDATE announcements SET confirmed_at = ? WHERE device = ? AND flight = ?"
}
