import Foundation
public import JetbridgeModel
import NIOCore
import NIOPosix
import PostgresNIO

// The receipt walk: seats claimed for a lease (no row lock held across file I/O), one writer per seat across
// aggregators.
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
            try run("SELECT seat, seq, record FROM orders WHERE flight = \(flight.rawValue)")
        }
        try forEachSeat(rows) { seatText, orders in
            let seat = try seatValue(seatText)
            guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed) else { return }
            try body(receipt)
        }
    }

    /// Seats claimed per step of the receipt walk, at most: 200 small files written under one claim.
    static let receiptClaim = 100

    /// One step of the walk in four short parts, none holding a row lock across file I/O (issue 23 item 10):
    ///
    /// 1. **Claim** (one statement): up to 100 marked seats after `after` that no live claim holds are stamped
    ///    with this store's session and an expiry (``Timeouts/claimLease`` from the server's clock); rows another
    ///    transaction is writing are skipped (`SKIP LOCKED`), and so are seats another aggregator claimed, until
    ///    its claim expires: then this one takes them over.
    /// 2. **Render**: each claimed flight's orders read (one statement), each receipt written by `write`, the claims
    ///    renewed before a seat once a third of the lease has passed; then `durable`.
    /// 3. **Clear** (one short transaction): the claimed marks locked in key order; each still ours is deleted if
    ///    its generation is unchanged, else released (a newer commit marked it: rendered again later). A seat whose
    ///    claim another aggregator took over meanwhile may have had our older file renamed over its newer one: it is
    ///    marked again, so that it is rendered once more.
    /// 4. On an error in between, the claims are released (or end with the lease).
    public func refreshReceipts(
        after: ReceiptMark?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        write: (FlightID, Seat, Receipt?) throws -> Void, durable: () throws -> Void
    ) throws -> [ReceiptMark] {
        let marks = try claimReceipts(after: after, limit: min(limit, Self.receiptClaim))
        guard !marks.isEmpty else { return [] }
        var failedSeats: Set<SeatKey> = []
        do {
            var renewed = ContinuousClock.now
            var index = 0
            while index < marks.count {
                let flight = marks[index].flight
                var seats: [Seat] = []
                while index < marks.count, marks[index].flight == flight {
                    seats.append(marks[index].seat)
                    index += 1
                }
                var found: [String: Result<[Order], any Error>] = [:]
                try locked {
                    let rows = try run(
                        """
                        SELECT seat, seq, record FROM orders WHERE flight = \(flight.rawValue)
                            AND seat = ANY(\(seats.map(\.rawValue)))
                        """)
                    try forEachSeat(rows) { found[$0] = $1 }
                }
                for seat in seats {
                    // A slow file system must not let the claims lapse while this writer is still at work.
                    if ContinuousClock.now - renewed > timeouts.claimLease / 3 {
                        try renewReceiptClaims()
                        renewed = .now
                    }
                    let receipt: Receipt?
                    if let orders = found[seat.rawValue] {
                        guard let made = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed)
                        else {
                            failedSeats.insert(SeatKey(flight: flight.rawValue, seat: seat.rawValue))
                            continue
                        }
                        receipt = made
                    } else {
                        receipt = nil
                    }
                    // One seat whose files cannot be written fails alone (``ReceiptSeatFailure``).
                    if try !writeSeat(flight, seat, receipt, write: write, failed: failed) {
                        failedSeats.insert(SeatKey(flight: flight.rawValue, seat: seat.rawValue))
                    }
                }
            }
            try durable()
        } catch {
            try? releaseReceiptClaims(marks)
            throw error
        }
        try clearReceiptMarks(marks, failed: failedSeats)
        return marks
    }

    /// Claims up to `limit` marked seats after `after`, in key order: those no one claims, those whose claim
    /// expired, and this store's own (left by a step that failed).
    func claimReceipts(after: ReceiptMark?, limit: Int) throws -> [ReceiptMark] {
        let lease = Int(timeouts.claimLease / .milliseconds(1))
        let rows = try locked {
            try run(
                """
                UPDATE dirty_receipts AS d
                SET claimed_by = \(session), claimed_until = clock_timestamp() + \(lease) * interval '1 millisecond'
                FROM (
                    SELECT flight, seat, claimed_by FROM dirty_receipts
                    WHERE (flight, seat) > (\(after?.flight.rawValue ?? ""), \(after?.seat.rawValue ?? ""))
                        AND (claimed_by IS NULL OR claimed_by = \(session) OR claimed_until < clock_timestamp())
                    ORDER BY flight, seat LIMIT \(limit) FOR UPDATE SKIP LOCKED
                ) AS c
                WHERE d.flight = c.flight AND d.seat = c.seat
                RETURNING d.flight, d.seat, d.generation, c.claimed_by
                """)
        }
        var marks: [ReceiptMark] = []
        var takenOver: [String: Int] = [:]
        for row in rows {
            let (flight, seat, generation, previous) = try row.decode((String, String, Int64, String?).self)
            marks.append(ReceiptMark(flight: try flightID(flight), seat: try seatValue(seat), generation: generation))
            if let previous, previous != session { takenOver[previous, default: 0] += 1 }
        }
        for (holder, seats) in takenOver {
            logger.notice(
                "took over receipts another aggregator claimed and did not finish in time",
                metadata: ["claimedBy": "\(holder)", "seats": "\(seats)"])
        }
        // RETURNING follows no order; the walk goes in key order (text compared as bytes, as `COLLATE "C"`).
        return marks.sorted {
            ($0.flight.rawValue.utf8.lexicographicallyPrecedes($1.flight.rawValue.utf8))
                || ($0.flight == $1.flight && $0.seat.rawValue.utf8.lexicographicallyPrecedes($1.seat.rawValue.utf8))
        }
    }

    public var claimsReceiptSeats: Bool { true }

    public func receiptClaimsHeldElsewhere() throws -> Double? {
        let rows = try locked {
            try run(
                """
                SELECT EXTRACT(EPOCH FROM min(claimed_until) - clock_timestamp())::float8 FROM dirty_receipts
                WHERE claimed_by IS NOT NULL AND claimed_by <> \(session)
                """)
        }
        return try rows.first?.decode(Double?.self).map { max(0, $0) }
    }

    /// Extends every claim this store holds by a lease from now.
    func renewReceiptClaims() throws {
        let lease = Int(timeouts.claimLease / .milliseconds(1))
        _ = try locked {
            try run(
                """
                UPDATE dirty_receipts AS d
                SET claimed_until = clock_timestamp() + \(lease) * interval '1 millisecond'
                FROM (
                    SELECT flight, seat FROM dirty_receipts WHERE claimed_by = \(session)
                    ORDER BY flight, seat FOR UPDATE
                ) AS c
                WHERE d.flight = c.flight AND d.seat = c.seat
                """)
        }
    }

    /// Gives up this store's claims on `marks` (their seats stay marked).
    func releaseReceiptClaims(_ marks: [ReceiptMark]) throws {
        _ = try locked {
            try run(
                """
                UPDATE dirty_receipts AS d SET claimed_by = NULL, claimed_until = NULL
                FROM (
                    SELECT flight, seat FROM dirty_receipts
                    WHERE claimed_by = \(session) AND (flight, seat) IN (
                        SELECT * FROM unnest(\(marks.map(\.flight.rawValue))::text[], \(marks.map(\.seat.rawValue))::text[]))
                    ORDER BY flight, seat FOR UPDATE
                ) AS c
                WHERE d.flight = c.flight AND d.seat = c.seat
                """)
        }
    }

    /// Step 3 of ``refreshReceipts(after:limit:failed:write:durable:)``: one transaction that locks the claimed
    /// marks in key order, then deletes, releases or marks again each one.
    func clearReceiptMarks(_ marks: [ReceiptMark], failed: Set<SeatKey>) throws {
        let flights = marks.map(\.flight.rawValue)
        let seats = marks.map(\.seat.rawValue)
        try locked {
            try transaction { () throws -> (value: Void, commit: Bool) in
                var current: [SeatKey: (generation: Int64, claimedBy: String?)] = [:]
                for row in try run(
                    """
                    SELECT flight, seat, generation, claimed_by FROM dirty_receipts
                    WHERE (flight, seat) IN (SELECT * FROM unnest(\(flights)::text[], \(seats)::text[]))
                    ORDER BY flight, seat FOR UPDATE
                    """)
                {
                    let (flight, seat, generation, claimedBy) = try row.decode((String, String, Int64, String?).self)
                    current[SeatKey(flight: flight, seat: seat)] = (generation, claimedBy)
                }
                var done: [SeatKey] = []
                var release: [SeatKey] = []
                var again: [SeatKey] = []
                for mark in marks {
                    let key = SeatKey(flight: mark.flight.rawValue, seat: mark.seat.rawValue)
                    guard let row = current[key], row.claimedBy == session else {
                        // Taken over (and perhaps cleared) by another aggregator while this one was slow: its file
                        // may have been replaced by ours, rendered from older orders.
                        again.append(key)
                        continue
                    }
                    if failed.contains(key) || row.generation != mark.generation {
                        release.append(key)
                    } else {
                        done.append(key)
                    }
                }
                if !done.isEmpty {
                    try run(
                        """
                        DELETE FROM dirty_receipts WHERE (flight, seat) IN (
                            SELECT * FROM unnest(\(done.map(\.flight))::text[], \(done.map(\.seat))::text[]))
                        """)
                }
                if !release.isEmpty {
                    try run(
                        """
                        UPDATE dirty_receipts SET claimed_by = NULL, claimed_until = NULL WHERE (flight, seat) IN (
                            SELECT * FROM unnest(\(release.map(\.flight))::text[], \(release.map(\.seat))::text[]))
                        """)
                }
                if !again.isEmpty {
                    logger.warning(
                        """
                        receipt claims expired before their files were written (this aggregator was stopped or \
                        slow); another aggregator rendered those seats, which are marked again
                        """,
                        metadata: ["seats": .stringConvertible(again.count)])
                    try run(Self.markDirty(again.map { (seat: $0, count: 1) }))
                }
                return ((), true)
            }
        }
    }
}
