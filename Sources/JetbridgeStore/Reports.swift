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
    /// `report devices --flight F`.
    case fleet(FleetReport)
}

/// Sales per item over the selected flights: one row per item name and currency (amounts in two currencies are
/// never added), sorted by name, then currency.
///
/// A flight whose sales cannot be totalled (its ``FlightReport`` has an `error`) adds nothing to the items; it gets a
/// row of its own instead, with an empty name and currency, `flights` 1 and the reason in `error`, after the items.
/// An item whose total over several flights would overflow keeps the sum of the flights before, and says so in
/// `error`.
public struct ItemReport: Hashable, Sendable {
    public struct Row: Hashable, Sendable {
        public var name: String
        public var currency: String
        public var count: Int
        /// Minor units of `currency`.
        public var revenue: Int
        /// Flights on which the item sold.
        public var flights: Int
        /// Why this row's totals are incomplete; `nil` for a sound row.
        public var error: String?

        public init(name: String, currency: String, count: Int, revenue: Int, flights: Int, error: String? = nil) {
            self.name = name
            self.currency = currency
            self.count = count
            self.revenue = revenue
            self.flights = flights
            self.error = error
        }
    }

    public var items: [Row]

    public init(items: [Row]) { self.items = items }

    /// Adds up the per-flight item sales of flight reports; never fails (see the type's notes for what an error
    /// row is).
    public init(flights: [FlightReport]) {
        var rows: [String: Row] = [:]
        var failed: [Row] = []
        for flight in flights {
            if let error = flight.error {
                failed.append(
                    Row(
                        name: "", currency: "", count: 0, revenue: 0, flights: 1,
                        error: "flight \(flight.flight) is left out: \(error)"))
                continue
            }
            for item in flight.items {
                // A separator that cannot occur in an item name or a currency code.
                let key = item.name + "\u{0}" + flight.currency
                var row = rows[key] ?? Row(name: item.name, currency: flight.currency, count: 0, revenue: 0, flights: 0)
                guard row.error == nil else { continue }
                do {
                    let count = try Money.add(row.count, item.count, what: "the count of \(item.name)")
                    let revenue = try Money.add(row.revenue, item.revenue, what: "the revenue of \(item.name)")
                    (row.count, row.revenue) = (count, revenue)
                    row.flights += 1
                } catch {
                    row.error = "\(error); the totals stop before flight \(flight.flight)"
                }
                rows[key] = row
            }
        }
        items = rows.values.sorted { ($0.name, $0.currency) < ($1.name, $1.currency) } + failed
    }
}

/// Where a bag is, as the luggage report (and the flights report's table, CSV and HTML) says it.
public enum BagStatus: String, Hashable, Sendable, CaseIterable {
    /// Known, but scanned at neither point (reserved: every scan today is at the origin or the destination).
    case checked
    /// Scanned at the origin, not at the destination, and no bag of its flight has arrived yet: still in the air.
    case inTransit = "in-transit"
    /// Scanned at the destination.
    case arrived
    /// Scanned at the origin, not at the destination, while other bags of its flight have arrived.
    case missing

    /// The order the luggage report lists bags in: the ones that need someone first.
    public static let reportOrder: [BagStatus] = [.missing, .inTransit, .checked, .arrived]
}

/// Every bag of the selected flights: missing bags first, then in transit, checked and arrived, each by flight, then
/// tag id.
///
/// The flight report's JSON `missing` (docs/STORE.md, "Reports": departed but not arrived) counts bags whose status here is
/// `in-transit` or `missing`: this report also tells a flight still in the air from one that is being unloaded.
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
                    unloading ? .missing : .inTransit
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

extension SQLiteStore {
    /// Per-flight totals computed by JetbridgeModel's ``FlightReport`` from the stored orders and merged bags, one
    /// flight in memory at a time, sorted by flight.
    ///
    /// A flight whose orders cannot be totalled (two currencies, an overflowing total, an order that no longer
    /// decodes) gets a report with its `error` and bags, and the others print: only a failing database stops it.
    public func flightReports(flight: FlightID? = nil) throws -> FlightReports {
        let (condition, arguments) = Self.flightCondition(flight)
        return try pool.read { db in
            let orderFlights = try String.fetchAll(
                db, sql: "SELECT DISTINCT flight FROM orders\(condition) ORDER BY flight", arguments: arguments)
            var reports: [FlightReport] = []
            func emit(_ flight: FlightID, _ bags: [BagState]) throws {
                do {
                    let orders = try decodeOrders(
                        db, sql: "SELECT record FROM orders WHERE flight = ?", arguments: [flight.rawValue])
                    reports.append(try FlightReport(flight: flight, orders: orders, bags: bags))
                } catch let error as DatabaseError {
                    throw error
                } catch {
                    let orders = try Int.fetchOne(
                        db, sql: "SELECT count(*) FROM orders WHERE flight = ?", arguments: [flight.rawValue])
                    reports.append(FlightReport(flight: flight, error: "\(error)", orders: orders ?? 0, bags: bags))
                }
            }
            var next = 0
            try Self.forEachBagGroup(flight: flight, in: db) {
                try Self.emitFlights(through: ($0, $1), orderFlights: orderFlights, next: &next, emit)
            }
            try Self.emitFlights(through: nil, orderFlights: orderFlights, next: &next, emit)
            return FlightReports(flights: reports)
        }
    }

    /// Item sales over all flights or one.
    public func itemReport(flight: FlightID? = nil) throws -> ItemReport {
        ItemReport(flights: try flightReports(flight: flight).flights)
    }

    /// Every bag with its status, over all flights or one, missing bags first.
    ///
    /// - Parameters:
    ///   - flight: Only this flight.
    ///   - status: Only bags with one of these statuses (all when empty).
    public func luggageReport(flight: FlightID? = nil, status: Set<BagStatus> = []) throws -> LuggageReport {
        try pool.read { db in
            var groups: [BagStatus: [LuggageReport.Row]] = [:]
            try Self.forEachBagGroup(flight: flight, in: db) { _, bags in
                for row in LuggageReport.rows(forFlight: bags) where status.isEmpty || status.contains(row.status) {
                    groups[row.status, default: []].append(row)
                }
            }
            return LuggageReport(bags: BagStatus.reportOrder.flatMap { groups[$0] ?? [] })
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
