public import Foundation
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Where a PostgreSQL store is: `postgres://user[:password]@host[:port]/database` (also `postgresql://`), or a
/// Unix socket with `?host=/socket/dir` (and no host before the path).
///
/// libpq's multi-host form lists several servers, tried in order: `postgres://user@h1:5432,h2:5433/database`
/// (a port defaults to 5432; an IPv6 address in brackets, `[::1]:5432`). `?target_session_attrs=` says which of them
/// to keep (``TargetSessionAttributes``), `?sslmode=` and `?sslrootcert=` how to secure the connection (``SSLMode``).
///
/// The user, password and database are percent-decoded exactly once, as libpq does: `%41` is `A`, and a `%` is
/// written `%25` (`@` `%40`, `:` `%3A`, `/` `%2F`). The password comes from the URL, else the `PGPASSWORD` environment
/// variable, else the file named by `?password_file=PATH` (its first line; refused when group or others may read
/// it, as `server.key` is). It is never part of ``description``, logs or errors: those show ``redacted``.
public struct PostgresLocation: Sendable, CustomStringConvertible {
    public var user: String
    var password: String?
    /// The first server (nil for a Unix socket).
    public var host: String?
    public var port: Int
    /// Every server of the URL, in its order (empty for a Unix socket).
    public var endpoints: [Endpoint]
    public var socketDirectory: String?
    public var database: String
    /// `target_session_attrs` as the URL gives it; nil: the command's default (``PostgresStore``).
    public var targetSessionAttributes: TargetSessionAttributes?
    /// `sslmode`; `disable` unless the URL says otherwise.
    public var sslMode: SSLMode
    /// `sslrootcert`: a PEM file of the certificate authorities to trust, or `system` for the system's.
    public var sslRootCertificate: String?
    /// The URL's parameters passed over (``ignoredParameters``), sorted: `serve` says so once, since a
    /// `connect_timeout=2` written for libpq changes nothing here.
    public var passedOver: [String] = []

    /// One server of the URL.
    public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// Which server a connection keeps, as libpq's `target_session_attrs`: the hosts are tried in order and the
    /// first that matches is kept (`prefer-standby`: the first standby, else the first that answers).
    public enum TargetSessionAttributes: String, Sendable, CaseIterable {
        /// The first that answers.
        case any
        /// One whose sessions may write (`SHOW transaction_read_only` is `off`).
        case readWrite = "read-write"
        /// One whose sessions may not write.
        case readOnly = "read-only"
        /// One not in recovery (`pg_is_in_recovery()` false).
        case primary
        /// A hot standby (`pg_is_in_recovery()` true).
        case standby
        /// A standby if there is one, else any.
        case preferStandby = "prefer-standby"
    }

    /// TLS to the server, as libpq's `sslmode`.
    public enum SSLMode: String, Sendable, CaseIterable {
        /// Plaintext only.
        case disable
        /// TLS if the server offers it, else plaintext; the certificate is not checked.
        case prefer
        /// TLS or no connection; the certificate is checked against `sslrootcert` only when one is given.
        case require
        /// TLS, with a certificate signed by an authority of `sslrootcert`.
        case verifyCA = "verify-ca"
        /// As `verify-ca`, and the certificate must name the host.
        case verifyFull = "verify-full"
    }

    /// Parses a store URL.
    ///
    /// - Parameters:
    ///   - url: The URL.
    ///   - environment: Where `PGPASSWORD` is looked up.
    /// - Throws: ``PostgresStoreError`` saying what is wrong with the URL (shown without its password), or with the
    ///   password file (missing, unreadable, or accessible to group or others).
    public init(_ url: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        // A host list is not a URL's authority URLComponents parses: it is cut out here and parsed on its own.
        var single = url
        var listed: [Endpoint]?
        if let split = Self.splitHosts(url), split.hosts.contains(",") {
            listed = try Self.parseHosts(split.hosts, shown: Self.redact(url))
            single = split.prefix + "hosts" + split.suffix
        }
        guard let components = URLComponents(string: single),
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
        // A stray `&` makes an item without a name; libpq passes over it too.
        let query = Dictionary(
            (components.queryItems ?? []).filter { !$0.name.isEmpty }.map { ($0.name, $0.value ?? "") },
            uniquingKeysWith: { $1 })
        // A parameter the store neither reads nor may pass over is refused, as libpq refuses one it does not know:
        // a misspelt `sslmod=require` would otherwise leave the connection in plaintext unseen.
        if let unknown = query.keys.sorted().first(where: {
            !Self.parameters.contains($0) && !Self.ignoredParameters.contains($0)
        }) {
            let hint =
                unknown == "password"
                ? " (a password goes in the URL as user:password@, in PGPASSWORD, or in a ?password_file=)"
                : ""
            throw PostgresStoreError(
                "store URL '\(shown)': unknown or unsupported parameter '\(unknown)'\(hint); this store reads "
                    + Self.parameters.sorted().joined(separator: ", ") + " and passes over "
                    + Self.ignoredParameters.sorted().joined(separator: ", "))
        }
        passedOver = query.keys.filter(Self.ignoredParameters.contains).sorted()
        if let directory = query["host"], !directory.isEmpty, !directory.hasPrefix("/") {
            throw PostgresStoreError(
                "store URL '\(shown)': ?host= takes a Unix socket directory (an absolute path), not "
                    + "'\(directory)'; name network hosts before the database (postgres://user@host:port/database)")
        }
        self.user = try decoded(encodedUser, "user")
        self.database = try decoded(encodedDatabase, "database")
        if let listed {
            endpoints = listed
            host = listed[0].host
            port = listed[0].port
        } else {
            let first = components.host.flatMap { $0.isEmpty ? nil : $0 }
            let firstPort = components.port ?? 5432
            host = first
            port = firstPort
            endpoints = first.map { [Endpoint(host: $0, port: firstPort)] } ?? []
        }
        socketDirectory = query["host"].flatMap { $0.isEmpty ? nil : $0 }
        guard host != nil || socketDirectory != nil else {
            throw PostgresStoreError("store URL '\(shown)' names no host (nor ?host=/socket/directory)")
        }
        if let value = query["target_session_attrs"] {
            guard let target = TargetSessionAttributes(rawValue: value) else {
                throw PostgresStoreError(
                    "store URL '\(shown)': target_session_attrs=\(value) is not one of "
                        + TargetSessionAttributes.allCases.map(\.rawValue).joined(separator: ", "))
            }
            targetSessionAttributes = target
        }
        if let value = query["sslmode"] {
            guard let mode = SSLMode(rawValue: value) else {
                throw PostgresStoreError(
                    "store URL '\(shown)': sslmode=\(value) is not one of "
                        + SSLMode.allCases.map(\.rawValue).joined(separator: ", "))
            }
            sslMode = mode
        } else {
            sslMode = .disable
        }
        sslRootCertificate = query["sslrootcert"].flatMap { $0.isEmpty ? nil : $0 }
        if let file = sslRootCertificate, file != "system" {
            guard sslMode != .disable else {
                throw PostgresStoreError("store URL '\(shown)': sslrootcert is given but sslmode is disable")
            }
            guard FileManager.default.isReadableFile(atPath: file),
                (try? Data(contentsOf: URL(fileURLWithPath: file))) != nil
            else {
                throw PostgresStoreError(
                    "store URL '\(shown)': cannot read the sslrootcert file '\(file)' (a PEM file of the certificate "
                        + "authorities that sign the server's certificate)")
            }
        }
        if sslMode == .verifyCA || sslMode == .verifyFull {
            guard sslRootCertificate != nil else {
                throw PostgresStoreError(
                    "store URL '\(shown)': sslmode=\(sslMode.rawValue) needs sslrootcert=FILE (the authorities to "
                        + "trust, PEM) or sslrootcert=system")
            }
        }
        if sslMode != .disable, socketDirectory != nil, host == nil {
            throw PostgresStoreError(
                "store URL '\(shown)': sslmode=\(sslMode.rawValue) over a Unix socket (PostgreSQL offers no TLS there); "
                    + "name a host, or drop sslmode")
        }
        if sslMode == .verifyFull, let address = endpoints.first(where: { Self.isIPAddress($0.host) }) {
            throw PostgresStoreError(
                "store URL '\(shown)': sslmode=verify-full checks the host name the certificate names, and "
                    + "\(address.host) is an IP address; name the host as its certificate does, or use verify-ca")
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

    /// The query parameters the store reads; any other is refused, but for ``ignoredParameters``.
    static let parameters: Set<String> = ["host", "password_file", "sslmode", "sslrootcert", "target_session_attrs"]

    /// libpq's parameters that change neither where the store connects nor how it is secured, passed over: a URL
    /// written for libpq with them works unchanged (the store keeps its own timeouts: docs/STORE.md).
    static let ignoredParameters: Set<String> = [
        "application_name", "connect_timeout", "fallback_application_name", "keepalives", "keepalives_count",
        "keepalives_idle", "keepalives_interval", "tcp_user_timeout",
    ]

    /// The URL without its password, for messages.
    public var redacted: String {
        var text = "postgres://\(user)@"
        text += endpoints.map(\.description).joined(separator: ",")
        text += "/\(database)"
        var query: [String] = []
        if let socketDirectory { query.append("host=\(socketDirectory)") }
        if let targetSessionAttributes { query.append("target_session_attrs=\(targetSessionAttributes.rawValue)") }
        if sslMode != .disable { query.append("sslmode=\(sslMode.rawValue)") }
        if !query.isEmpty { text += "?" + query.joined(separator: "&") }
        return text
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    static func isIPAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }

    /// `url` cut around its host list: what comes before it (scheme and user), the list, and what follows (path
    /// and query); nil when `url` has no `://`.
    static func splitHosts(_ url: String) -> (prefix: String, hosts: String, suffix: String)? {
        guard let scheme = url.range(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        let authority = rest[..<end]
        let start = authority.lastIndex(of: "@").map { authority.index(after: $0) } ?? authority.startIndex
        return (String(url[..<start]), String(url[start..<end]), String(url[end...]))
    }

    /// Parses `h1:p1,h2,[::1]:p3`: each host with its port (5432 when none is given).
    static func parseHosts(_ list: String, shown: String) throws -> [Endpoint] {
        try list.split(separator: ",", omittingEmptySubsequences: false).enumerated().map { offset, item in
            let what = "store URL '\(shown)': host \(offset + 1) of the list ('\(item)')"
            var host: Substring
            var portText: Substring?
            if item.hasPrefix("[") {
                guard let close = item.firstIndex(of: "]") else { throw PostgresStoreError("\(what) has no closing ]") }
                host = item[item.index(after: item.startIndex)..<close]
                let after = item[item.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw PostgresStoreError("\(what): expected :PORT after ]") }
                    portText = after.dropFirst()
                }
            } else {
                let parts = item.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count <= 2 else {
                    throw PostgresStoreError("\(what): write an IPv6 address in brackets, [ADDRESS]:PORT")
                }
                host = parts[0]
                portText = parts.count == 2 ? parts[1] : nil
            }
            guard !host.isEmpty else { throw PostgresStoreError("\(what) names no host") }
            var port = 5432
            if let portText {
                guard let value = Int(portText), (1...65535).contains(value) else {
                    throw PostgresStoreError("\(what): the port '\(portText)' is not a number from 1 to 65535")
                }
                port = value
            }
            guard let decoded = host.removingPercentEncoding else {
                throw PostgresStoreError("\(what) is not valid percent-encoded UTF-8")
            }
            return Endpoint(host: decoded, port: port)
        }
    }

    public var description: String { redacted }

    /// `url` with any password replaced by `***`, for a URL that did not parse.
    static func redact(_ url: String) -> String {
        // A host list: redacted with a stand-in host, then put back.
        if let split = splitHosts(url), split.hosts.contains(",") {
            let redacted = redact(split.prefix + "hosts" + split.suffix)
            if let stand = splitHosts(redacted), stand.hosts == "hosts" {
                return stand.prefix + split.hosts + stand.suffix
            }
        }
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
    /// Whether the connection was refused for its configuration (a server certificate that does not verify, TLS
    /// required and not offered, an sslrootcert that does not load): fixing the URL or the server helps, waiting does
    /// not.
    public var misconfigured: Bool = false

    public init(_ message: String, sqlState: String? = nil, unreachable: Bool = false, misconfigured: Bool = false) {
        self.message = message
        self.sqlState = sqlState
        self.unreachable = unreachable
        self.misconfigured = misconfigured
    }

    /// Whether the SQLSTATE is a connection exception (class 08), the server going away or not up yet (57P01
    /// admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now), or the server ending the session (25P03: it
    /// sat in an open transaction past `idle_in_transaction_session_timeout`, as a stopped aggregator's does).
    var isConnectionState: Bool {
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03", "25P03"].contains(sqlState)
    }

    /// Whether the server refused a write because it is (now) read-only (25006, read_only_sql_transaction): a primary
    /// that became a standby in a failover. The writer connects again and looks for the host that accepts writes.
    var isReadOnlyState: Bool { sqlState == "25006" }

    /// Whether the server gave up a wait: a lock held past `lock_timeout` (55P03) or a statement past
    /// `statement_timeout` (57014). Something else holds the store up; trying again later may succeed.
    public var isTimeout: Bool { sqlState == "55P03" || sqlState == "57014" }

    public var description: String { message }
}
