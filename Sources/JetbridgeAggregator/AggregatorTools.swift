public import Foundation
import GRDB
public import JetbridgeModel
public import Logging

/// The aggregator's one-shot commands (`report`, `receipts rebuild`), kept out of the executable so it stays thin.
public enum AggregatorTools: Sendable {
    /// Opens the existing store for reading alongside a running `serve` (WAL: a separate connection sees committed
    /// snapshots and never blocks the writer).
    /// - Throws: ``AggregatorError`` `.unavailable` when there is no store yet.
    public static func openStore(home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger) throws
        -> AggregatorStore
    {
        let url = home.resolve(configuration.store)
        guard FileManager.default.fileExists(atPath: url.path) else {
            throw AggregatorError(
                .unavailable, "there is no store at \(url.path) yet; `serve` creates it when it first starts")
        }
        do { return try AggregatorStore(path: url.path, logger: logger) } catch {
            throw AggregatorServer.storeError(error, path: url.path)
        }
    }

    /// Renders a report.
    /// - Parameters:
    ///   - kind: flights, items, luggage or devices.
    ///   - flight: Only this flight (ignored by devices).
    ///   - format: table, csv, json or html.
    /// - Returns: The rendered text.
    /// - Throws: ``AggregatorError``.
    public static func report(
        _ kind: ReportKind, flight: FlightID?, format: ReportFormat, store: AggregatorStore
    ) throws -> String {
        do {
            return ReportRenderer().render(try store.report(kind, flight: flight), as: format)
        } catch {
            throw readError(error, path: store.path)
        }
    }

    /// Rewrites every receipt from the store and removes stale ones.
    /// - Returns: How many were written and removed.
    /// - Throws: ``AggregatorError``.
    public static func rebuildReceipts(
        home: AggregatorHome, configuration: AggregatorConfiguration, store: AggregatorStore, logger: Logger
    ) throws -> ReceiptWriter.RebuildSummary {
        let writer = ReceiptWriter(directory: home.resolve(configuration.receipts), logger: logger)
        do { return try writer.rebuildAll(store) } catch {
            throw readError(error, path: writer.directory.path)
        }
    }

    /// Writes `text` to `url` atomically (temporary file, fsync, rename), so a reader never sees half a report.
    /// - Throws: ``AggregatorError``.
    public static func write(_ text: String, to url: URL) throws {
        try AtomicFile.write(Data(text.utf8), to: url, mode: 0o644)
    }

    private static func readError(_ error: any Error, path: String) -> AggregatorError {
        if let error = error as? DatabaseError, [.SQLITE_BUSY, .SQLITE_LOCKED].contains(error.resultCode) {
            return AggregatorError(.temporary, "the store is busy; try again: \(error)")
        }
        if let error = error as? StoreError {
            return AggregatorError(error.code == .fileSystem ? .other : .badConfiguration, "\(error)")
        }
        return AggregatorError(.other, "\(path): \(error)")
    }
}
