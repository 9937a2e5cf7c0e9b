#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What one passenger seat bought on one flight: every order for the seat at its latest revision, and the total.
///
/// ``text`` renders it for a file; the rendering depends only on the receipt's values (UTC times, no locale), so a
/// rebuild writes the same bytes.
public struct Receipt: Codable, Hashable, Sendable {
    public struct Line: Codable, Hashable, Sendable {
        public var name: String
        public var count: Int
        public var unitPrice: Int
        public var price: Int

        public init(name: String, count: Int, unitPrice: Int, price: Int) {
            self.name = name
            self.count = count
            self.unitPrice = unitPrice
            self.price = price
        }
    }

    public struct Entry: Codable, Hashable, Sendable {
        public var id: UUID
        public var revision: Int
        public var createdAt: Date
        public var device: String
        public var lines: [Line]
        public var subtotal: Int

        public init(id: UUID, revision: Int, createdAt: Date, device: String, lines: [Line], subtotal: Int) {
            self.id = id
            self.revision = revision
            self.createdAt = createdAt
            self.device = device
            self.lines = lines
            self.subtotal = subtotal
        }
    }

    public var flight: FlightID
    public var seat: Seat
    public var currency: String
    /// Oldest first (by creation time, then id).
    public var orders: [Entry]
    public var total: Int

    public init(flight: FlightID, seat: Seat, currency: String, orders: [Entry], total: Int) {
        self.flight = flight
        self.seat = seat
        self.currency = currency
        self.orders = orders
        self.total = total
    }

    public static let example = try! Receipt(flight: .example, seat: .example, orders: [.example])

    /// Builds the receipt for one seat.
    ///
    /// - Parameters:
    ///   - flight: The flight.
    ///   - seat: The seat.
    ///   - orders: Orders, any revisions and any seats; only this seat's latest revisions count.
    /// - Throws: ``ValidationError``: `overflow`, or `currencyMismatch` when the seat's orders use two currencies.
    public init(flight: FlightID, seat: Seat, orders: some Sequence<Order>) throws {
        // Sorted by (createdAt, id.uuidString): the id's bytes in order sort as its upper-case hex does, so the keys
        // are computed once rather than a string built in every comparison.
        // Indices are sorted, not orders: each copy of an order retains all its strings and arrays.
        let latest = Order.latestRevisions(orders.lazy.filter { $0.flight == flight && $0.seat == seat })
        let keys = latest.map(SortKey.init)
        let sorted = latest.indices.sorted { keys[$0] < keys[$1] }
        let currencies = Set(latest.map(\.currency))
        guard currencies.count <= 1 else {
            throw ValidationError(
                .currencyMismatch,
                "seat \(seat) on \(flight) has orders in \(currencies.sorted().joined(separator: " and ")); one flight sells in one currency",
                path: "currency")
        }
        var total = 0
        var entries: [Entry] = []
        entries.reserveCapacity(latest.count)
        for index in sorted {
            let lines = try latest[index].lineItems.map {
                Line(name: $0.item.name, count: $0.count, unitPrice: $0.item.unitPrice, price: try $0.price)
            }
            let subtotal = try latest[index].total
            total = try Money.add(total, subtotal, what: "the receipt total for seat \(seat)")
            entries.append(
                Entry(
                    id: latest[index].id, revision: latest[index].revision, createdAt: latest[index].createdAt,
                    device: latest[index].device, lines: lines, subtotal: subtotal))
        }
        self.init(
            flight: flight, seat: seat, currency: currencies.first ?? FlightReport.noCurrency, orders: entries,
            total: total)
    }

    /// One receipt per flight and seat that has orders, sorted by flight, then seat.
    /// - Throws: ``ValidationError``, as ``init(flight:seat:orders:)``.
    public static func all(orders: [Order]) throws -> [Receipt] {
        var groups: [FlightSeat: [Order]] = [:]
        for order in orders { groups[FlightSeat(flight: order.flight, seat: order.seat), default: []].append(order) }
        return try groups.keys.sorted { ($0.flight, $0.seat) < ($1.flight, $1.seat) }.map {
            try Receipt(flight: $0.flight, seat: $0.seat, orders: groups[$0]!)
        }
    }

    /// An order's place on a receipt: creation time, then id.
    private struct SortKey: Comparable {
        var createdAt: Date
        var high: UInt64
        var low: UInt64

        init(_ order: Order) {
            createdAt = order.createdAt
            let bytes = order.id.uuid
            (high, low) = withUnsafeBytes(of: bytes) {
                (
                    UInt64(bigEndian: $0.loadUnaligned(as: UInt64.self)),
                    UInt64(bigEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                )
            }
        }

        static func < (a: SortKey, b: SortKey) -> Bool {
            if a.createdAt != b.createdAt { return a.createdAt < b.createdAt }
            return (a.high, a.low) < (b.high, b.low)
        }
    }

    private struct FlightSeat: Hashable {
        var flight: FlightID
        var seat: Seat
    }

    /// A file name stem safe on every file system, such as `ZA101_2026-11-21_17B` (the flight's `/` becomes `_`).
    public var fileStem: String { "\(flight.rawValue.replacing("/", with: "_"))_\(seat.rawValue)" }

    /// The receipt as plain text with aligned columns, ending in a newline.
    ///
    /// ```
    /// Jetbridge receipt
    /// Flight: ZA101/2026-11-21
    /// Seat:   17B
    ///
    /// Order 3F2504E0-4F89-41D3-9A0C-0305E82C3301 (revision 1)
    /// 2026-11-21T03:53:20Z, device galley-1
    ///   Peanuts   2 x 2.00   4.00
    ///   Chips     1 x 3.00   3.00
    ///   Subtotal            7.00
    ///
    /// Total                 7.00 USD
    /// ```
    ///
    /// Rendered by ``textBytes()``.
    public var text: String { String(decoding: textBytes(), as: UTF8.self) }
}
