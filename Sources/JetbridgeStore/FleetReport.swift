public import Foundation
public import JetbridgeModel

/// Where a device stands with a flight, as the ground sees it (docs/AGGREGATOR.md, "The fleet of a flight").
public enum FleetState: String, Codable, CaseIterable, Hashable, Sendable {
    /// The ground confirmed the device's summary of the flight after its last announcement.
    case confirmed
    /// Not confirmed, and the device was heard from (a batch stored or an announcement) in the last
    /// ``FleetReport/silentAfter``.
    case sending
    /// Not confirmed, and nothing heard from the device for ``FleetReport/silentAfter``: "silent since".
    case silent

    /// The state of a device not confirmed (`confirmedAt` nil), or confirmed, last heard from at `lastSeen`.
    static func of(confirmedAt: Date?, lastSeen: Date?, now: Date) -> FleetState {
        if confirmedAt != nil { return .confirmed }
        guard let lastSeen, now.timeIntervalSince(lastSeen) < FleetReport.silentAfter else { return .silent }
        return .sending
    }
}

/// `report devices --flight F`: every device that announced the flight or stored records of it, and where it stands.
public struct FleetReport: Hashable, Sendable {
    public struct Row: Hashable, Sendable {
        public var device: String
        /// The device's last announcement of the flight (nil: it never announced it, an agent before announcements).
        public var announcedAt: Date?
        /// Records the device first stored on the flight (the `device_flights` counter).
        public var records: Int
        /// When the ground confirmed the device's summary of the flight after its last announcement.
        public var confirmedAt: Date?
        /// The later of its last stored batch (any flight) and its last announcement of this flight.
        public var lastSeen: Date?
        public var state: FleetState

        public init(
            device: String, announcedAt: Date?, records: Int, confirmedAt: Date?, lastSync: Date?, now: Date
        ) {
            self.device = device
            self.announcedAt = announcedAt
            self.records = records
            self.confirmedAt = confirmedAt
            self.lastSeen = [announcedAt, lastSync].compactMap { $0 }.max()
            self.state = FleetState.of(confirmedAt: confirmedAt, lastSeen: lastSeen, now: now)
        }
    }

    public var flight: FlightID
    /// Sorted by device id.
    public var devices: [Row]

    public init(flight: FlightID, devices: [Row]) {
        self.flight = flight
        self.devices = devices
    }

    /// A device not confirmed and not heard from for this long is `silent` (the `JetbridgeCartSilent` alert's 30
    /// minutes).
    public static let silentAfter: TimeInterval = 30 * 60
}

/// One flight's devices by state, for `status` and `/metrics`: only devices that announced the flight count.
public struct FleetFlightCounts: Codable, Hashable, Sendable {
    public var flight: String
    public var confirmed: Int
    public var sending: Int
    public var silent: Int
    /// The flight's last announcement by any device.
    public var lastAnnouncedAt: Date

    public init(flight: String, confirmed: Int = 0, sending: Int = 0, silent: Int = 0, lastAnnouncedAt: Date) {
        self.flight = flight
        self.confirmed = confirmed
        self.sending = sending
        self.silent = silent
        self.lastAnnouncedAt = lastAnnouncedAt
    }

    /// The devices of `report` that announced its flight, by state (the report's own); `nil` when none did.
    public init?(_ report: FleetReport) {
        let announced = report.devices.filter { $0.announcedAt != nil }
        guard let last = announced.compactMap(\.announcedAt).max() else { return nil }
        self.init(flight: report.flight.rawValue, lastAnnouncedAt: last)
        for row in announced {
            switch row.state {
            case .confirmed: confirmed += 1
            case .sending: sending += 1
            case .silent: silent += 1
            }
        }
    }

    /// Devices that announced the flight, in any state.
    public var announced: Int { confirmed + sending + silent }

    /// How many devices are in `state`.
    public func count(_ state: FleetState) -> Int {
        switch state {
        case .confirmed: confirmed
        case .sending: sending
        case .silent: silent
        }
    }

    /// Flights announced within this window are counted (`status`, `/metrics`); older ones only in reports.
    public static let window: TimeInterval = 24 * 3600
    /// The most flights counted: the most recently announced (a bound on /metrics' series: 3 per flight).
    public static let maxFlights = 200

    /// One announcement row as the engines read it: the flight, when the device announced it, when the ground
    /// confirmed it for the device, and the device's last sync.
    typealias Announcement = (flight: String, announcedAt: Date, confirmedAt: Date?, lastSync: Date?)

    /// Counts announcement rows (flight, announced at, confirmed at, device's last sync) into flights, the most
    /// recently announced first, at most ``maxFlights``.
    static func counting(
        _ rows: [Announcement], now: Date
    ) -> [FleetFlightCounts] {
        Array(
            tally(rows, now: now).values.sorted { ($0.lastAnnouncedAt, $1.flight) > ($1.lastAnnouncedAt, $0.flight) }
                .prefix(maxFlights)
        ).sorted { $0.flight < $1.flight }
    }

    /// Counts announcement rows into flights, every flight the rows name (the console's board asks for one page's).
    static func tally(
        _ rows: [Announcement], now: Date
    ) -> [String: FleetFlightCounts] {
        var flights: [String: FleetFlightCounts] = [:]
        for row in rows {
            var counts = flights[row.flight] ?? FleetFlightCounts(flight: row.flight, lastAnnouncedAt: row.announcedAt)
            counts.lastAnnouncedAt = max(counts.lastAnnouncedAt, row.announcedAt)
            let lastSeen = [row.announcedAt, row.lastSync].compactMap { $0 }.max()
            switch FleetState.of(confirmedAt: row.confirmedAt, lastSeen: lastSeen, now: now) {
            case .confirmed: counts.confirmed += 1
            case .sending: counts.sending += 1
            case .silent: counts.silent += 1
            }
            flights[row.flight] = counts
        }
        return flights
    }
}
