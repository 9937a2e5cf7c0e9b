import Foundation

/// Totals for one flight, shaped exactly as `report flights --format json` prints them:
/// `{"flight", "currency", "orders", "revenue", "items": [{"name", "count", "revenue"}], "bags": {"checked",
/// "departed", "arrived", "missing", "weight", "conflicts"}}`.
///
/// - `orders` counts distinct order ids at their latest revision; `revenue` is in minor units.
/// - `items` are sorted by name, so two reports of the same data are identical byte for byte.
/// - `bags` count distinct tags on the flight; `missing` is departed but not arrived; `weight` is the sum of the
///   bags' weights in pounds, added in tag id order and rounded to 1/1000 lb so it does not depend on input order.
/// - `currency` is the orders' currency, or `XXX` (ISO 4217 "no currency") for a flight without orders.
public struct FlightReport: Codable, Hashable, Sendable {
    public struct ItemSales: Codable, Hashable, Sendable {
        public var name: String
        public var count: Int
        public var revenue: Int

        public init(name: String, count: Int, revenue: Int) {
            self.name = name
            self.count = count
            self.revenue = revenue
        }
    }

    public struct Bags: Codable, Hashable, Sendable {
        public var checked: Int
        public var departed: Int
        public var arrived: Int
        public var missing: Int
        public var weight: Double
        public var conflicts: Int

        public init(checked: Int, departed: Int, arrived: Int, missing: Int, weight: Double, conflicts: Int) {
            self.checked = checked
            self.departed = departed
            self.arrived = arrived
            self.missing = missing
            self.weight = weight
            self.conflicts = conflicts
        }
    }

    public var flight: FlightID
    public var currency: String
    public var orders: Int
    public var revenue: Int
    public var items: [ItemSales]
    public var bags: Bags

    public init(flight: FlightID, currency: String, orders: Int, revenue: Int, items: [ItemSales], bags: Bags) {
        self.flight = flight
        self.currency = currency
        self.orders = orders
        self.revenue = revenue
        self.items = items
        self.bags = bags
    }

    /// The currency of a report with no orders.
    public static let noCurrency = "XXX"

    public static let example = try! FlightReport(
        flight: .example, orders: [.example], bags: [.example])

    /// Computes one flight's totals.
    ///
    /// - Parameters:
    ///   - flight: The flight to report; orders and bags of other flights are ignored.
    ///   - orders: Orders, any revisions; only the latest revision of each id counts.
    ///   - bags: Merged bag states (see ``BagState/bags(from:)``).
    /// - Throws: ``ValidationError``: `overflow`, or `currencyMismatch` when the flight's orders use two currencies.
    public init(flight: FlightID, orders: some Sequence<Order>, bags: some Sequence<BagState>) throws {
        let latest = Order.latestRevisions(orders.lazy.filter { $0.flight == flight })
        let currencies = Set(latest.map(\.currency))
        guard currencies.count <= 1 else {
            throw ValidationError(
                .currencyMismatch,
                "flight \(flight) has orders in \(currencies.sorted().joined(separator: " and ")); one flight sells in one currency",
                path: "currency")
        }
        var revenue = 0
        var sales: [String: ItemSales] = [:]
        for order in latest {
            for line in order.lineItems {
                let price = try line.price
                revenue = try Money.add(revenue, price, what: "flight \(flight) revenue")
                var entry = sales[line.item.name] ?? ItemSales(name: line.item.name, count: 0, revenue: 0)
                entry.count = try Money.add(entry.count, line.count, what: "the count of \(line.item.name)")
                entry.revenue = try Money.add(entry.revenue, price, what: "the revenue of \(line.item.name)")
                sales[line.item.name] = entry
            }
        }
        let flightBags = bags.filter { $0.flight == flight }.sorted { $0.tagID.uuidString < $1.tagID.uuidString }
        let weight = flightBags.reduce(0.0) { $0 + $1.weight }
        self.init(
            flight: flight, currency: currencies.first ?? Self.noCurrency, orders: latest.count, revenue: revenue,
            items: sales.values.sorted { $0.name < $1.name },
            bags: Bags(
                checked: flightBags.count, departed: flightBags.count { $0.departedAt != nil },
                arrived: flightBags.count { $0.arrivedAt != nil }, missing: flightBags.count(where: \.isMissing),
                weight: (weight * 1000).rounded() / 1000, conflicts: flightBags.count(where: \.ownerConflict)))
    }

    /// One report per flight that has orders or bags, sorted by flight id.
    /// - Throws: ``ValidationError``, as ``init(flight:orders:bags:)``.
    public static func all(orders: [Order], bags: [BagState]) throws -> [FlightReport] {
        let flights = Set(orders.map(\.flight)).union(bags.map(\.flight)).sorted()
        return try flights.map { try FlightReport(flight: $0, orders: orders, bags: bags) }
    }
}

/// The document `report flights --format json` prints: `{"flights": [...]}`.
public struct FlightReports: Codable, Hashable, Sendable {
    public var flights: [FlightReport]

    public init(flights: [FlightReport]) {
        self.flights = flights
    }

    public static let example = FlightReports(flights: [.example])
}
