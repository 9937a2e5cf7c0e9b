import Foundation
@testable import JetbridgeAggregator
import Testing

@Suite("PostgreSQL store location: where the password comes from")
struct PostgresLocationPasswordTests {
    @Test func theURLThenPGPASSWORDThenThePasswordFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pgpass-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("password")
        try "from-file\nignored\n".write(to: file, atomically: true, encoding: .utf8)
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
}
