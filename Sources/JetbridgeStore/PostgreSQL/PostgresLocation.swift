public import Foundation
import SystemSupport

/// Where a PostgreSQL store is: `postgres://user[:password]@host[:port]/database` (also `postgresql://`), or a
/// Unix socket with `?host=/socket/dir` (and no host before the path).
///
/// The user, password and database are percent-decoded exactly once, as libpq does: `%41` is `A`, and a `%` is
/// written `%25` (`@` `%40`, `:` `%3A`, `/` `%2F`). The password comes from the URL, else the `PGPASSWORD` environment
/// variable, else the file named by `?password_file=PATH` (its first line; refused when group or others may read
/// it, as `server.key` is). It is never part of ``description``, logs or errors: those show ``redacted``.
public struct PostgresLocation: Sendable, CustomStringConvertible {
    public var user: String
    var password: String?
    public var host: String?
    public var port: Int
    public var socketDirectory: String?
    public var database: String

    /// Parses a store URL.
    ///
    /// - Parameters:
    ///   - url: The URL.
    ///   - environment: Where `PGPASSWORD` is looked up.
    /// - Throws: ``PostgresStoreError`` saying what is wrong with the URL (shown without its password), or with the
    ///   password file (missing, unreadable, or accessible to group or others).
    public init(_ url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        guard let components = URLComponents(string: url),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else {
            throw PostgresStoreError(
                "store URL '\(Self.redact(url))' is not a postgres://user@host:port/database URL (in the user and "
                    + "the password, write % as %25, @ as %40, : as %3A and / as %2F)")
        }
        let shown = Self.redact(url)
        // The percent-encoded parts, decoded once here: URLComponents' `user`, `password` and `path` are already
        // decoded, and decoding those again turned a password's `%2541` into `A`.
        func decoded(_ part: String, _ what: String) throws -> String {
            guard let text = part.removingPercentEncoding else {
                throw PostgresStoreError(
                    "store URL '\(shown)': the \(what) is not valid percent-encoded UTF-8 (write % as %25)")
            }
            return text
        }
        guard let encodedUser = components.percentEncodedUser, !encodedUser.isEmpty else {
            throw PostgresStoreError("store URL '\(shown)' names no user (postgres://USER@host:port/database)")
        }
        let encodedDatabase = String(components.percentEncodedPath.drop { $0 == "/" })
        guard !encodedDatabase.isEmpty, !encodedDatabase.contains("/") else {
            throw PostgresStoreError("store URL '\(shown)' names no database (postgres://user@host:port/DATABASE)")
        }
        let query = Dictionary(
            (components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        self.user = try decoded(encodedUser, "user")
        self.database = try decoded(encodedDatabase, "database")
        host = components.host.flatMap { $0.isEmpty ? nil : $0 }
        port = components.port ?? 5432
        socketDirectory = query["host"].flatMap { $0.hasPrefix("/") ? $0 : nil }
        guard host != nil || socketDirectory != nil else {
            throw PostgresStoreError("store URL '\(shown)' names no host (nor ?host=/socket/directory)")
        }
        if let password = components.percentEncodedPassword {
            self.password = try decoded(password, "password")
        } else if let password = environment["PGPASSWORD"] {
            self.password = password
        } else if let file = query["password_file"] {
            if let exposure = SecretFile.exposure(file, holding: "a database password") {
                throw PostgresStoreError("the password file of store '\(shown)': \(exposure)")
            }
            do {
                let text = try String(contentsOfFile: file, encoding: .utf8)
                self.password = String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
            } catch {
                throw PostgresStoreError("cannot read the password file '\(file)' of store '\(shown)': \(error)")
            }
        }
    }

    /// The URL without its password, for messages.
    public var redacted: String {
        var text = "postgres://\(user)@"
        if let host { text += "\(host):\(port)" }
        text += "/\(database)"
        if let socketDirectory { text += "?host=\(socketDirectory)" }
        return text
    }

    public var description: String { redacted }

    /// `url` with any password replaced by `***`, for a URL that did not parse.
    static func redact(_ url: String) -> String {
        guard var components = URLComponents(string: url) else {
            // Cut everything between "://" and "@" after a colon: user:password@.
            guard let scheme = url.range(of: "://"), let at = url.range(of: "@", range: scheme.upperBound..<url.endIndex),
                let colon = url.range(of: ":", range: scheme.upperBound..<at.lowerBound)
            else { return url }
            return String(url[..<colon.upperBound]) + "***" + String(url[at.lowerBound...])
        }
        // The encoded form: `password` is nil for one that does not decode, which would then be shown.
        if components.percentEncodedPassword != nil { components.percentEncodedPassword = "***" }
        if let items = components.queryItems {
            components.queryItems = items.map { $0.name == "password" ? URLQueryItem(name: "password", value: "***") : $0 }
        }
        return components.string ?? "(store URL)"
    }
}

/// A PostgreSQL store failure: what failed and where (the store's URL without its password), and the server's
/// SQLSTATE when it answered with an error.
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The server's SQLSTATE (such as `40001`), when the server refused a statement.
    public var sqlState: String?
    /// Whether the server could not be reached (refused or lost connection, server shutting down or starting up):
    /// an outage that reconnecting ends, rather than a statement the server refused.
    public var unreachable: Bool

    public init(_ message: String, sqlState: String? = nil, unreachable: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.unreachable = unreachable
    }

    /// Whether the SQLSTATE is a connection exception (class 08), the server going away or not up yet (57P01
    /// admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now), or the server ending the session (25P03: it
    /// sat in an open transaction past `idle_in_transaction_session_timeout`, as a stopped aggregator's does).
    var isConnectionState: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03", "25P03"].contains(sqlState)
    }

    /// Whether the server gave up a wait: a lock held past `lock_timeout` (55P03) or a statement past
    /// `statement_timeout` (57014). Something else holds the store up; trying again later may succeed.
    public var isTimeout: Bool { sqlState == "55P03" || sqlState == "57014" }

    public var description: String { message }
}
