import Foundation
import GRDB
import JetbridgeModel
import JetbridgeStore
import Testing

/// A scan row no ground writes, only a hand edit (docs/STORE.md, "No stored data makes a report fail"): an id or tag
/// that SQLite's checks let through but is not 16 bytes of binary fails the read with a `corruptRow` naming the column.
/// Before, the report's and the console's readers took it with a subscript, which stops the process (`serve` too, for
/// the console's bags).
@Suite struct HandEditedRowTests {
    @Test(arguments: [
        ("id", "UPDATE scans SET id = 'sixteen-letters!' WHERE rowid = (SELECT min(rowid) FROM scans)"),
        ("tag", "UPDATE scans SET tag = 'sixteen-letters!'"),
    ])
    func aValueOfAnotherTypeIsACorruptRowNamingItsColumn(column: String, edit: String) throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        _ = try store.apply([batch("ramp-1", 1, [scan(1, tag: 1), scan(2, tag: 2, point: .destination)])])
        #expect(try store.bags(flight: flightA).count == 2)
        let byHand = try DatabaseQueue(path: fixture.storePath)
        try byHand.write { try $0.execute(sql: edit) }
        try byHand.close()

        let report = try #require(throws: StoreError.self) { try store.bags(flight: flightA) }
        #expect(report.code == .corruptRow && report.path == "scans.\(column)", "\(report)")
        // The console finds a bag's scans by its binary tag, so a text tag is not read there at all.
        guard column == "id" else { return }
        let console = try #require(throws: StoreError.self) {
            try store.consoleBags(flight: flightA, status: nil, after: nil, limit: 10)
        }
        #expect(console.code == .corruptRow && console.path == "scans.\(column)", "\(console)")
    }

    /// A number column holding text: the console's page refuses it by name; the report reads it as SQLite converts it
    /// (its fast path), and neither stops the process.
    @Test func aWeightThatIsNotANumberStopsNothing() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        defer { try? store.close() }
        _ = try store.apply([batch("ramp-1", 1, [scan(1, tag: 1), scan(2, tag: 2, point: .destination)])])
        let byHand = try DatabaseQueue(path: fixture.storePath)
        try byHand.write { try $0.execute(sql: "UPDATE scans SET weight = 'heavy'") }
        try byHand.close()
        #expect(try store.bags(flight: flightA).count == 2)
        let console = try #require(throws: StoreError.self) {
            try store.consoleBags(flight: flightA, status: nil, after: nil, limit: 10)
        }
        #expect(console.code == .corruptRow && console.path == "scans.weight", "\(console)")
    }

    /// Stored text a report cannot read is quoted in its error inert: a terminal must not act on an escape sequence a
    /// hand edit (or an older store) left in a row. Before, `report luggage` printed the row's bytes raw.
    @Test func aStoredValueQuotedInAnErrorReachesTheTerminalInert() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("ramp-1", 1, [scan(1, tag: 1)])])
        try store.close()
        let byHand = try DatabaseQueue(path: fixture.storePath)
        try byHand.write { try $0.execute(sql: "UPDATE scans SET owner = 'D' || char(27) || 'c' || char(7)") }
        try byHand.close()

        let result = try AggregatorCLITests.run(
            ["--home", fixture.directory.path, "report", "luggage"], in: fixture.directory)
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("stored owner 'D\\u{1B}c\\u{7}' is invalid"), "\(result.stderr)")
        #expect(!result.stderr.unicodeScalars.contains { $0.value == 27 || $0.value == 7 }, "\(result.stderr)")
    }
}
