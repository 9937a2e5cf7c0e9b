public import Foundation
import JetbridgeModel
import PostgresNIO

// The ground's view of the fleet (docs/PROTOCOL.md, "Announce"): announcements and confirmations per device and flight.
extension PostgresStore {
    public func recordAnnouncement(device: String, flights: [String], at now: Date) throws {
        guard !flights.isEmpty else { return }
        let seconds = now.timeIntervalSince1970
        try locked {
            try transaction {
                for flight in flights {
                    try run(
                        """
                        INSERT INTO announcements (device, flight, announced_at, confirmed_at)
                        VALUES (\(device), \(flight), \(seconds), NULL)
                        ON CONFLICT (device, flight) DO UPDATE SET announced_at = excluded.announced_at,
                            confirmed_at = NULL
                        """)
                }
                return ((), true)
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
