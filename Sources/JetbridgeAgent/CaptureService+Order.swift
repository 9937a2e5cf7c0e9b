import FileQueue
public import JetbridgeModel
import Logging
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// What `order` stored: enough to print a confirmation and find the order again.
public struct RecordedOrder: Codable, Sendable, Hashable {
    /// One line as a receipt shows it: item name, count, unit price, price.
    public typealias Line = Receipt.Line

    public var id: UUID
    public var revision: Int
    public var flight: String
    public var seat: String
    public var lines: [Line]
    /// Minor units of `currency`.
    public var total: Int
    public var currency: String
    /// The total as people write it, such as `7.00`.
    public var totalText: String
    public var createdAt: Date
    public var device: String
    /// The record's queue sequence number.
    public var sequence: UInt64
}

extension CaptureService {
    /// Records a new order, durably.
    ///
    /// - Parameters:
    ///   - seat: The seat as typed, such as `17B`.
    ///   - lines: Item names and counts as typed (0–99; 0 drops the line).
    ///   - flight: A flight overriding the configuration's, or `nil`.
    /// - Returns: What was stored, once the record is durable in the queue.
    /// - Throws: ``AgentError``: `dataError` for an invalid order, `noInput` or `dataError` for a bad menu file,
    ///   `tryAgain` for a full disk or queue.
    public func recordOrder(
        seat: String, lines: [(name: String, count: Int)], flight: String? = nil
    ) throws(AgentError) -> RecordedOrder {
        let inventory = try configuration.loadInventory()
        let order: Order
        let time = timestamp()
        do {
            order = try Order.make(
                id: Self.newID(at: time), flight: flight ?? configuration.flight.rawValue, seat: seat, lines: lines,
                inventory: inventory, createdAt: time, device: configuration.device)
        } catch {
            throw AgentError(error, context: "order")
        }
        let encoded = try encode(order)
        // Open the queue before writing the ledger, so a broken queue leaves no ledger entry behind.
        let queue = try openQueue()
        // The ledger entry comes first: if the process dies after the append, the order can still be amended.
        try ledger.write(order, encoded: encoded)
        let sequence: UInt64
        do {
            sequence = try queue.append(encoded)
        } catch {
            try? ledger.remove(id: order.id)
            throw AgentError(queue: error, home: configuration.home)
        }
        logger.debug("order recorded", metadata: ["id": "\(order.id)", "sequence": .stringConvertible(sequence)])
        return try RecordedOrder(order, sequence: sequence)
    }

    /// Records a corrected order: same id, flight and creation time, the next revision.
    ///
    /// - Parameters:
    ///   - id: The order id as printed by `order`.
    ///   - lines: The complete corrected lines (not a difference).
    ///   - seat: A corrected seat, or `nil` to keep it.
    /// - Returns: What was stored, once durable.
    /// - Throws: ``AgentError``: `dataError` for an unknown id or invalid lines, `tryAgain` when another amendment
    ///   holds the ledger lock too long or the queue is full.
    public func amendOrder(
        id text: String, lines: [(name: String, count: Int)], seat: String? = nil
    ) throws(AgentError) -> RecordedOrder {
        guard let id = UUID(canonical: text.trimmingWhitespace()) else {
            throw AgentError(
                .dataError,
                "order --amend: '\(Validation.visible(text.prefix(80)))' is not an order id; use the id `order` printed, such as 0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D"
            )
        }
        let inventory = try configuration.loadInventory()
        let queue = try openQueue()
        let ledger = self.ledger
        return try ledger.withLock { () throws(AgentError) -> RecordedOrder in
            guard let existing = try ledger.read(id: id) else {
                throw AgentError(
                    .dataError,
                    "order --amend: no order \(id.uuidString) was taken on this device (looked in \(ledger.directory.path)); amend it on the device that recorded it, with the same --home"
                )
            }
            // An amendment is priced from today's menu, in its currency; the ground keeps one currency per flight,
            // so a menu whose currency changed since would make a correction the ground refuses (set aside by sync,
            // with the ledger already a revision on).
            guard inventory.currency == existing.currency else {
                throw AgentError(
                    .dataError,
                    "order --amend: order \(id.uuidString) was taken in \(existing.currency) and the menu is now in \(inventory.currency); an amendment is priced from the menu, and the ground keeps one currency per flight: amend it with a menu in \(existing.currency)"
                )
            }
            let amended: Order
            do {
                amended = try existing.amended(
                    lines: lines, inventory: inventory, seat: seat, device: configuration.device)
            } catch {
                throw AgentError(error, context: "order --amend")
            }
            let encoded = try encode(amended)
            // Ledger first, then the queue: a crash in between skips a revision, never repeats one.
            try ledger.write(amended, encoded: encoded)
            let sequence: UInt64
            do throws(FileQueueError) {
                sequence = try queue.append(encoded)
            } catch {
                if let previous = try? encode(existing) { try? ledger.write(existing, encoded: previous) }
                throw AgentError(queue: error, home: configuration.home)
            }
            logger.debug(
                "order amended",
                metadata: ["id": "\(id)", "revision": .stringConvertible(amended.revision), "sequence": .stringConvertible(sequence)])
            return try RecordedOrder(amended, sequence: sequence)
        }
    }
}

extension RecordedOrder {
    init(_ order: Order, sequence: UInt64) throws(AgentError) {
        do {
            self.init(
                id: order.id, revision: order.revision, flight: order.flight.rawValue, seat: order.seat.rawValue,
                lines: try order.lineItems.map {
                    Line(name: $0.item.name, count: $0.count, unitPrice: $0.item.unitPrice, price: try $0.price)
                },
                total: try order.total, currency: order.currency,
                totalText: Money.format(try order.total, currency: order.currency), createdAt: order.createdAt,
                device: order.device, sequence: sequence)
        } catch {
            throw AgentError(error, context: "order")
        }
    }
}
