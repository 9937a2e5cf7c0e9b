#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Totals for one flight, shaped exactly as `report flights --format json` prints them:
/// `{"flight", "currency", "orders", "revenue", "items": [{"name", "count", "revenue"}], "bags": {"checked",
/// "departed", "arrived", "missing", "weight", "conflicts"}}`.
///
/// - `orders` counts distinct order ids at their latest revision; `revenue` is in minor units.
/// - `items` are sorted by name, so two reports of the same data are identical byte for byte.
/// - `bags` count distinct tags on the flight; `missing` is departed but not arrived; `weight` is the sum of the
///   bags' weights in pounds, added in tag id order and rounded to 1/1000 lb so it does not depend on input order.
/// - `currency` is the orders' currency, or empty for a flight without orders (tables show `-`).
/// - `error` is absent unless the flight's sales cannot be totalled from what is stored (orders in two currencies or a
///   total that overflows, possible in stores written before the ground refused them, or an order that no longer
///   decodes): then it says why, `currency` is empty, `revenue` 0 (JSON `null`) and `items` empty, while `orders`
///   and `bags` are as usual, so one flight's data never makes a whole report fail.
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
    /// Why the flight's sales could not be totalled; `nil` for a sound flight.
    public var error: String?

    public init(
        flight: FlightID, currency: String, orders: Int, revenue: Int, items: [ItemSales], bags: Bags,
        error: String? = nil
    ) {
        self.flight = flight
        self.currency = currency
        self.orders = orders
        self.revenue = revenue
        self.items = items
        self.bags = bags
        self.error = error
    }

    /// The report of a flight whose sales cannot be totalled: its bags as usual, no currency, revenue or items, and
    /// the reason.
    ///
    /// - Parameters:
    ///   - flight: The flight.
    ///   - error: Why, for people (a ``ValidationError``'s description, say).
    ///   - orders: How many orders it has at their latest revision, as far as known.
    ///   - bags: Merged bag states; those of other flights are ignored.
    public init(flight: FlightID, error: String, orders: Int, bags: some Sequence<BagState>) {
        self.init(
            flight: flight, currency: Self.noCurrency, orders: orders, revenue: 0, items: [],
            bags: Self.bags(of: flight, bags), error: error)
    }

    /// The currency of a report with no orders: none (tables print `-`).
    public static let noCurrency = ""

    private enum CodingKeys: String, CodingKey {
        case flight, currency, orders, revenue, items, bags, error
    }

    /// Reads what `report flights --format json` prints, where a flight with an `error` has `"revenue": null`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            flight: try container.decode(FlightID.self, forKey: .flight),
            currency: try container.decode(String.self, forKey: .currency),
            orders: try container.decode(Int.self, forKey: .orders),
            revenue: try container.decodeIfPresent(Int.self, forKey: .revenue) ?? 0,
            items: try container.decode([ItemSales].self, forKey: .items),
            bags: try container.decode(Bags.self, forKey: .bags),
            error: try container.decodeIfPresent(String.self, forKey: .error))
    }

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
        self.init(
            flight: flight, currency: currencies.first ?? Self.noCurrency, orders: latest.count, revenue: revenue,
            items: sales.values.sorted { $0.name < $1.name }, bags: Self.bags(of: flight, bags))
    }

    /// The totals of `flight`'s bags among `bags`.
    static func bags(of flight: FlightID, _ bags: some Sequence<BagState>) -> Bags {
        let flightBags = bags.filter { $0.flight == flight }.sorted { $0.tagID.uuidString < $1.tagID.uuidString }
        let weight = flightBags.reduce(0.0) { $0 + $1.weight }
        return Bags(
            checked: flightBags.count, departed: flightBags.count { $0.departedAt != nil },
            arrived: flightBags.count { $0.arrivedAt != nil }, missing: flightBags.count(where: \.isMissing),
            weight: (weight * 1000).rounded() / 1000, conflicts: flightBags.count(where: \.ownerConflict))
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
