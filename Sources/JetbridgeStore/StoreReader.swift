public import Foundation
public import JetbridgeModel
public import JetbridgeProtocol
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// What reading a store takes, whichever engine keeps the data: the embedded SQLite file (``SQLiteStore``, the
/// default) or a shared PostgreSQL database (``PostgresStore``, scale-out). Reports, `receipts rebuild`, `status`
/// and the receipts thread's renders need no more than this; ``StoreWriter`` adds what changes the store (GRDB's
/// `DatabaseReader`/`DatabaseWriter` seam).
///
/// Both engines keep the same rules (docs/STORE.md): orders unique by id with the highest revision winning and
/// owned by the device that created them, one currency per flight, scans unique by scan id, bags merged from all
/// their scans by ``BagState``, per-device statistics and the seats whose receipts are behind updated in the same
/// transaction as the records. For the same input they give the same outcomes, reads, reports and receipts; the
/// parity tests (StoreParityTests) hold them to it.
///
/// Calls block until the engine answers: call them from a thread of the caller's own (as `serve` does), never from
/// a task on Swift's cooperative pool or a SwiftNIO event loop.
public protocol StoreReader: AnyObject, Sendable {
    /// How many records (orders and scans) `device` first stored on `flight`: its `device_flights` counter, one
    /// indexed read.
    ///
    /// Deprecated: the per-flight limit is a store rule now, checked inside ``StoreWriter/apply(_:at:limits:)`` in the
    /// same transaction; nothing on the network thread should ask the store. Kept until `serve` no longer calls it.
    func recordCount(device: String, flight: String) throws -> Int

    /// How many of `records` the store does not have yet, by id (an order stored at any revision counts as stored).
    ///
    /// Deprecated, as ``recordCount(device:flight:)`` is: one indexed read per record.
    func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int

    /// What the store holds of `device`'s records on `flight`, summarised as a device summarises what it holds
    /// acknowledged (docs/PROTOCOL.md, "Proof of delivery"): from the pair's kept digest when it is valid and equals
    /// `expected` (the device's own summary), else from indexes, over that device's rows of that flight only
    /// (docs/STORE.md, "Kept digests"). Without `expected`, always from the rows.
    func deliverySummary(device: String, flight: String, expected: DeliverySummary?) throws -> DeliverySummary

    /// The devices that announced `flight` or stored records of it, and where each stands at `now`
    /// (`report devices --flight`, docs/AGGREGATOR.md "The fleet of a flight").
    func fleetReport(flight: FlightID, now: Date) throws -> FleetReport

    /// Per flight announced since `since` (at most ``FleetFlightCounts/maxFlights``, the most recent), its announcing
    /// devices by state at `now` (`status`, `/metrics`).
    func fleetCounts(since: Date, now: Date) throws -> [FleetFlightCounts]

    /// When a batch was last stored, or `nil` before the first.
    func lastCommit() throws -> Date?

    /// Every order at its latest revision, by flight, then in order of first arrival.
    func orders(flight: FlightID?) throws -> [Order]

    /// Every bag merged from its scans, by flight, then tag id.
    func bags(flight: FlightID?) throws -> [BagState]

    /// One seat's receipt from the orders stored now, or `nil` when the seat has none.
    func receipt(flight: FlightID, seat: Seat) throws -> Receipt?

    /// Every receipt of one flight, by seat.
    func receipts(flight: FlightID) throws -> [Receipt]

    /// How many seats wait for a receipt rewrite.
    func dirtyReceiptCount() throws -> Int

    /// Every flight that has orders, sorted.
    func flightsWithOrders() throws -> [FlightID]

    /// Calls `body` with each receipt of `flight`, in seat order, one seat's orders decoded at a time. A seat whose
    /// receipt cannot be made (two currencies, an overflowing total, an order that no longer decodes) goes to
    /// `failed` instead, and the others go on.
    func forEachReceipt(
        flight: FlightID, failed: (FlightID, Seat, any Error) -> Void, _ body: (Receipt) throws -> Void) throws

    /// Why the store cannot take a write now (SQLite: 64 KiB cannot be written and synced next to the file;
    /// PostgreSQL: the server cannot be reached, or does not answer `SELECT 1` within 5 s), or `nil` when it can. Asked while idle after a failed transaction,
    /// so that readiness returns without waiting for a batch.
    func probe() -> String?

    /// The store for messages: the SQLite file's path, or the PostgreSQL URL without its password.
    var name: String { get }

    /// When the oldest wait still in progress began, or `nil` when none is: PostgreSQL's waits for the server (a
    /// statement's answer, a connection attempt: a long transaction whose statements are answered is not stuck),
    /// SQLite's writes (reads run on their own connections and wait for no one). Never waits itself, so readiness
    /// can ask while a call hangs (see ``overdue(after:now:)``).
    var busySince: ContinuousClock.Instant? { get }

    /// How many schema migrations the store has applied (`store migrate` prints it).
    func schemaVersion() throws -> Int

    /// Per-flight totals; a flight that cannot be totalled gets an error row, never a failed report.
    func flightReports(flight: FlightID?) throws -> FlightReports

    /// Item sales over all flights or one.
    func itemReport(flight: FlightID?) throws -> ItemReport

    /// Every bag with its status, missing bags first.
    func luggageReport(flight: FlightID?, status: Set<BagStatus>) throws -> LuggageReport

    /// Per-device statistics, by device id.
    func deviceReport() throws -> DeviceReport

    /// Releases the engine's connections; later calls fail.
    func close() throws
}

/// A store that can also be written: batches applied in one transaction, refusals and limited batches counted,
/// the receipt walk's marks cleared, idle housekeeping. `serve`'s store thread and receipts thread hold one.
public protocol StoreWriter: StoreReader {

    /// Stores several batches in ONE transaction and returns each batch's outcome, in the same order; a batch
    /// broken by a rule that needs the store (another device's order, a flight's second currency) is not stored and
    /// its outcome carries the ``BatchOutcome/rejection``; a batch that would take its device past `limits` is not
    /// stored either, its outcome carries the ``BatchOutcome/limit`` (answer it `limited`), and it is counted against
    /// the device in the same transaction. When this returns everything is durable; when it throws nothing was
    /// stored. See ``SQLiteStore/apply(_:at:limits:)``.
    func apply(_ batches: [IncomingBatch], at now: Date, limits: StoreLimits) throws -> [BatchOutcome]

    /// Counts `times` rejected batches against their device, with the last one's reason (stored inert) for the
    /// devices report, in one transaction (a flood of refused batches costs one commit per group, not one each).
    func recordRejection(device: String, reason: String, at now: Date, times: Int) throws

    /// Counts one batch answered `limited` by a limit decided outside the store (the records or bytes per second on
    /// the network thread) against its device (docs/AGGREGATOR.md, "Keys and the allow list", limits). ``apply(_:at:limits:)`` counts the
    /// batches it limits itself. `times` such batches, with the last one's reason, in one transaction.
    func recordLimited(device: String, reason: String, at now: Date, times: Int) throws

    /// One step of the receipt walk: up to `limit` seats whose receipts are behind, after `after` in (flight, seat)
    /// text order, each passed to `write` with its receipt (`nil`: the seat has no orders left, remove its files) or
    /// to `failed` when its receipt cannot be made; then `durable` (the caller syncs the directory); then the marks
    /// of the written seats are cleared, unless a newer commit marked them again. The failed seats stay marked.
    ///
    /// SQLite reads the marks and orders in one snapshot and clears by generation. PostgreSQL claims the marks for a
    /// lease in a statement of their own, writes the files with no transaction open, then clears them in a short
    /// transaction, so each seat has one writer at a time however many aggregators share the database and no row
    /// stays locked while files are written; seats another writer holds are skipped until its claim expires (see
    /// ``PostgresStore/refreshReceipts(after:limit:failed:write:durable:)``).
    /// - Returns: Every mark visited, in order; fewer than `limit` means the walk reached the end.
    func refreshReceipts(
        after: ReceiptMark?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        write: (FlightID, Seat, Receipt?) throws -> Void, durable: () throws -> Void
    ) throws -> [ReceiptMark]

    /// Seconds until the first claim another writer holds on a marked seat ends (0 when one has ended already), or
    /// nil when no other writer claims one. A refresh skips such seats; this tells when to look again, since no commit
    /// may come to start another refresh (the writer was killed after the last sync). SQLite: always nil.
    func receiptClaimsHeldElsewhere() throws -> Double?

    /// Whether each marked seat is claimed by one writer at a time in the store (PostgreSQL), so that several
    /// aggregators may refresh receipts in one directory at once; SQLite's writers take turns.
    var claimsReceiptSeats: Bool { get }

    /// Housekeeping for a moment with no batches waiting: SQLite's passive checkpoint; PostgreSQL's fold of the kept
    /// digests' stale marks.
    func idleMaintenance() throws

    /// Ends the database sessions of other Jetbridge processes that stopped in the middle of a statement and hold
    /// their transaction's rows meanwhile (PostgreSQL: docs/STORE.md, "A statement half sent, or an answer never
    /// read"), and returns them. SQLite: none (one writer, in this process).
    func endStalledSessions() throws -> [StalledSession]

    /// Records that `device` announced, at `now`, that it holds records of each of `flights` the ground has not
    /// confirmed (docs/PROTOCOL.md, "Announce"): each pair's announcement time becomes `now` and its confirmation is
    /// cleared, in one transaction.
    ///
    /// A flight the device has not announced before is recorded only while the device has announced fewer than
    /// `newFlightsPerDay` flights in the last 24 hours (its `flightsPerDay` limit); flights go in text order, and the
    /// rest are left out. Before, one stolen key could add 320 rows a second for ever, which every `status` read of
    /// the last 24 hours then loaded.
    /// - Returns: How many of `flights` were recorded.
    @discardableResult
    func recordAnnouncement(device: String, flights: [String], at now: Date, newFlightsPerDay: Int) throws -> Int

    /// Records that the ground confirmed `device`'s summary of `flight` at `now` (docs/PROTOCOL.md, "Proof of
    /// delivery"). Only a flight the device announced has a row to mark; an agent that never announces is shown by
    /// what it stored.
    func recordConfirmation(device: String, flight: String, at now: Date) throws
}

/// A seat whose receipt is behind, as the receipt walk met it.
/// What a receipt walk's `write` throws for one seat whose files cannot be written while the others can (a directory
/// at the receipt's name, a file another user owns in a shared sticky directory): that seat is passed to `failed` and
/// stays marked, and the walk goes on. Any other error from `write` ends the step, as before: a full disk fails every
/// seat alike. Before, one such seat failed every refresh at the same place, and no receipt after it was written
/// again.
public struct ReceiptSeatFailure: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Runs a walk's `write` for one seat, both engines' rule: a ``ReceiptSeatFailure`` fails that seat alone (passed to
/// `failed`; the caller keeps it marked) and returns `false`; any other error ends the step.
func writeSeat(
    _ flight: FlightID, _ seat: Seat, _ receipt: Receipt?, write: (FlightID, Seat, Receipt?) throws -> Void,
    failed: (FlightID, Seat, any Error) -> Void
) throws -> Bool {
    do {
        try write(flight, seat, receipt)
        return true
    } catch let error as ReceiptSeatFailure {
        failed(flight, seat, error)
        return false
    }
}

public struct ReceiptMark: Hashable, Sendable {
    public var flight: FlightID
    public var seat: Seat
    /// Raised by every later mark; clearing only removes the mark if it is unchanged.
    public var generation: Int64
}

extension StoreReader {
    /// What the store's rows hold of `device`'s records on `flight` (``deliverySummary(device:flight:expected:)``
    /// without an expected summary).
    public func deliverySummary(device: String, flight: String) throws -> DeliverySummary {
        try deliverySummary(device: device, flight: flight, expected: nil)
    }

    /// Every order at its latest revision, by flight, then in order of first arrival.
    public func orders() throws -> [Order] { try orders(flight: nil) }

    /// Every bag merged from its scans, by flight, then tag id.
    public func bags() throws -> [BagState] { try bags(flight: nil) }

    /// Builds one report. Stored data that cannot be totalled becomes error rows (see ``FlightReport``,
    /// ``ItemReport``), never a failure of the whole report.
    ///
    /// - Parameters:
    ///   - kind: Which report.
    ///   - flight: Only this flight (the devices report then becomes the flight's fleet, ``FleetReport``).
    ///   - status: Only bags with these statuses (luggage report; all when empty).
    public func report(_ kind: ReportKind, flight: FlightID? = nil, status: Set<BagStatus> = []) throws -> Report {
        switch kind {
        case .flights: .flights(try flightReports(flight: flight))
        case .items: .items(try itemReport(flight: flight))
        case .luggage: .luggage(try luggageReport(flight: flight, status: status))
        case .devices: try flight.map { .fleet(try fleetReport(flight: $0, now: Date())) } ?? .devices(try deviceReport())
        }
    }
}

extension StoreReader {
    /// Why the store is not answering: a wait (``busySince``) has lasted longer than `limit`, or `nil`. A frozen
    /// PostgreSQL server (or a file system that stopped answering) makes no call fail for a while; this says so as
    /// soon as one is overdue, so that `/readyz` turns unready within seconds instead of at the answer's timeout.
    ///
    /// - Parameters:
    ///   - limit: Longer than any wait of a healthy store while serving: above PostgreSQL's lock timeout (5 s), so
    ///     that a wait for another aggregator's row does not count, and below its answer timeout (35 s).
    ///   - now: The time to compare with.
    /// - Returns: `a store call has been waiting for 12 s (more than 10 s): the store … is not answering`, or `nil`.
    public func overdue(
        after limit: Duration = .seconds(10), now: ContinuousClock.Instant = .now
    ) -> String? {
        guard let since = busySince, now - since > limit else { return nil }
        let waited = Int((now - since).components.seconds)
        return "a store call has been waiting for \(waited) s (more than \(limit.components.seconds) s): the store "
            + "\(name) is not answering"
    }
}

/// A database session ended by ``StoreWriter/endStalledSessions()``: another process's, stopped in the middle of a
/// statement (while sending it, or before reading its answer).
public struct StalledSession: Sendable, Hashable {
    /// The server process of the session.
    public let pid: Int32
    /// Its `application_name`: `jetbridge host:pid` names the process that stopped.
    public let applicationName: String
    /// How long ago the message it was stopped in began (`state_change`): how long its statement had been going.
    public let seconds: Double
}

extension StoreWriter {
    /// Records an announcement with no limit on the device's new flights.
    public func recordAnnouncement(device: String, flights: [String], at now: Date) throws {
        try recordAnnouncement(device: device, flights: flights, at: now, newFlightsPerDay: .max)
    }

    /// One writer (SQLite): no claims.
    public func receiptClaimsHeldElsewhere() throws -> Double? { nil }

    public var claimsReceiptSeats: Bool { false }

    /// Stores several batches in one transaction, holding no device to a flight limit (the counters are kept).
    public func apply(_ batches: [IncomingBatch], at now: Date) throws -> [BatchOutcome] {
        try apply(batches, at: now, limits: .none)
    }

    /// Stores several batches in one transaction, now, holding no device to a flight limit.
    public func apply(_ batches: [IncomingBatch]) throws -> [BatchOutcome] { try apply(batches, at: Date()) }

    /// Counts one rejected batch against its device, now.
    public func recordRejection(device: String, reason: String) throws {
        try recordRejection(device: device, reason: reason, at: Date())
    }

    /// Counts one rejected batch against its device.
    public func recordRejection(device: String, reason: String, at now: Date) throws {
        try recordRejection(device: device, reason: reason, at: now, times: 1)
    }

    /// Counts one limited batch against its device, now.
    public func recordLimited(device: String, reason: String) throws {
        try recordLimited(device: device, reason: reason, at: Date())
    }

    /// Counts one limited batch against its device.
    public func recordLimited(device: String, reason: String, at now: Date) throws {
        try recordLimited(device: device, reason: reason, at: now, times: 1)
    }
}

extension SQLiteStore: StoreWriter {
    public func idleMaintenance() throws { try checkpoint() }

    public func endStalledSessions() throws -> [StalledSession] { [] }

    public func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int { try unstoredCount(records) }

    public var name: String { path }

    public var busySince: ContinuousClock.Instant? { calls.oldest }

    public func refreshReceipts(
        after: ReceiptMark?, limit: Int, failed: (FlightID, Seat, any Error) -> Void,
        write: (FlightID, Seat, Receipt?) throws -> Void, durable: () throws -> Void
    ) throws -> [ReceiptMark] {
        var failedSeats: Set<ReceiptMark> = []
        let marks = try forEachDirtyReceipt(
            after: after.map { ($0.flight, $0.seat) }, limit: limit,
            failed: { flight, seat, error in
                failedSeats.insert(ReceiptMark(flight: flight, seat: seat, generation: 0))
                failed(flight, seat, error)
            },
            { flight, seat, receipt in
                if try !writeSeat(flight, seat, receipt, write: write, failed: failed) {
                    failedSeats.insert(ReceiptMark(flight: flight, seat: seat, generation: 0))
                }
            })
        guard !marks.isEmpty else { return marks }
        try durable()
        try calls.measure {
            try clearDirty(
                marks.filter { !failedSeats.contains(ReceiptMark(flight: $0.flight, seat: $0.seat, generation: 0)) })
        }
        return marks
    }

    public func probe() -> String? { probeWritable(nextTo: path) }
}

/// Whether 64 KiB can be written and synced next to `path` (a full disk cannot): `nil`, or why not. The probe file is
/// removed.
func probeWritable(nextTo path: String) -> String? {
    let probe = (path as NSString).deletingLastPathComponent + "/.space-probe"
    // A new file each time (a leftover is removed first, O_EXCL), never one a link or a hard link at the name leads to.
    unlink(probe)
    defer { unlink(probe) }
    let fd: Int32
    do { fd = try FileSystem.openFile(probe, O_WRONLY | O_CREAT | O_EXCL) } catch {
        return "cannot create a file next to the store \(path): \(error.reason)"
    }
    defer { close(fd) }
    let bytes = [UInt8](repeating: 0, count: 64 << 10)
    guard write(fd, bytes, bytes.count) == bytes.count, fsync(fd) == 0 else {
        return "cannot write next to the store \(path): \(String(cString: strerror(errno)))"
    }
    return nil
}
