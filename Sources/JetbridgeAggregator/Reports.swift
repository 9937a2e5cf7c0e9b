public import Foundation
internal import GRDB
public import JetbridgeModel

/// The operator reports `jetbridge-aggregator report` prints.
public enum ReportKind: String, CaseIterable, Hashable, Sendable {
    case flights, items, luggage, devices
}

/// One report's data, ready for ``ReportRenderer``.
public enum Report: Hashable, Sendable {
    case flights(FlightReports)
    case items(ItemReport)
    case luggage(LuggageReport)
    case devices(DeviceReport)
}

/// Sales per item over the selected flights: one row per item name and currency (amounts in two currencies are
/// never added), sorted by name, then currency.
public struct ItemReport: Hashable, Sendable {
    public struct Row: Hashable, Sendable {
        public var name: String
        public var currency: String
        public var count: Int
        /// Minor units of `currency`.
        public var revenue: Int
        /// Flights on which the item sold.
        public var flights: Int

        public init(name: String, currency: String, count: Int, revenue: Int, flights: Int) {
            self.name = name
            self.currency = currency
            self.count = count
            self.revenue = revenue
            self.flights = flights
        }
    }

    public var items: [Row]

    public init(items: [Row]) { self.items = items }

    /// Adds up the per-flight item sales of flight reports.
    /// - Throws: ``ValidationError`` with code `overflow`.
    public init(flights: [FlightReport]) throws {
        var rows: [String: Row] = [:]
        for flight in flights {
            for item in flight.items {
                // A separator that cannot occur in an item name or a currency code.
                let key = item.name + "\u{0}" + flight.currency
                var row = rows[key] ?? Row(name: item.name, currency: flight.currency, count: 0, revenue: 0, flights: 0)
                row.count = try Money.add(row.count, item.count, what: "the count of \(item.name)")
                row.revenue = try Money.add(row.revenue, item.revenue, what: "the revenue of \(item.name)")
                row.flights += 1
                rows[key] = row
            }
        }
        items = rows.values.sorted { ($0.name, $0.currency) < ($1.name, $1.currency) }
    }
}

/// Where a bag is, as the luggage report says it.
public enum BagStatus: String, Hashable, Sendable, CaseIterable {
    /// Known, but scanned at neither point (reserved: every scan today is at the origin or the destination).
    case checked
    /// Scanned at the origin, not at the destination, and no bag of its flight has arrived yet: still in the air.
    case departed
    /// Scanned at the destination.
    case arrived
    /// Scanned at the origin, not at the destination, while other bags of its flight have arrived.
    case missing
}

/// Every bag of the selected flights, sorted by flight, then tag id.
///
/// The flight report's `missing` (DESIGN.md: departed but not arrived) counts bags whose status here is `departed`
/// or `missing`: this report also tells a flight still in the air from one that is being unloaded.
public struct LuggageReport: Hashable, Sendable {
    public struct Row: Hashable, Sendable {
        public var bag: BagState
        public var status: BagStatus

        public init(bag: BagState, status: BagStatus) {
            self.bag = bag
            self.status = status
        }
    }

    public var bags: [Row]

    public init(bags: [Row]) { self.bags = bags }

    /// Rows for one flight's merged bags.
    public static func rows(forFlight bags: [BagState]) -> [Row] {
        let unloading = bags.contains { $0.arrivedAt != nil }
        return bags.map { bag in
            let status: BagStatus =
                if bag.arrivedAt != nil { .arrived } else if bag.departedAt != nil {
                    unloading ? .missing : .departed
                } else { .checked }
            return Row(bag: bag, status: status)
        }
    }
}

/// What each device has synced, from the statistics the store keeps with every batch.
public struct DeviceStatistics: Hashable, Sendable {
    public var device: String
    /// When a batch of this device was last stored.
    public var lastSync: Date?
    public var batches: Int
    public var records: Int
    public var new: Int
    public var duplicates: Int
    /// Rejected batches.
    public var rejects: Int
    public var lastRejectAt: Date?
    public var lastRejectReason: String?
    /// Batches answered `limited` (past the device's records per second or per flight).
    public var limited: Int

    public init(
        device: String, lastSync: Date?, batches: Int, records: Int, new: Int, duplicates: Int, rejects: Int,
        lastRejectAt: Date?, lastRejectReason: String?, limited: Int = 0
    ) {
        self.device = device
        self.lastSync = lastSync
        self.batches = batches
        self.records = records
        self.new = new
        self.duplicates = duplicates
        self.rejects = rejects
        self.lastRejectAt = lastRejectAt
        self.lastRejectReason = lastRejectReason
        self.limited = limited
    }
}

/// Per-device statistics, sorted by device id.
public struct DeviceReport: Hashable, Sendable {
    public var devices: [DeviceStatistics]

    public init(devices: [DeviceStatistics]) { self.devices = devices }
}

extension AggregatorStore {
    /// Builds one report.
    ///
    /// - Parameters:
    ///   - kind: Which report.
    ///   - flight: Only this flight (ignored by the devices report, whose statistics are per device).
    /// - Throws: `DatabaseError`, ``StoreError``, ``ValidationError`` (overflow, mixed currencies on a flight).
    public func report(_ kind: ReportKind, flight: FlightID? = nil) throws -> Report {
        switch kind {
        case .flights: .flights(try flightReports(flight: flight))
        case .items: .items(try itemReport(flight: flight))
        case .luggage: .luggage(try luggageReport(flight: flight))
        case .devices: .devices(try deviceReport())
        }
    }

    /// Per-flight totals computed by JetbridgeModel's ``FlightReport`` from the stored orders and merged bags, one
    /// flight in memory at a time, sorted by flight.
    public func flightReports(flight: FlightID? = nil) throws -> FlightReports {
        try pool.read { db in
            let orderFlights =
                if let flight {
                    try String.fetchAll(
                        db, sql: "SELECT DISTINCT flight FROM orders WHERE flight = ?", arguments: [flight.rawValue])
                } else {
                    try String.fetchAll(db, sql: "SELECT DISTINCT flight FROM orders ORDER BY flight")
                }
            var reports: [FlightReport] = []
            func emit(_ flight: FlightID, _ bags: [BagState]) throws {
                let orders = try decodeOrders(
                    db, sql: "SELECT record FROM orders WHERE flight = ?", arguments: [flight.rawValue])
                reports.append(try FlightReport(flight: flight, orders: orders, bags: bags))
            }
            var next = 0
            try Self.forEachBagGroup(flight: flight, in: db) { bagFlight, bags in
                while next < orderFlights.count, orderFlights[next] < bagFlight.rawValue {
                    try emit(try flightID(orderFlights[next]), [])
                    next += 1
                }
                if next < orderFlights.count, orderFlights[next] == bagFlight.rawValue { next += 1 }
                try emit(bagFlight, bags)
            }
            for text in orderFlights[next...] { try emit(try flightID(text), []) }
            return FlightReports(flights: reports)
        }
    }

    /// Item sales over all flights or one.
    public func itemReport(flight: FlightID? = nil) throws -> ItemReport {
        try ItemReport(flights: flightReports(flight: flight).flights)
    }

    /// Every bag with its status, over all flights or one.
    public func luggageReport(flight: FlightID? = nil) throws -> LuggageReport {
        try pool.read { db in
            var rows: [LuggageReport.Row] = []
            try Self.forEachBagGroup(flight: flight, in: db) { _, bags in rows += LuggageReport.rows(forFlight: bags) }
            return LuggageReport(bags: rows)
        }
    }

    /// Statistics of every device that sent a batch, stored or rejected.
    public func deviceReport() throws -> DeviceReport {
        try pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT device, last_sync, batches, records, new_records, duplicates, rejects, last_reject_at,
                        last_reject_reason, limited
                    FROM devices ORDER BY device
                    """)
            return DeviceReport(
                devices: rows.map { row in
                    DeviceStatistics(
                        device: row[0], lastSync: (row[1] as Double?).map(Date.init(timeIntervalSince1970:)),
                        batches: row[2], records: row[3], new: row[4], duplicates: row[5], rejects: row[6],
                        lastRejectAt: (row[7] as Double?).map(Date.init(timeIntervalSince1970:)),
                        lastRejectReason: row[8], limited: row[9])
                })
        }
    }
}
