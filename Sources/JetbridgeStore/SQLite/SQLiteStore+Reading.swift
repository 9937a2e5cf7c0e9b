import Foundation
internal import GRDB
import JetbridgeProtocol
public import JetbridgeModel

extension SQLiteStore {
    /// Every bag, merged from its scans by JetbridgeModel's ``BagState``, sorted by flight, then tag id.
    ///
    /// - Parameter flight: Only this flight's bags, or all when `nil`.
    /// - Returns: One state per (flight, tag id).
    /// - Throws: `DatabaseError`, or ``StoreError`` for a row the store could not have written.
    public func bags(flight: FlightID? = nil) throws -> [BagState] {
        var result: [BagState] = []
        try pool.read { db in
            try Self.forEachBagGroup(flight: flight, in: db) { _, bags in result += bags }
        }
        return result
    }

    /// Every order at its latest revision, decoded from its stored bytes, by flight, then in order of first arrival.
    ///
    /// - Parameter flight: Only this flight's orders, or all when `nil`.
    /// - Throws: `DatabaseError`, or ``StoreError`` when stored bytes no longer decode.
    public func orders(flight: FlightID? = nil) throws -> [Order] {
        let (condition, arguments) = Self.flightCondition(flight)
        return try pool.read { db in
            try decodeOrders(db, sql: "SELECT record FROM orders\(condition) ORDER BY flight, rowid", arguments: arguments)
        }
    }

    /// The receipt for one seat from the orders stored now, or `nil` when the seat has no orders (any more).
    ///
    /// - Throws: `DatabaseError`, ``StoreError``, or ``ValidationError`` (an amount overflows, two currencies).
    public func receipt(flight: FlightID, seat: Seat) throws -> Receipt? {
        try pool.read { db in try receipt(flight: flight, seat: seat, in: db) }
    }

    // MARK: Internals shared with reports and receipts

    func receipt(flight: FlightID, seat: Seat, in db: Database) throws -> Receipt? {
        let orders = try decodeOrders(
            db, sql: "SELECT record FROM orders WHERE flight = ? AND seat = ?",
            arguments: [flight.rawValue, seat.rawValue])
        return orders.isEmpty ? nil : try Receipt(flight: flight, seat: seat, orders: orders)
    }

    /// Every flight that has orders, sorted; read from the `orders(flight)` index alone.
    public func flightsWithOrders() throws -> [FlightID] {
        try pool.read { db in
            try String.fetchAll(db, sql: "SELECT DISTINCT flight FROM orders ORDER BY flight").map(flightID)
        }
    }

    /// Every receipt of one flight, sorted by seat, from one read of the flight's orders.
    ///
    /// - Throws: `DatabaseError`, ``StoreError``, or ``ValidationError`` (an amount overflows, two currencies).
    public func receipts(flight: FlightID) throws -> [Receipt] {
        try pool.read { db in
            try Receipt.all(
                orders: decodeOrders(
                    db, sql: "SELECT record FROM orders WHERE flight = ?", arguments: [flight.rawValue]))
        }
    }

    /// A seat marked for a receipt rewrite.
    typealias DirtyMark = ReceiptMark

    /// Calls `body` for each of up to `limit` marked seats after `after`, in (flight, seat) text order, with its
    /// receipt (`nil`: the seat has no orders left, remove its files). All are read in one snapshot, so each receipt
    /// covers at least the orders that marked it.
    ///
    /// Memory holds one seat's orders at a time, however many orders a flight has: the flight's orders are read
    /// through the `orders(flight)` index in seat order (SQLite's sorter spills to a temporary file past its cache),
    /// and only the marked seats' records are decoded.
    ///
    /// A seat whose receipt cannot be made (orders in two currencies, a total that overflows, a stored order that no
    /// longer decodes) goes to `failed` instead of `body`, and the walk goes on: one bad seat must not stop every
    /// receipt after it.
    /// - Returns: Every mark visited, in order; clear those passed to `body` (``clearDirty(_:)``) once the files
    ///   are durable, and leave the failed ones marked.
    func forEachDirtyReceipt(
        after: (flight: FlightID, seat: Seat)?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        _ body: (FlightID, Seat, Receipt?) throws -> Void
    ) throws -> [DirtyMark] {
        try pool.read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT flight, seat, generation FROM dirty_receipts WHERE (flight, seat) > (?, ?)
                    ORDER BY flight, seat LIMIT ?
                    """,
                arguments: [after?.flight.rawValue ?? "", after?.seat.rawValue ?? "", limit])
            var marks: [DirtyMark] = []
            var index = 0
            while index < rows.count {
                let flightText: String = rows[index][0]
                let flight = try flightID(flightText)
                var seats: [String: Seat] = [:]
                while index < rows.count, (rows[index][0] as String) == flightText {
                    let seat = try seatValue(rows[index][1])
                    seats[seat.rawValue] = seat
                    marks.append(DirtyMark(flight: flight, seat: seat, generation: rows[index][2]))
                    index += 1
                }
                // Marked seats in the sorter's order; those with no orders left get `nil` in their turn.
                var waiting = seats.keys.sorted()[...]
                try Self.forEachSeat(of: flight, in: db, where: { seats[$0] != nil }, decode: decodeOrder) {
                    seatText, orders in
                    while let next = waiting.first, next < seatText {
                        try body(flight, seats[next]!, nil)
                        waiting.removeFirst()
                    }
                    if waiting.first == seatText { waiting.removeFirst() }
                    let seat = try seats[seatText] ?? seatValue(seatText)
                    guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed)
                    else { return }
                    try body(flight, seat, receipt)
                }
                for seatText in waiting { try body(flight, seats[seatText]!, nil) }
            }
            return marks
        }
    }

    /// Calls `body` with each receipt of `flight`, in seat text order, one seat's orders in memory at a time.
    ///
    /// A seat whose receipt cannot be made (orders in two currencies, a total that overflows, an order that no longer
    /// decodes) goes to `failed` with the reason instead, and the others go on.
    /// - Throws: `DatabaseError`, ``StoreError`` for a seat the store could not have written, or what `body` throws.
    public func forEachReceipt(
        flight: FlightID, failed: (FlightID, Seat, any Error) -> Void, _ body: (Receipt) throws -> Void
    ) throws {
        try pool.read { db in
            try Self.forEachSeat(of: flight, in: db, where: { _ in true }, decode: decodeOrder) { seatText, orders in
                let seat = try seatValue(seatText)
                guard let receipt = Self.makeReceipt(flight: flight, seat: seat, orders: orders, failed: failed) else {
                    return
                }
                try body(receipt)
            }
        }
    }

    /// Streams one flight's orders seat by seat (seat text order), decoding only the seats `include` picks. A seat
    /// with an order that does not decode gets the error instead of its orders; the other seats go on.
    private static func forEachSeat(
        of flight: FlightID, in db: Database, where include: (String) -> Bool, decode: (Data) throws -> Order,
        _ body: (String, Result<[Order], any Error>) throws -> Void
    ) throws {
        let rows = try Row.fetchCursor(
            db, sql: "SELECT seat, record FROM orders WHERE flight = ? ORDER BY seat", arguments: [flight.rawValue])
        try forEachSeat(
            rows: {
                while let row = try rows.next() {
                    let seat: String = row[0]
                    if include(seat) { return (seat, row[1]) }
                }
                return nil
            }, decode: decode, body)
    }

    /// Removes the marks of receipts that were written, unless a newer commit marked them again meanwhile.
    func clearDirty(_ done: [DirtyMark]) throws {
        guard !done.isEmpty else { return }
        try pool.write { db in
            let delete = try db.cachedStatement(
                sql: "DELETE FROM dirty_receipts WHERE flight = ? AND seat = ? AND generation = ?")
            for entry in done {
                try delete.execute(arguments: [entry.flight.rawValue, entry.seat.rawValue, entry.generation])
            }
        }
    }

    /// How many seats wait for a receipt rewrite.
    public func dirtyReceiptCount() throws -> Int {
        try pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM dirty_receipts") ?? 0 }
    }

    /// Decodes the `record` column of every row `sql` selects as an order.
    func decodeOrders(_ db: Database, sql: String, arguments: StatementArguments) throws -> [Order] {
        let rows = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        var orders: [Order] = []
        // One stream for the rows: a flight's orders share their flight id, checked once.
        var stream = RecordCoding.Stream()
        while let row = try rows.next() { orders.append(try decodeOrder(row[0], stream: &stream)) }
        return orders
    }

    func decodeOrder(_ bytes: Data) throws -> Order {
        var stream = RecordCoding.Stream()
        return try decodeOrder(bytes, stream: &stream)
    }

    /// Decodes a stored order, the rows before it having left what they share in `stream`.
    func decodeOrder(_ bytes: Data, stream: inout RecordCoding.Stream) throws -> Order {
        let record: JetbridgeModel.Record
        do { record = try stream.decode(bytes) } catch {
            throw StoreError(
                .undecodableRecord,
                "a stored order no longer decodes (\(error)); open the store with the codec it was written with",
                path: path)
        }
        guard case .order(let order) = record else {
            throw StoreError(.corruptRow, "a row of the orders table holds a \(record) record", path: path)
        }
        return order
    }

    /// The `WHERE` clause and its argument of a read for one flight, or nothing for all flights; a query puts it
    /// before an `ORDER BY` that starts with `flight` (free when the flight is fixed).
    static func flightCondition(_ flight: FlightID?) -> (sql: String, arguments: StatementArguments) {
        guard let flight else { return ("", []) }
        return (" WHERE flight = ?", [flight.rawValue])
    }

    /// Streams merged bags one flight at a time, flights in order, bags in tag id order.
    ///
    /// Scans are read sorted by (flight, tag) and folded through ``BagState`` as they come, so memory holds one
    /// flight's bags, and the merge rules stay JetbridgeModel's.
    static func forEachBagGroup(
        flight: FlightID?, in db: Database, _ body: (FlightID, [BagState]) throws -> Void
    ) throws {
        let columns = "flight, tag, owner, weight, point, scanned_at, id, device"
        let (condition, arguments) = flightCondition(flight)
        let rows = try Row.fetchCursor(
            db, sql: "SELECT \(columns) FROM scans\(condition) ORDER BY flight, tag", arguments: arguments)
        var currentFlightText = ""
        var currentFlight: FlightID?
        var group: [BagState] = []
        while let row = try rows.next() {
            let flightText: String = row[0]
            if flightText != currentFlightText {
                if let currentFlight, !group.isEmpty { try body(currentFlight, group) }
                group = []
                currentFlightText = flightText
                currentFlight = try flightID(flightText)
            }
            let scan = try storedScan(row: row, flight: currentFlight!)
            if let last = group.last, last.tagID == scan.tag.id {
                group[group.count - 1].apply(scan)
            } else {
                group.append(BagState(scan: scan))
            }
        }
        if let currentFlight, !group.isEmpty { try body(currentFlight, group) }
    }
}

/// A scan from a row of `flight, tag, owner, weight, point, scanned_at, id, device` (the flight decoded by the caller,
/// once per flight). A value no ground writes, only a hand edit can, that does not convert (an id stored as text; in
/// the console's rows, a weight that is not a number) is a `corruptRow` naming its column, as an invalid owner is:
/// reading it with a subscript stopped the process (`report`, and `serve` for the console's bags).
///
/// Each column is read on GRDB's fast path (`StatementColumnConvertible`), as the subscripts did: the report's bag
/// reader runs over every scan. On a statement's row that path converts a number column's text as SQLite does (to 0)
/// instead of refusing it, as before.
func storedScan(row: Row, flight: FlightID) throws -> Scan {
    func column<Value: DatabaseValueConvertible & StatementColumnConvertible>(_ index: Int, _ name: String) throws
        -> Value
    {
        do { return try row.decode(Value.self, atIndex: index) } catch {
            throw StoreError(
                .corruptRow, "a stored scan's \(name) is not a valid \(Value.self) (only a hand edit makes one)",
                path: "scans.\(name)")
        }
    }
    let owner = try ownerValue(column(2, "owner"))
    let point: Int = try column(4, "point")
    return Scan(
        id: try column(6, "id"), tag: LuggageTag(id: try column(1, "tag"), owner: owner, weight: try column(3, "weight")),
        point: point == 0 ? .origin : .destination,
        scannedAt: Date(timeIntervalSinceReferenceDate: try column(5, "scanned_at")), flight: flight,
        device: try column(7, "device"))
}

func flightID(_ text: String) throws -> FlightID {
    do { return try FlightID(text) } catch {
        throw StoreError(.corruptRow, "stored flight '\(Validation.visible(text))' is invalid: \(error)", path: "flight")
    }
}

/// A stored scan's owner (`initial` + `family`, as `scans.owner` keeps it).
func ownerValue(_ text: String) throws -> Owner {
    do { return try Owner(initial: String(text.prefix(1)), family: String(text.dropFirst())) } catch {
        throw StoreError(.corruptRow, "stored owner '\(Validation.visible(text))' is invalid: \(error)", path: "scans.owner")
    }
}

func seatValue(_ text: String) throws -> Seat {
    do { return try Seat(text) } catch {
        throw StoreError(.corruptRow, "stored seat '\(Validation.visible(text))' is invalid: \(error)", path: "seat")
    }
}
