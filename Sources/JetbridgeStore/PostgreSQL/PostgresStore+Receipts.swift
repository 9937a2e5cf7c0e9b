import Foundation
public import JetbridgeModel
import NIOCore
import NIOPosix
import PostgresNIO

// The receipt walk: seats claimed with FOR UPDATE SKIP LOCKED, one writer per seat across aggregators.
extension PostgresStore {
    // MARK: Receipts

    public var name: String { location.redacted }

    public func flightsWithOrders() throws -> [FlightID] {
        try locked {
            try run("SELECT DISTINCT flight FROM orders ORDER BY flight").map { try flightID($0.decode(String.self)) }
        }
    }

    public func forEachReceipt(
        flight: FlightID, failed: (FlightID, Seat, any Error) -> Void, _ body: (Receipt) throws -> Void
    ) throws {
        // One flight's order rows in memory at a time (postgres-nio's future API returns them all), one seat's
        // decoded orders.
        let rows = try locked {
            try run("SELECT seat, record FROM orders WHERE flight = \(flight.rawValue) ORDER BY seat, seq")
        }
        try forEachSeat(rows) { seatText, orders in
            let seat = try seatValue(seatText)
            guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed) else { return }
            try body(receipt)
        }
    }

    /// Seats claimed per step of the receipt walk, at most: a commit that marks a claimed seat waits for the step's
    /// transaction (its files written and synced), so steps stay short (100 seats: 200 small files).
    static let receiptClaim = 100

    public func refreshReceipts(
        after: ReceiptMark?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        write: (FlightID, Seat, Receipt?) throws -> Void, durable: () throws -> Void
    ) throws -> [ReceiptMark] {
        try locked {
            try transaction {
                // Claimed: held until this transaction ends; another aggregator's walk skips them (and renders the
                // seats after them), a commit that marks one again waits, then marks it anew.
                let rows = try run(
                    """
                    SELECT flight, seat, generation FROM dirty_receipts
                    WHERE (flight, seat) > (\(after?.flight.rawValue ?? ""), \(after?.seat.rawValue ?? ""))
                    ORDER BY flight, seat LIMIT \(min(limit, Self.receiptClaim)) FOR UPDATE SKIP LOCKED
                    """)
                var marks: [ReceiptMark] = []
                for row in rows {
                    let (flight, seat, generation) = try row.decode((String, String, Int64).self)
                    marks.append(ReceiptMark(flight: try flightID(flight), seat: try seatValue(seat), generation: generation))
                }
                var failedSeats: Set<ReceiptMark> = []
                var index = 0
                while index < marks.count {
                    let flight = marks[index].flight
                    var seats: [Seat] = []
                    while index < marks.count, marks[index].flight == flight {
                        seats.append(marks[index].seat)
                        index += 1
                    }
                    let orderRows = try run(
                        """
                        SELECT seat, record FROM orders WHERE flight = \(flight.rawValue)
                            AND seat = ANY(\(seats.map(\.rawValue))) ORDER BY seat, seq
                        """)
                    var found: [String: Result<[Order], any Error>] = [:]
                    try forEachSeat(orderRows) { found[$0] = $1 }
                    for seat in seats {
                        guard let orders = found[seat.rawValue] else {
                            try write(flight, seat, nil)
                            continue
                        }
                        guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed)
                        else {
                            failedSeats.insert(ReceiptMark(flight: flight, seat: seat, generation: 0))
                            continue
                        }
                        try write(flight, seat, receipt)
                    }
                }
                guard !marks.isEmpty else { return (marks, true) }
                try durable()
                for mark in marks
                where !failedSeats.contains(ReceiptMark(flight: mark.flight, seat: mark.seat, generation: 0)) {
                    try run(
                        """
                        DELETE FROM dirty_receipts WHERE flight = \(mark.flight.rawValue) AND seat = \(mark.seat.rawValue)
                            AND generation = \(mark.generation)
                        """)
                }
                return (marks, true)
            }
        }
    }
}
