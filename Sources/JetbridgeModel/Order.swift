#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A sale to one passenger, identified by seat, on one flight.
///
/// Encoded as docs/PROTOCOL.md's order record, keys in this order: `type` (`"order"`), `id`, `revision`, `flight`, `seat`,
/// `lineItems`, `currency`, `createdAt`, `device`. Decoding checks the `type` and the shapes of typed fields
/// (``FlightID``, ``Seat``, UUID); the remaining rules are in ``validate()``, which the aggregator runs on every
/// decoded record. A correction keeps the `id` and raises the `revision`; the highest revision wins.
public struct Order: Codable, Hashable, Sendable {
    /// The record type tag written first in every order record.
    public static let recordType = "order"

    public var id: UUID
    public var revision: Int
    public var flight: FlightID
    public var seat: Seat
    public var lineItems: [LineItem]
    /// The inventory's currency; every price in the order is in its minor units.
    public var currency: String
    /// When the first revision was made; amendments keep it.
    public var createdAt: Date
    /// The device that wrote this revision.
    public var device: String

    /// Most lines (distinct items) on one order; with ``Item/maxUnitPrice`` and ``LineItem/maxCount`` it bounds an
    /// order's total so that no sum of orders overflows (docs/PROTOCOL.md).
    public static let maxLines = 64

    /// Builds an order without checking it; use ``make(id:revision:flight:seat:lines:inventory:createdAt:device:)``
    /// for input from people, or ``validate()`` afterwards.
    public init(
        id: UUID, revision: Int, flight: FlightID, seat: Seat, lineItems: [LineItem], currency: String,
        createdAt: Date, device: String
    ) {
        self.id = id
        self.revision = revision
        self.flight = flight
        self.seat = seat
        self.lineItems = lineItems
        self.currency = currency
        self.createdAt = createdAt
        self.device = device
    }

    public static let example = Order(
        id: UUID(uuidString: "3F2504E0-4F89-41D3-9A0C-0305E82C3301")!, revision: 1, flight: .example, seat: .example,
        lineItems: [
            LineItem(item: Item(name: "Peanuts", unitPrice: 200), count: 2),
            LineItem(item: Item(name: "Chips", unitPrice: 300), count: 1),
        ],
        currency: "USD", createdAt: Date(timeIntervalSince1970: 1_795_250_000), device: "galley-1")

    /// Builds and validates an order from what an attendant entered.
    ///
    /// Names are looked up in the menu (case-insensitively); the same item named twice is one line with the counts
    /// added; lines whose count is 0 are dropped.
    ///
    /// - Parameters:
    ///   - id: The order id; a new random one by default.
    ///   - revision: 1 for a new order.
    ///   - flight: The flight as typed, such as `ZA101/2026-11-21`.
    ///   - seat: The seat as typed, such as `17B` or `17b`.
    ///   - lines: Item names and counts, each count 0–99.
    ///   - inventory: The menu that names and prices the items and gives the currency.
    ///   - createdAt: The creation time.
    ///   - device: This device's id.
    /// - Returns: A valid order.
    /// - Throws: ``ValidationError``: `invalidFlight`, `invalidSeat`, `unknownItem`, `invalidCount`, `emptyOrder`,
    ///   `invalidRevision`, `invalidDevice`, `overflow`.
    public static func make(
        id: UUID = UUID(), revision: Int = 1, flight: String, seat: String, lines: [(name: String, count: Int)],
        inventory: Inventory, createdAt: Date = Date(), device: String
    ) throws -> Order {
        let flight = try FlightID(parsing: flight)
        let seat = try Seat(parsing: seat)
        var lineItems: [LineItem] = []
        for (index, line) in lines.enumerated() {
            let item = try inventory.item(named: line.name)
            guard (0...LineItem.maxCount).contains(line.count) else {
                throw ValidationError(
                    .invalidCount,
                    "count \(line.count) for '\(item.name)' is out of range; use 1–\(LineItem.maxCount) (0 leaves it out)",
                    path: "lines[\(index)].count")
            }
            if let existing = lineItems.firstIndex(where: { $0.item.name == item.name }) {
                lineItems[existing].count += line.count
                guard lineItems[existing].count <= LineItem.maxCount else {
                    throw ValidationError(
                        .invalidCount,
                        "'\(item.name)' adds up to \(lineItems[existing].count); use at most \(LineItem.maxCount) of one item per order",
                        path: "lines[\(index)].count")
                }
            } else {
                lineItems.append(LineItem(item: item, count: line.count))
            }
        }
        lineItems.removeAll { $0.count == 0 }
        let order = Order(
            id: id, revision: revision, flight: flight, seat: seat, lineItems: lineItems,
            currency: inventory.currency, createdAt: createdAt, device: device)
        try order.validate()
        return order
    }

    /// The next revision of this order with new lines: same id, flight and creation time, `revision + 1`.
    ///
    /// - Parameters:
    ///   - lines: The complete corrected lines (not a difference), as for ``make(id:revision:flight:seat:lines:inventory:createdAt:device:)``.
    ///   - inventory: The menu to price them with.
    ///   - seat: A corrected seat, or `nil` to keep the current one.
    ///   - device: The device making the correction, or `nil` to keep the current one.
    /// - Throws: ``ValidationError``, as ``make(id:revision:flight:seat:lines:inventory:createdAt:device:)``, or
    ///   `overflow` when the revision cannot be raised.
    public func amended(
        lines: [(name: String, count: Int)], inventory: Inventory, seat: String? = nil, device: String? = nil
    ) throws -> Order {
        guard revision < Int.max else {
            throw ValidationError(.overflow, "revision \(revision) cannot be raised further", path: "revision")
        }
        return try Order.make(
            id: id, revision: revision + 1, flight: flight.rawValue, seat: seat ?? self.seat.rawValue, lines: lines,
            inventory: inventory, createdAt: createdAt, device: device ?? self.device)
    }

    /// The sum of the line prices, in minor units.
    /// - Throws: ``ValidationError`` with code `overflow`.
    public var total: Int {
        get throws {
            var sum = 0
            for (index, line) in lineItems.enumerated() {
                let price: Int
                do { price = try line.price } catch var error as ValidationError {
                    error.path = "lineItems[\(index)]"
                    throw error
                }
                sum = try Money.add(sum, price, what: "the order total", path: "lineItems")
            }
            return sum
        }
    }

    /// Checks every rule a stored order must meet: revision ≥ 1, 1–``maxLines`` lines, counts 1–99, valid item
    /// names, prices 0…``Item/maxUnitPrice``, no item twice, a currency code, a device id, a creation time in
    /// 2000…2099 UTC, and a total that fits.
    ///
    /// Flight and seat are valid by construction.
    /// - Throws: ``ValidationError`` naming the field.
    public func validate() throws {
        guard revision >= 1 else {
            throw ValidationError(
                .invalidRevision, "revision \(revision) is invalid; revisions start at 1", path: "revision")
        }
        guard !lineItems.isEmpty else {
            throw ValidationError(
                .emptyOrder, "the order has no items; add at least one item with a count of 1 or more",
                path: "lineItems")
        }
        guard lineItems.count <= Self.maxLines else {
            throw ValidationError(
                .tooManyLines, "the order has \(lineItems.count) lines; an order has at most \(Self.maxLines)",
                path: "lineItems")
        }
        for (index, line) in lineItems.enumerated() {
            try line.validate(path: "lineItems[\(index)]")
            // Orders have a handful of lines; a linear scan beats hashing every name.
            guard !lineItems[..<index].contains(where: { $0.item.name == line.item.name }) else {
                throw ValidationError(
                    .duplicateItem,
                    "'\(line.item.name)' appears on two lines; put each item on one line with its count",
                    path: "lineItems[\(index)].item.name")
            }
        }
        try Validation.currency(currency)
        try Validation.deviceID(device)
        try createdAt.validate(path: "createdAt")
        _ = try total
    }

    /// Like ``validate()``, and also checks that every item is on `inventory`'s menu and the currency is its currency.
    /// - Throws: ``ValidationError``, including `unknownItem` and `currencyMismatch`.
    public func validate(against inventory: Inventory) throws {
        try validate()
        guard currency == inventory.currency else {
            throw ValidationError(
                .currencyMismatch, "the order is in \(currency) but the menu is in \(inventory.currency)",
                path: "currency")
        }
        for (index, line) in lineItems.enumerated()
        where !inventory.items.contains(where: { $0.name == line.item.name }) {
            var error = ValidationError(.unknownItem, "")
            do { _ = try inventory.item(named: line.item.name) } catch let lookup as ValidationError { error = lookup }
            error.message = error.message.isEmpty ? "unknown item '\(line.item.name)'" : error.message
            error.path = "lineItems[\(index)].item.name"
            throw error
        }
    }

    // MARK: Merge

    /// The order to keep when `incoming` arrives for an id that may already be stored: the higher revision wins; on
    /// a tie the existing one stays (so a redelivery changes nothing).
    ///
    /// Two different orders with the same id and revision would be a device bug; keeping the first stored is what a
    /// store's `ON CONFLICT … WHERE excluded.revision > revision` does, and it makes such a tie depend on arrival order.
    public static func merge(existing: Order?, incoming: Order) -> Order {
        guard let existing else { return incoming }
        return incoming.revision > existing.revision ? incoming : existing
    }

    /// The latest revision of each order id, in order of first appearance.
    public static func latestRevisions(_ orders: some Sequence<Order>) -> [Order] {
        var position: [UUID: Int] = [:]
        var result: [Order] = []
        for order in orders {
            if let index = position[order.id] {
                result[index] = merge(existing: result[index], incoming: order)
            } else {
                position[order.id] = result.count
                result.append(order)
            }
        }
        return result
    }

    // MARK: Codable

    enum CodingKeys: String, CodingKey {
        case type, id, revision, flight, seat, lineItems, currency, createdAt, device
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try container.checkRecordType(Self.recordType, forKey: .type)
        id = try container.decodeUUID(forKey: .id)
        revision = try container.decode(Int.self, forKey: .revision)
        flight = try container.decode(FlightID.self, forKey: .flight)
        seat = try container.decode(Seat.self, forKey: .seat)
        lineItems = try container.decode([LineItem].self, forKey: .lineItems)
        currency = try container.decode(String.self, forKey: .currency)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        device = try container.decode(String.self, forKey: .device)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.recordType, forKey: .type)
        try container.encode(id, forKey: .id)
        try container.encode(revision, forKey: .revision)
        try container.encode(flight, forKey: .flight)
        try container.encode(seat, forKey: .seat)
        try container.encode(lineItems, forKey: .lineItems)
        try container.encode(currency, forKey: .currency)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(device, forKey: .device)
    }
}
