public import Foundation
public import Logging

/// Which store the aggregator uses, from the `store` configuration key or the `--store` flag: a `postgres://` (or
/// `postgresql://`) URL names a shared PostgreSQL database (scale-out); anything else is the SQLite file, relative to
/// the home unless absolute (the default, `jetbridge.sqlite`).
///
/// ``description`` never shows a password: every message about the store uses it.
public enum StoreLocation: Sendable, CustomStringConvertible {
    /// The embedded SQLite file.
    case sqlite(URL)
    /// A PostgreSQL database that several aggregators may share; `url` as given (it may hold the password).
    case postgres(url: String, location: PostgresLocation)

    /// Reads the `store` setting.
    ///
    /// - Parameters:
    ///   - setting: The `store` key or `--store` value.
    ///   - home: Resolves a relative SQLite path.
    ///   - environment: Where `PGPASSWORD` is looked up.
    /// - Throws: ``AggregatorError`` `.badConfiguration` for a PostgreSQL URL that does not parse (shown without its
    ///   password).
    public init(
        _ setting: String, home: AggregatorHome, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        guard Self.isPostgres(setting) else {
            self = .sqlite(home.resolve(setting))
            return
        }
        do {
            self = .postgres(url: setting, location: try PostgresLocation(setting, environment: environment))
        } catch let error as PostgresStoreError {
            throw AggregatorError(.badConfiguration, "store: \(error.message)")
        }
    }

    /// Whether `setting` names a PostgreSQL database rather than a SQLite file.
    public static func isPostgres(_ setting: String) -> Bool {
        setting.hasPrefix("postgres://") || setting.hasPrefix("postgresql://")
    }

    /// Whether several aggregators may share this store (PostgreSQL).
    public var isShared: Bool {
        if case .postgres = self { return true }
        return false
    }

    /// The SQLite file's path, or the PostgreSQL URL without its password.
    public var description: String {
        switch self {
        case .sqlite(let url): url.path
        case .postgres(_, let location): location.redacted
        }
    }

    /// Opens the store, creating it (SQLite: the file and its directory; PostgreSQL: the schema) when `create`.
    ///
    /// - Parameters:
    ///   - create: `serve` and `store migrate` create; `report` and `receipts` refuse a SQLite store that does not
    ///     exist yet. PostgreSQL's schema is brought up to date in every case (migrations are idempotent).
    ///   - logger: Where the store logs.
    /// - Throws: ``AggregatorError``: `.unavailable` when there is no store yet or the server cannot be reached,
    ///   `.temporary` for a busy SQLite store or a full disk, `.badConfiguration` for a refused login.
    public func open(create: Bool, logger: Logger) throws -> any StoreEngine {
        switch self {
        case .sqlite(let url):
            if !create {
                guard FileManager.default.fileExists(atPath: url.path) else {
                    throw AggregatorError(
                        .unavailable, "there is no store at \(url.path) yet; `serve` creates it when it first starts")
                }
            }
            do {
                if create {
                    try FileManager.default.createDirectory(
                        at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                }
                return try AggregatorStore(path: url.path, logger: logger)
            } catch {
                throw AggregatorServer.storeError(error, path: url.path)
            }
        case .postgres(let url, let location):
            do {
                return try PostgresStore(url: url, logger: logger)
            } catch let error as PostgresStoreError {
                let context = "cannot open the store \(location.redacted)"
                if let temporary = AggregatorError(temporary: error, context: context) { throw temporary }
                // 28P01/28000: a refused login is a configuration problem, not an outage.
                let code: AggregatorError.Code =
                    error.sqlState?.hasPrefix("28") == true || error.sqlState == "3D000" ? .badConfiguration
                    : .unavailable
                // The message names the store (without its password) and what failed.
                throw AggregatorError(code, error.message)
            } catch {
                throw AggregatorError(.unavailable, "cannot open the store \(location.redacted): \(error)")
            }
        }
    }
}
