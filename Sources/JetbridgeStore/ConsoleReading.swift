public import Foundation
public import JetbridgeModel

/// What the operator's console (`serve --console`) reads: small, bounded answers about one flight, one page of bags,
/// one bag, so that every page answers in well under a second at real sizes (a flight with 600,000 bags, a store of
/// 10 million records) and polling every few seconds costs the store little.
///
/// Both engines answer each from their indexes (`scans(flight, tag, point)` and `scans(flight, device)`: SQLite's
/// migration `console-indexes`, PostgreSQL's schema version 6; docs/STORE.md). The defaults below answer from
/// ``StoreReader``'s whole-flight reads, for an engine without such indexes: correct, but a page of a big flight reads
/// all its bags.
public protocol ConsoleReading: StoreReader {
    /// Every flight with an order or a scan, sorted by flight id.
    func consoleFlights() throws -> [FlightID]

    /// One flight's totals: orders and revenue in its one currency, items sold, bags by status, devices seen.
    func consoleSummary(flight: FlightID) throws -> ConsoleFlightSummary

    /// One flight's bags by status, as ``consoleSummary(flight:)`` counts them, without its sales (the
    /// `jetbridge_flight_bags` metric reads this for each recent flight).
    func consoleBagCounts(flight: FlightID) throws -> ConsoleBagCounts

    /// The devices that stored records of `flight` or announced it, by device id, with how many of each kind and
    /// their statistics.
    func consoleDevices(flight: FlightID) throws -> [ConsoleFlightDevice]

    /// Per flight of `flights` that a device announced, its announcing devices by state at `now` (the fleet report's
    /// states, counted as `status` and `/metrics` count them), keyed by flight id: one read for the whole list, so a
    /// board of 25 flights costs one query, not 25. A flight nobody announced is absent.
    func consoleFleet(flights: [FlightID], now: Date) throws -> [String: FleetFlightCounts]

    /// One page of `flight`'s bags in tag id order, after `after`, only `status` (all when `nil`); at most `limit`
    /// bags, and at most 500 whatever `limit` says.
    func consoleBags(flight: FlightID, status: BagStatus?, after: UUID?, limit: Int) throws -> ConsoleBagPage

    /// Every bag with tag id `tag`, on any flight (a tag is printed per flight; a reused one shows on several).
    func consoleBag(tag: UUID) throws -> [ConsoleBag]

    /// Keeps this reader's console totals (decoded sales, bag counts) in `kept` from now on, so that two readers of one
    /// store share them: the console reads today's flights at start on a reader of its own, which on PostgreSQL is a
    /// connection of its own, and its answers find them kept. The default keeps nothing.
    func keepConsoleTotals(in kept: ConsoleKept)

    /// Whether this reader has read `flight`'s summary since it opened (it keeps it): another read costs a check that
    /// nothing changed, or the changes since, where a first read decodes all its orders (0.6 s for a flight of
    /// 30,000 orders and 600,000 bags on PostgreSQL). The default: never.
    func consoleSummaryIsKept(flight: FlightID) -> Bool
}

/// What the engines keep of the console's reads between answers: each flight's decoded sales while its orders are
/// unchanged, and its bag counts and scans per device with the version of its scans they are right at. One per store
/// reader unless shared (``ConsoleReading/keepConsoleTotals(in:)``).
public final class ConsoleKept: Sendable {
    let sales = ConsoleSales()
    let tallies = ConsoleTallies()

    public init() {}
}

/// A flight's bags by status, as the luggage report counts them (``LuggageReport/rows(forFlight:)``).
public struct ConsoleBagCounts: Codable, Hashable, Sendable {
    public var total: Int
    public var arrived: Int
    public var inTransit: Int
    public var missing: Int
    public var checked: Int

    /// Counts from bags that arrived and bags that only departed (`checked`: neither, reserved).
    public init(total: Int, arrived: Int, departedOnly: Int) {
        self.total = total
        self.arrived = arrived
        // The rule of ``LuggageReport/rows(forFlight:)``: once one bag of a flight arrived, the departed ones that
        // did not are missing; before that they are in the air.
        inTransit = arrived > 0 ? 0 : departedOnly
        missing = arrived > 0 ? departedOnly : 0
        checked = max(0, total - arrived - departedOnly)
    }
}

/// One flight's line on the console's board.
public struct ConsoleFlightSummary: Hashable, Sendable {
    public var flight: FlightID
    /// Devices that stored an order or a scan of this flight, sorted.
    public var devices: [String]
    public var orders: Int
    /// The flight's one currency; empty with no orders (or an error).
    public var currency: String
    /// Minor units of ``currency``.
    public var revenue: Int
    public var items: [FlightReport.ItemSales]
    public var bags: ConsoleBagCounts
    /// Why the sales cannot be totalled (two currencies, an overflow, an order that no longer decodes).
    public var error: String?

    public init(
        flight: FlightID, devices: [String], orders: Int, currency: String, revenue: Int,
        items: [FlightReport.ItemSales], bags: ConsoleBagCounts, error: String?
    ) {
        self.flight = flight
        self.devices = devices
        self.orders = orders
        self.currency = currency
        self.revenue = revenue
        self.items = items
        self.bags = bags
        self.error = error
    }
}

/// A device that stored records of one flight.
public struct ConsoleFlightDevice: Hashable, Sendable {
    public var device: String
    public var orders: Int
    public var scans: Int
    /// Its statistics over every flight (last contact, rejected and limited batches).
    public var statistics: DeviceStatistics?

    public init(device: String, orders: Int, scans: Int, statistics: DeviceStatistics?) {
        self.device = device
        self.orders = orders
        self.scans = scans
        self.statistics = statistics
    }
}

/// One bag as the console shows it.
public struct ConsoleBag: Hashable, Sendable {
    public var bag: BagState
    public var status: BagStatus
    /// The device of its newest scan (`nil` when the engine does not say).
    public var lastDevice: String?
    /// Where its newest scan was made.
    public var lastPoint: ScanPoint?

    public init(bag: BagState, status: BagStatus, lastDevice: String?, lastPoint: ScanPoint?) {
        self.bag = bag
        self.status = status
        self.lastDevice = lastDevice
        self.lastPoint = lastPoint
    }
}

/// One page of bags and where the next begins.
public struct ConsoleBagPage: Hashable, Sendable {
    public var bags: [ConsoleBag]
    /// The `after` of the next page; `nil` on the last.
    public var next: UUID?

    public init(bags: [ConsoleBag], next: UUID?) {
        self.bags = bags
        self.next = next
    }
}

extension ConsoleReading {
    public func keepConsoleTotals(in kept: ConsoleKept) {}

    public func consoleSummaryIsKept(flight: FlightID) -> Bool { false }

    public func consoleFlights() throws -> [FlightID] {
        Set(try flightsWithOrders() + bags(flight: nil).map(\.flight)).sorted()
    }

    public func consoleSummary(flight: FlightID) throws -> ConsoleFlightSummary {
        let bags = try self.bags(flight: flight)
        let orders = try self.orders(flight: flight)
        let arrived = bags.count { $0.arrivedAt != nil }
        let departed = bags.count { $0.arrivedAt == nil && $0.departedAt != nil }
        let counts = ConsoleBagCounts(total: bags.count, arrived: arrived, departedOnly: departed)
        let devices = Set(orders.map(\.device)).sorted()
        return Self.summary(flight: flight, orders: orders, bags: counts, devices: devices)
    }

    public func consoleBagCounts(flight: FlightID) throws -> ConsoleBagCounts {
        let bags = try self.bags(flight: flight)
        let arrived = bags.count { $0.arrivedAt != nil }
        let departed = bags.count { $0.arrivedAt == nil && $0.departedAt != nil }
        return ConsoleBagCounts(total: bags.count, arrived: arrived, departedOnly: departed)
    }

    public func consoleDevices(flight: FlightID) throws -> [ConsoleFlightDevice] {
        let orders = try self.orders(flight: flight)
        let statistics = Dictionary(
            try deviceReport().devices.map { ($0.device, $0) }, uniquingKeysWith: { first, _ in first })
        var counts: [String: Int] = [:]
        for order in Order.latestRevisions(orders) { counts[order.device, default: 0] += 1 }
        let announced = try fleetReport(flight: flight, now: Date()).devices.filter { $0.announcedAt != nil }
        return Set(counts.keys).union(announced.map(\.device)).sorted().map {
            ConsoleFlightDevice(device: $0, orders: counts[$0] ?? 0, scans: 0, statistics: statistics[$0])
        }
    }

    public func consoleFleet(flights: [FlightID], now: Date) throws -> [String: FleetFlightCounts] {
        var counts: [String: FleetFlightCounts] = [:]
        for flight in flights {
            counts[flight.rawValue] = FleetFlightCounts(try fleetReport(flight: flight, now: now))
        }
        return counts
    }

    public func consoleBags(flight: FlightID, status: BagStatus?, after: UUID?, limit: Int) throws -> ConsoleBagPage {
        let rows = LuggageReport.rows(forFlight: try bags(flight: flight))
        let wanted = rows.filter { row in
            (status == nil || row.status == status) && (after.map { Self.tagOrder(row.bag.tagID, after: $0) } ?? true)
        }
        let page = wanted.prefix(limit).map { ConsoleBag(bag: $0.bag, status: $0.status, lastDevice: nil, lastPoint: nil) }
        return ConsoleBagPage(bags: Array(page), next: wanted.count > limit ? page.last?.bag.tagID : nil)
    }

    public func consoleBag(tag: UUID) throws -> [ConsoleBag] {
        let flights = Set(try bags(flight: nil).filter { $0.tagID == tag }.map(\.flight))
        return try flights.sorted().flatMap { flight in
            LuggageReport.rows(forFlight: try bags(flight: flight)).filter { $0.bag.tagID == tag }.map {
                ConsoleBag(bag: $0.bag, status: $0.status, lastDevice: nil, lastPoint: nil)
            }
        }
    }

    /// Whether `tag` sorts after `after` as the stores order tag ids (their 16 bytes, which is the upper-case text's
    /// order).
    static func tagOrder(_ tag: UUID, after: UUID) -> Bool { tag.uuidString > after.uuidString }

    /// A summary from a flight's orders: a flight whose orders cannot be totalled gets its error, never a failure.
    static func summary(flight: FlightID, orders: [Order], bags: ConsoleBagCounts, devices: [String])
        -> ConsoleFlightSummary
    {
        do {
            let report = try FlightReport(flight: flight, orders: orders, bags: [])
            return ConsoleFlightSummary(
                flight: flight, devices: devices, orders: report.orders, currency: report.currency,
                revenue: report.revenue, items: report.items, bags: bags, error: nil)
        } catch {
            return ConsoleFlightSummary(
                flight: flight, devices: devices, orders: Order.latestRevisions(orders).count, currency: "",
                revenue: 0, items: [], bags: bags, error: "\(error)")
        }
    }
}

/// Folds one flight's scans, sorted by tag, into its bags with their status and the device and point of each bag's
/// newest scan: the one fold both engines' console reads share.
struct ConsoleBagFolder {
    private var bags: [ConsoleBag] = []
    private var newest: [UUID: (device: String, point: ScanPoint)] = [:]

    /// Adds the next scan (scans of one tag come together).
    mutating func add(_ scan: Scan) {
        newest[scan.id] = (scan.device, scan.point)
        if let last = bags.last, last.bag.tagID == scan.tag.id {
            bags[bags.count - 1].bag.apply(scan)
        } else {
            bags.append(ConsoleBag(bag: BagState(scan: scan), status: .checked, lastDevice: nil, lastPoint: nil))
        }
    }

    /// The bags, each with its status: arrived, missing once the flight is unloading (`unloading`), else in transit
    /// or checked.
    func bags(unloading: Bool) -> [ConsoleBag] {
        bags.map { entry in
            var entry = entry
            let bag = entry.bag
            entry.status =
                bag.arrivedAt != nil ? .arrived : bag.departedAt != nil ? (unloading ? .missing : .inTransit) : .checked
            entry.lastDevice = newest[bag.newestScanID]?.device
            entry.lastPoint = newest[bag.newestScanID]?.point
            return entry
        }
    }
}
