public import Foundation
public import JetbridgeModel
public import Logging
public import JetbridgeStore
import SystemSupport

/// The aggregator's one-shot commands (`report`, `receipts rebuild`), kept out of the executable so it stays thin.
public enum AggregatorTools: Sendable {
    /// Opens the existing store for reading alongside a running `serve`: the SQLite file (WAL: a separate
    /// connection sees committed snapshots and never blocks the writer) or the PostgreSQL database the `store`
    /// setting names (from any host; its schema is brought up to date first).
    /// - Throws: ``AggregatorError`` `.unavailable` when there is no SQLite store yet or PostgreSQL cannot be
    ///   reached, `.dataError` for a store URL that does not parse.
    public static func openStore(home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger) throws
        -> any StoreWriter
    {
        // It opens SQLite read-write (and may write receipts next): the home's rule first.
        try home.secure()
        return try StoreLocation(configuration.store, home: home).open(create: false, logger: logger)
    }

    /// The line `report` and `receipts rebuild` write to standard error when the store URL lists several PostgreSQL
    /// servers or says which to keep (`target_session_attrs`): the server that served the read, and what it is
    /// (`read from 10.0.0.2:5432 (standby)`). Nil otherwise: one server is the one the URL names.
    public static func servedBy(_ store: any StoreReader) -> String? {
        guard let store = store as? PostgresStore,
            store.location.endpoints.count > 1 || store.location.targetSessionAttributes != nil
        else { return nil }
        return "read from \(store.currentServer)"
    }

    /// `store migrate`: opens (SQLite: creates) the store, which applies the migrations it lacks, and returns what
    /// to print: the store (without its password) and its schema version.
    /// - Throws: ``AggregatorError``.
    public static func migrateStore(home: AggregatorHome, configuration: AggregatorConfiguration, logger: Logger)
        throws -> String
    {
        try home.secure()
        let location = try StoreLocation(configuration.store, home: home)
        let store = try location.open(create: true, logger: logger)
        defer { try? store.close() }
        do {
            let version = try store.schemaVersion()
            // Several servers: which one was migrated (the one that accepts writes).
            if let store = store as? PostgresStore, store.location.endpoints.count > 1 {
                return "store \(location): schema version \(version), on \(store.currentServer)"
            }
            return "store \(location): schema version \(version)"
        } catch {
            throw readError(error, path: location.description)
        }
    }

    /// Renders a report.
    /// - Parameters:
    ///   - kind: flights, items, luggage or devices.
    ///   - flight: Only this flight (ignored by devices).
    ///   - status: Only bags with these statuses (luggage; all when empty).
    ///   - format: table, csv, json or html.
    ///   - generatedAt: When the report is made, stated on the HTML page.
    ///   - console: The `console` setting, named on an HTML luggage page that lists only its first bags.
    /// - Returns: The rendered text.
    /// - Throws: ``AggregatorError``.
    public static func report(
        _ kind: ReportKind, flight: FlightID?, status: Set<BagStatus> = [], format: ReportFormat,
        store: any StoreReader, generatedAt: Date = Date(), console: String? = nil
    ) throws -> String {
        do {
            let report = try store.report(kind, flight: flight, status: status)
            let renderer =
                format == .html
                ? ReportRenderer(
                    generatedAt: generatedAt, lastCommit: try store.lastCommit(),
                    // A port alone is loopback's, as serve reads it.
                    console: console.map { (try? ConsoleServer.endpoint($0)) ?? $0 })
                : .init()
            return renderer.render(report, as: format)
        } catch {
            throw readError(error, path: store.name)
        }
    }

    /// Rewrites every receipt from the store and removes stale ones.
    /// - Returns: How many were written and removed.
    /// - Throws: ``AggregatorError``.
    public static func rebuildReceipts(
        home: AggregatorHome, configuration: AggregatorConfiguration, store: any StoreReader, logger: Logger
    ) throws -> ReceiptWriter.RebuildSummary {
        let writer = ReceiptWriter(directory: home.resolve(configuration.receipts), logger: logger)
        do { return try writer.rebuildAll(store) } catch let busy as ReceiptWriter.Busy {
            throw AggregatorError(
                .tryAgain, "cannot rebuild the receipts now: \(busy), for longer than a minute; try again")
        } catch {
            throw readError(error, path: writer.directory.path)
        }
    }

    /// Writes `text` to `url` atomically (temporary file, fsync, rename), so a reader never sees half a report.
    /// - Throws: ``AggregatorError``: `cannotCreate` (73) when the file's directory does not exist (it is not
    ///   created: a mistyped path should not leave a report where nobody looks) or `url` is a directory.
    public static func write(_ text: String, to url: URL) throws {
        let directory = url.deletingLastPathComponent().path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw AggregatorError(
                .cannotCreate, "cannot write \(url.path): the directory \(directory) does not exist; create it first")
        }
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw AggregatorError(.cannotCreate, "cannot write \(url.path): it is a directory; name a file")
        }
        try AtomicFile.write(Data(text.utf8), to: url, mode: 0o644)
    }

    /// The operator's error for a failed read or receipt write: `.tryAgain` for a full disk or a busy store
    /// (``FailureClass``), else by what failed.
    private static func readError(_ error: any Error, path: String) -> AggregatorError {
        if let temporary = AggregatorError(temporary: error, context: path) { return temporary }
        if let error = error as? PostgresStoreError {
            return AggregatorError(error.unreachable ? .unavailable : .failure, error.message)
        }
        if let error = error as? StoreError {
            return AggregatorError(error.code == .fileSystem ? .failure : .dataError, "\(error)")
        }
        return AggregatorError(.failure, "\(path): \(error)")
    }
}
