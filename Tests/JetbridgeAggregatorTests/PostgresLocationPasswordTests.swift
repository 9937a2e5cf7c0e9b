import Foundation
import JetbridgeTestKit
import Testing

import SystemSupport
@testable import JetbridgeAggregator
@testable import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

@Suite("PostgreSQL store location: where the password comes from")
struct PostgresLocationPasswordTests {
    @Test func theURLThenPGPASSWORDThenThePasswordFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("password")
        try "from-file\nignored\n".write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, 0o600)
        let base = "postgres://jb%s@db.example:6543/jetbridge?password_file=\(file.path)"
        let inURL = try PostgresLocation(
            base.replacingOccurrences(of: "%s", with: ":from%2Durl"), environment: ["PGPASSWORD": "from-env"])
        #expect(inURL.password == "from-url")
        let fromEnvironment = try PostgresLocation(
            base.replacingOccurrences(of: "%s", with: ""), environment: ["PGPASSWORD": "from-env"])
        #expect(fromEnvironment.password == "from-env")
        let fromFile = try PostgresLocation(base.replacingOccurrences(of: "%s", with: ""), environment: [:])
        #expect(fromFile.password == "from-file")
        #expect(fromFile.port == 6543 && fromFile.host == "db.example" && fromFile.database == "jetbridge")
        for location in [inURL, fromEnvironment, fromFile] {
            #expect(!location.redacted.contains("from-"))
        }
        #expect(throws: PostgresStoreError.self) {
            try PostgresLocation("postgres://jb@db/x?password_file=\(directory.path)/missing", environment: [:])
        }
    }

    /// Issue 23, item 14: the URL's parts are percent-decoded exactly once, as libpq does: `%41` is `A`, and a `%` in
    /// the password is written `%25`. Decoding twice made a password holding `%41` impossible to give in the URL.
    @Test(arguments: [
        ("p%41ss", "pAss"), ("p%2541ss", "p%41ss"), ("100%25", "100%"), ("%2525", "%25"), ("a%3Ab%40c%2Fd", "a:b@c/d"),
        ("caf%C3%A9", "café"), ("plain", "plain"),
    ])
    func theURLsPasswordIsDecodedOnce(encoded: String, password: String) throws {
        let location = try PostgresLocation("postgres://jb:\(encoded)@db.example/jetbridge", environment: [:])
        #expect(location.password == password)
        #expect(!location.redacted.contains(encoded) && !location.description.contains(password))
    }

    @Test func theUserAndTheDatabaseAreDecodedOnceToo() throws {
        let location = try PostgresLocation("postgres://j%2540b@db.example/d%2541b", environment: [:])
        #expect(location.user == "j%40b")
        #expect(location.database == "d%41b")
    }

    @Test func aPasswordThatIsNotUTF8OnceDecodedIsRefusedWithoutShowingIt() throws {
        let error = try #require(throws: PostgresStoreError.self) {
            try PostgresLocation("postgres://jb:s3cr%FFt@db.example/jetbridge", environment: [:])
        }
        #expect(error.message.contains("password"), "\(error)")
        #expect(error.message.contains("%25"), "\(error)")
        #expect(!error.message.contains("s3cr"), "\(error)")
    }

    /// Issue 23, item 14: a password file group or others may read is refused, as `serve` refuses such a
    /// `server.key` (exit 65, naming the mode and `chmod 600`).
    @Test(arguments: [0o644, 0o640, 0o604, 0o660, 0o606, 0o700])
    func aPasswordFileOthersCanReachIsRefused(mode: Int) throws {
        let directory = try TemporaryDirectory(prefix: "pgpass")
        let file = directory.url.appendingPathComponent("password")
        try "secret\n".write(to: file, atomically: true, encoding: .utf8)
        chmod(file.path, mode_t(mode))
        let url = "postgres://jb@db.example/jetbridge?password_file=\(file.path)"
        if mode & 0o077 == 0 {
            #expect(try PostgresLocation(url, environment: [:]).password == "secret")
            return
        }
        let error = try #require(throws: AggregatorError.self) {
            try StoreLocation(url, home: AggregatorHome(directory: directory.url), environment: [:])
        }
        #expect(error.code == .dataError && error.exitCode == 65)
        #expect(
            error.message.contains("\(file.path) is accessible to group or others (mode \(String(mode, radix: 8)))"),
            "\(error)")
        #expect(error.message.contains("run `chmod 600 \(file.path)`"), "\(error)")
        #expect(!error.message.contains("secret"))
        // Fixed as told, it is read.
        chmod(file.path, 0o600)
        #expect(try PostgresLocation(url, environment: [:]).password == "secret")
    }
}
