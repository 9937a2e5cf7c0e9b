public import Foundation
public import Logging
import SystemSupport
public import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

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
    /// - Throws: ``AggregatorError`` `.dataError` for a PostgreSQL URL that does not parse (shown without its
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
            throw AggregatorError(.dataError, "store: \(error.message)")
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
    ///     exist yet. PostgreSQL's schema is brought up to date in every case (migrations are idempotent). The
    ///     commands that do not create only read, whole tables at a time, so their PostgreSQL connection has no
    ///     statement or answer timeout (``PostgresStore/Timeouts/reading``); `serve`'s has (docs/STORE.md).
    ///   - logger: Where the store logs.
    /// - Throws: ``AggregatorError``: `.unavailable` when there is no store yet or the server cannot be reached,
    ///   `.tryAgain` for a busy SQLite store or a full disk, `.dataError` for a refused login.
    public func open(create: Bool, logger: Logger) throws -> any StoreWriter {
        switch self {
        case .sqlite(let url):
            try Self.refuseLinks(at: url)
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
            } catch {
                throw AggregatorServer.storeError(error, path: url.path)
            }
            try Self.refuseOpenDirectory(of: url)
            do {
                return try SQLiteStore(path: url.path, logger: logger)
            } catch {
                throw AggregatorServer.storeError(error, path: url.path)
            }
        case .postgres(let url, let location):
            do {
                // `serve` and `store migrate` write: a server that accepts writes unless the URL says otherwise;
                // `report` and `receipts rebuild` read from any (libpq's default), a standby included.
                return try PostgresStore(
                    url: url, logger: logger, timeouts: create ? .serving : .reading,
                    defaultTarget: create ? .readWrite : .any)
            } catch let error as PostgresStoreError {
                let context = "cannot open the store \(location.redacted)"
                if let temporary = AggregatorError(temporary: error, context: context) { throw temporary }
                // 28P01/28000: a refused login is a configuration problem, not an outage; so is a TLS certificate
                // that does not verify, or TLS required of a server that offers none.
                let code: AggregatorError.Code =
                    error.sqlState?.hasPrefix("28") == true || error.sqlState == "3D000" || error.misconfigured
                    ? .dataError : .unavailable
                // The message names the store (without its password) and what failed.
                throw AggregatorError(code, error.message)
            } catch {
                throw AggregatorError(.unavailable, "cannot open the store \(location.redacted): \(error)")
            }
        }
    }

    /// The files SQLite keeps for the store at `url`: the database, then its write-ahead log, shared memory and
    /// rollback journal.
    static func sqliteFiles(_ url: URL) -> [String] {
        ["", "-wal", "-shm", "-journal"].map { url.path + $0 }
    }

    /// Refuses a symbolic link at the store or its side files, before SQLite opens any.
    ///
    /// SQLite opens its `-wal`, `-shm` and `-journal` with `O_NOFOLLOW` itself (failing with a bare "unable to open
    /// database file"), but it resolves a link at the database file and opens its target: a new store is then
    /// written into an empty file the link names. GRDB does not pass `SQLITE_OPEN_NOFOLLOW` (its open flags are not
    /// configurable), and that flag refuses a link anywhere in the path, the home's own directories included, so
    /// the check is made here.
    /// - Throws: ``AggregatorError`` `.cannotCreate` (73) naming the link.
    static func refuseLinks(at url: URL) throws {
        for path in sqliteFiles(url) {
            do { try FileSystem.refuseSymbolicLink(path, operation: "open the store") } catch {
                throw AggregatorError.refusedLink(path)
            }
        }
    }

    /// Refuses a store whose directory group or others may write: anyone who can write there can put a link at the
    /// store's name between ``refuseLinks(at:)`` and SQLite's open. The home is made 0700 by
    /// ``AggregatorHome/secure()`` before; a store elsewhere must be in a directory as private.
    /// - Throws: ``AggregatorError`` `.dataError` (65) naming the directory and its mode.
    static func refuseOpenDirectory(of url: URL) throws {
        let directory = url.deletingLastPathComponent().path
        var info = stat()
        guard stat(directory, &info) == 0, info.st_mode & 0o022 != 0 else { return }
        throw AggregatorError(
            .dataError,
            "the store's directory \(directory) is writable by group or others (mode "
                + "\(String(info.st_mode & 0o7777, radix: 8))): another user could put a link at the store's name "
                + "there and have SQLite write into the file it names; keep the store in a directory only this user "
                + "can write (the home is one), or run `chmod go-w \(directory)`")
    }
}
