import Foundation
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

import SystemSupport
@testable import JetbridgeAggregator
@testable import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

/// Certificates made for one test with Debian's openssl: a certificate authority, a server certificate it signs for
/// `localhost`, one it signs for another name, and an unrelated authority.
struct TestCertificates {
    let directory: URL
    var ca: String { directory.appendingPathComponent("ca.crt").path }
    var otherCA: String { directory.appendingPathComponent("other-ca.crt").path }

    init(in directory: URL) throws {
        self.directory = directory
        let dir = directory.path
        func openssl(_ arguments: [String]) throws { try OwnPostgresCluster.shell(["openssl"] + arguments) }
        for name in ["ca", "other-ca"] {
            try openssl([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=Jetbridge test \(name)",
                "-keyout", "\(dir)/\(name).key", "-out", "\(dir)/\(name).crt",
            ])
        }
        for (name, host) in [("localhost", "localhost"), ("elsewhere", "db.elsewhere.invalid")] {
            try openssl([
                "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=\(host)", "-keyout", "\(dir)/\(name).key",
                "-out", "\(dir)/\(name).csr",
            ])
            try "subjectAltName=DNS:\(host)\n".write(toFile: "\(dir)/\(name).ext", atomically: true, encoding: .utf8)
            try openssl([
                "x509", "-req", "-in", "\(dir)/\(name).csr", "-CA", "\(dir)/ca.crt", "-CAkey", "\(dir)/ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "\(dir)/\(name).ext", "-out", "\(dir)/\(name).crt",
            ])
        }
    }

    /// Copies the server certificate `name` (and key) into the cluster's directory, owned by its server user, and
    /// turns TLS on with it (a reload: PostgreSQL reads its TLS files again on SIGHUP).
    func install(_ name: String, on cluster: OwnPostgresCluster) throws {
        for ext in ["crt", "key"] {
            let target = "\(cluster.directory)/\(name).\(ext)"
            _ = try OwnPostgresCluster.shell(["cp", directory.appendingPathComponent("\(name).\(ext)").path, target])
            chmod(target, 0o600)
            if getuid() == 0 { _ = try OwnPostgresCluster.shell(["chown", "postgres:", target]) }
        }
        try TestPostgres.admin(cluster.url, "ALTER SYSTEM SET ssl = on")
        try TestPostgres.admin(cluster.url, "ALTER SYSTEM SET ssl_cert_file = '\(cluster.directory)/\(name).crt'")
        try TestPostgres.admin(cluster.url, "ALTER SYSTEM SET ssl_key_file = '\(cluster.directory)/\(name).key'")
        try TestPostgres.admin(cluster.url, "SELECT pg_reload_conf()")
    }
}

/// Issue 27, item 3: TLS to PostgreSQL with libpq's `sslmode` and `sslrootcert`, against a server whose certificate
/// the test makes; never a silent fallback to plaintext.
@Suite(
    "PostgreSQL TLS: sslmode and sslrootcert",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PostgresTLSTests {
    static let logger = quietLogger

    /// Whether the store's own session is encrypted (`pg_stat_ssl`).
    static func encrypted(_ store: PostgresStore) throws -> Bool {
        try store.locked {
            try store.run("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").first.map {
                try $0.decode(Bool.self)
            } ?? false
        }
    }

    @Test func requireAndVerifyFullConnectOverTLSAndAWrongCAOrNameIsRefused() async throws {
        let directory = try TemporaryDirectory(prefix: "pgtls")
        try await onOwnThread {
            let certificates = try TestCertificates(in: directory.url)
            let cluster = try OwnPostgresCluster()
            defer { cluster.remove() }
            try certificates.install("localhost", on: cluster)
            let p = port(of: cluster.url)
            let base = "postgres://postgres:s3cret@localhost:\(p)/jetbridge_test"

            let required = try PostgresStore(url: base + "?sslmode=require", logger: Self.logger)
            #expect(try Self.encrypted(required))
            try required.close()
            let verified = try PostgresStore(
                url: base + "?sslmode=verify-full&sslrootcert=\(certificates.ca)", logger: Self.logger)
            #expect(try Self.encrypted(verified))
            try verified.close()
            let plain = try PostgresStore(url: base, logger: Self.logger)
            #expect(try !Self.encrypted(plain), "sslmode defaults to disable")
            try plain.close()

            // An authority that did not sign the server's certificate.
            let wrongCA = try #require(throws: PostgresStoreError.self) {
                try PostgresStore(
                    url: base + "?sslmode=verify-full&sslrootcert=\(certificates.otherCA)", logger: Self.logger)
            }
            #expect(wrongCA.misconfigured && wrongCA.message.contains("certificate"), "\(wrongCA)")
            #expect(!wrongCA.message.contains("s3cret"))

            // A certificate for another name: verify-full refuses it, verify-ca (the authority only) takes it.
            try certificates.install("elsewhere", on: cluster)
            let wrongName = try #require(throws: PostgresStoreError.self) {
                try PostgresStore(
                    url: base + "?sslmode=verify-full&sslrootcert=\(certificates.ca)", logger: Self.logger)
            }
            #expect(wrongName.misconfigured && wrongName.message.contains("certificate"), "\(wrongName)")
            let authorityOnly = try PostgresStore(
                url: base + "?sslmode=verify-ca&sslrootcert=\(certificates.ca)", logger: Self.logger)
            #expect(try Self.encrypted(authorityOnly))
            try authorityOnly.close()
        }
    }

    /// A server without TLS: require and verify-full fail (no plaintext fallback), prefer connects in plaintext.
    @Test func aServerWithoutTLSIsRefusedWhenTLSIsRequired() async throws {
        let directory = try TemporaryDirectory(prefix: "pgtls")
        try await onOwnThread {
            let certificates = try TestCertificates(in: directory.url)
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let p = port(of: database.url)
            let base = "postgres://postgres@localhost:\(p)/\(database.name)"
            for query in ["?sslmode=require", "?sslmode=verify-full&sslrootcert=\(certificates.ca)"] {
                let error = try #require(throws: PostgresStoreError.self) {
                    try PostgresStore(url: base + query, logger: Self.logger)
                }
                #expect(error.misconfigured && error.message.contains("does not offer TLS"), "\(query): \(error)")
            }
            let preferred = try PostgresStore(url: base + "?sslmode=prefer", logger: Self.logger)
            #expect(try !Self.encrypted(preferred))
            try preferred.close()
        }
    }

    /// What the URL itself gets wrong is refused before any connection, each naming what to change.
    @Test func badTLSSettingsAreRefusedInTheURL() throws {
        let directory = try TemporaryDirectory(prefix: "pgtls")
        let unreadable = directory.url.appendingPathComponent("missing.crt").path
        let cases: [(String, String)] = [
            ("sslmode=verify", "sslmode=verify is not one of disable, prefer, require, verify-ca, verify-full"),
            ("sslmode=verify-full", "needs sslrootcert"),
            ("sslmode=verify-ca&sslrootcert=\(unreadable)", "cannot read the sslrootcert file '\(unreadable)'"),
            // A misspelt sslmode would otherwise leave the connection in plaintext; libpq refuses it too.
            (
                "sslmod=require",
                "unknown or unsupported parameter 'sslmod'; this store reads host, password_file, sslmode, "
                    + "sslrootcert, target_session_attrs and passes over application_name, connect_timeout"
            ),
            ("ssl=true", "unknown or unsupported parameter 'ssl'"),
            ("host=db.example", "?host= takes a Unix socket directory (an absolute path), not 'db.example'"),
            ("sslmode=require&sslcert=/etc/client.crt", "unknown or unsupported parameter 'sslcert'"),
            ("password=s3cret", "parameter 'password' (a password goes in the URL as user:password@"),
        ]
        for (query, says) in cases {
            let error = try #require(throws: PostgresStoreError.self) {
                try PostgresLocation("postgres://jb:s3cret@db.example/d?\(query)", environment: [:])
            }
            #expect(error.message.contains(says), "\(query): \(error)")
            #expect(!error.message.contains("s3cret"))
        }
        // libpq's parameters that change neither where nor how securely it connects are passed over, and so is a
        // stray `&`.
        let passedOver = try PostgresLocation(
            "postgres://jb@db.example:6543/d?connect_timeout=10&application_name=ground&sslmode=require&",
            environment: [:])
        #expect(passedOver.sslMode == .require && passedOver.host == "db.example" && passedOver.port == 6543)
        // What `serve` names in its notice at start.
        #expect(passedOver.passedOver == ["application_name", "connect_timeout"])
        let address = try #require(throws: PostgresStoreError.self) {
            try PostgresLocation("postgres://jb@127.0.0.1/d?sslmode=verify-full&sslrootcert=system", environment: [:])
        }
        #expect(address.message.contains("IP address"), "\(address)")
    }

    /// Exit codes: a certificate that does not verify is 65 (a configuration to fix, not an outage); an unreadable
    /// sslrootcert 65.
    @Test func theCommandsExitCodesForTLSFailures() async throws {
        let directory = try TemporaryDirectory(prefix: "pgtls")
        let fixture = try Fixture()
        defer { fixture.remove() }
        let certificates = try await onOwnThread { try TestCertificates(in: directory.url) }
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let p = port(of: database.url)
        let home = ["--home", fixture.directory.path]
        let noTLS = try AggregatorCLITests.run(
            home + ["store", "migrate", "--store", "postgres://postgres@localhost:\(p)/\(database.name)?sslmode=require"],
            in: fixture.directory)
        #expect(noTLS.status == 65, "\(noTLS.stderr)")
        #expect(noTLS.stderr.contains("does not offer TLS"), "\(noTLS.stderr)")
        let unreadable = try AggregatorCLITests.run(
            home + [
                "report", "flights", "--store",
                "postgres://postgres@localhost:\(p)/x?sslmode=verify-ca&sslrootcert=\(certificates.directory.path)/nope",
            ], in: fixture.directory)
        #expect(unreadable.status == 65, "\(unreadable.stderr)")
        #expect(unreadable.stderr.contains("sslrootcert"), "\(unreadable.stderr)")
    }
}
