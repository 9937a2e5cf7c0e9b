import Foundation
import JetbridgeModel
import JetbridgeProtocol

/// What both engines do the same way around their own SQL: the refused-batch rerun of ``StoreWriter/apply(_:at:)``,
/// a seat's receipt from its rows, and the flight walk of ``StoreReader/flightReports(flight:)``.
extension StoreReader {
    /// Stores a group in rounds until one finds no new refusal, and returns every batch's outcome.
    ///
    /// A refusal rolls the round's transaction back and the group is stored again without that batch. Only the
    /// refusal of the earliest batch found is certain (later batches' verdicts may depend on what the refused one
    /// would have stored), so one batch goes per round; refusals are rare, and they cost a round each.
    /// - Parameters:
    ///   - batches: The group, in arrival order.
    ///   - round: One transaction that stores `batches` but those in `skipping`, committed only when it returns no
    ///     refusal.
    /// - Returns: The last round's outcomes, with the refused batches' outcomes carrying their rejections.
    /// - Throws: What `round` throws; then nothing was stored.
    static func storeRefusingOnePerRound(
        _ batches: [IncomingBatch],
        round: (_ skipping: [Int: BatchRejection]) throws
            -> (outcomes: [BatchOutcome], refusal: SQLiteStore.Refusal?)
    ) throws -> [BatchOutcome] {
        var refused: [Int: BatchRejection] = [:]
        while true {
            let pass = try round(refused)
            guard let found = pass.refusal else {
                var outcomes = pass.outcomes
                for (index, rejection) in refused {
                    let header = batches[index].header
                    outcomes[index] = BatchOutcome(
                        device: header.device, first: header.first, last: header.last, new: 0, duplicates: 0,
                        rejection: rejection)
                }
                return outcomes
            }
            refused[found.batch] = found.rejection
        }
    }

    /// `found`, or the refusal of record `i` of batch `b` when that comes first in arrival order: a pass keeps the
    /// earliest, the only one certain (``storeRefusingOnePerRound(_:round:)``).
    static func earliest(
        _ found: SQLiteStore.Refusal?, _ b: Int, _ i: Int, _ error: ValidationError, in batches: [IncomingBatch]
    ) -> SQLiteStore.Refusal? {
        if let found, (found.batch, found.rejection.index) <= (b, i) { return found }
        let header = batches[b].header
        return (b, BatchRejection(status: .rejected, header: header, index: i, reason: "record \(i): \(error)"))
    }

    /// The outcomes of a pass that stored every batch but the `refused` ones: a placeholder for those (the rerun puts
    /// the rejection there), and for the others their `new` records, the rest duplicates, each passed to `count` first
    /// (the devices' statistics).
    static func outcomes(
        of batches: [IncomingBatch], new newCounts: [Int], skipping refused: [Int: BatchRejection],
        count: (_ header: BatchHeader, _ records: Int, _ new: Int, _ duplicates: Int) throws -> Void
    ) rethrows -> [BatchOutcome] {
        var outcomes: [BatchOutcome] = []
        outcomes.reserveCapacity(batches.count)
        for (b, (batch, new)) in zip(batches, newCounts).enumerated() {
            let header = batch.header
            guard refused[b] == nil else {
                outcomes.append(
                    BatchOutcome(device: header.device, first: header.first, last: header.last, new: 0, duplicates: 0))
                continue
            }
            let duplicates = batch.records.count - new
            try count(header, batch.records.count, new, duplicates)
            outcomes.append(
                BatchOutcome(
                    device: header.device, first: header.first, last: header.last, new: new, duplicates: duplicates))
        }
        return outcomes
    }

    /// One seat's receipt from its orders, or nil after passing `failed` why it cannot be made (orders in two
    /// currencies, a total that overflows, an order that no longer decodes): that seat is left out, the others go on.
    static func makeReceipt(
        flight: FlightID, seat: Seat, orders: Result<[Order], any Error>, failed: (FlightID, Seat, any Error) -> Void
    ) -> Receipt? {
        do {
            return try Receipt(flight: flight, seat: seat, orders: orders.get())
        } catch {
            failed(flight, seat, error)
            return nil
        }
    }

    /// Groups `seat, record` rows that come in seat order by seat: each seat's decoded orders, or the error of the
    /// first of its orders that does not decode (the other seats go on).
    /// - Parameters:
    ///   - next: The next row, nil after the last.
    ///   - decode: Decodes one stored order.
    ///   - body: Takes each seat's orders, in seat order.
    static func forEachSeat(
        rows next: () throws -> (seat: String, record: Data)?, decode: (Data) throws -> Order,
        _ body: (String, Result<[Order], any Error>) throws -> Void
    ) throws {
        var current: String?
        var orders: [Order] = []
        var failure: (any Error)?
        func finishSeat() throws {
            guard let current else { return }
            try body(current, failure.map { .failure($0) } ?? .success(orders))
        }
        while let (seat, bytes) = try next() {
            if seat != current {
                try finishSeat()
                current = seat
                orders.removeAll(keepingCapacity: true)
                failure = nil
            }
            guard failure == nil else { continue }
            do { orders.append(try decode(bytes)) } catch { failure = error }
        }
        try finishSeat()
    }

    /// Emits the flights that have orders only and come before `group`'s flight, then `group` with its bags; with no
    /// `group` (after the last), every order-only flight left. Called for each bag group in flight order, then once
    /// with nil, it gives every flight one report, in flight order.
    /// - Parameters:
    ///   - group: The next flight with bags, and its bags.
    ///   - orderFlights: The flights that have orders, sorted.
    ///   - next: The first of `orderFlights` not emitted yet (0 before the first call).
    ///   - emit: Makes one flight's report.
    static func emitFlights(
        through group: (flight: FlightID, bags: [BagState])?, orderFlights: [String], next: inout Int,
        _ emit: (FlightID, [BagState]) throws -> Void
    ) throws {
        guard let (bagFlight, bags) = group else {
            for text in orderFlights[next...] { try emit(try flightID(text), []) }
            next = orderFlights.count
            return
        }
        while next < orderFlights.count, orderFlights[next] < bagFlight.rawValue {
            try emit(try flightID(orderFlights[next]), [])
            next += 1
        }
        if next < orderFlights.count, orderFlights[next] == bagFlight.rawValue { next += 1 }
        try emit(bagFlight, bags)
    }
}
