public import Foundation
public import JetbridgeModel
public import JetbridgeProtocol

/// What the aggregator needs from a store, whichever engine keeps the data: the embedded SQLite file
/// (``AggregatorStore``, the default) or a shared PostgreSQL database (``PostgresStore``, scale-out; not wired into
/// `serve`, `report` or `receipts` yet).
///
/// Both engines keep the same rules (docs/STORE.md): orders unique by id with the highest revision winning and
/// owned by the device that created them, one currency per flight, scans unique by scan id, bags merged from all
/// their scans by ``BagState``, per-device statistics and the seats whose receipts are behind updated in the same
/// transaction as the records. For the same input they give the same outcomes, reads, reports and receipts; the
/// parity tests (StoreParityTests) hold them to it.
///
/// Calls block until the engine answers: call them from the store's own thread (as `serve` does), never from a task
/// on Swift's cooperative pool.
public protocol StoreEngine: AnyObject, Sendable {
    /// Stores several batches in ONE transaction and returns each batch's outcome, in the same order; a batch
    /// broken by a rule that needs the store (another device's order, a flight's second currency) is not stored and
    /// its outcome carries the rejection. When this returns everything is durable; when it throws nothing was
    /// stored. See ``AggregatorStore/apply(_:at:)``.
    func apply(_ batches: [IncomingBatch], at now: Date) throws -> [BatchOutcome]

    /// Counts one rejected batch against its device, with the reason (stored inert) for the devices report.
    func recordRejection(device: String, reason: String, at now: Date) throws

    /// Counts one batch answered `limited` against its device (docs/AGGREGATOR.md, Limits).
    func recordLimited(device: String, reason: String, at now: Date) throws

    /// How many records (orders and scans) `device` has stored on `flight`, for the per-flight limit.
    func recordCount(device: String, flight: String) throws -> Int

    /// How many of `records` the store does not have yet, by id (an order stored at any revision counts as stored).
    func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int

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

    /// Per-flight totals; a flight that cannot be totalled gets an error row, never a failed report.
    func flightReports(flight: FlightID?) throws -> FlightReports

    /// Item sales over all flights or one.
    func itemReport(flight: FlightID?) throws -> ItemReport

    /// Every bag with its status, missing bags first.
    func luggageReport(flight: FlightID?, status: Set<BagStatus>) throws -> LuggageReport

    /// Per-device statistics, by device id.
    func deviceReport() throws -> DeviceReport

    /// Housekeeping for a moment with no batches waiting: SQLite's passive checkpoint; nothing for PostgreSQL.
    func idleMaintenance() throws

    /// Releases the engine's connections; later calls fail.
    func close() throws
}

extension AggregatorStore: StoreEngine {
    public func idleMaintenance() throws { try checkpoint() }

    public func unstoredCount(of records: [JetbridgeModel.Record]) throws -> Int { try unstoredCount(records) }
}
