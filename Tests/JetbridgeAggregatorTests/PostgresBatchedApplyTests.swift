import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Logging
import PostgresNIO
import Testing

/// The PostgreSQL store writes each table's rows of a group in one statement (`PostgresStore+Apply.swift`). These
/// groups put the same id in one group several times — the edges a bulk statement has and one statement per row did
/// not — and demand the SQLite store's outcomes, rows, statistics and receipt marks (with their generations).
@Suite(
    "PostgreSQL store: one statement per table keeps the per-row verdicts",
    // Skipped without PostgreSQL, failing in CI without it (see TestPostgres).
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PostgresBatchedApplyTests {
    /// What one engine made of the groups.
    struct Result: Equatable, Sendable {
        var outcomes: [[BatchOutcome]] = []
        var orders: [Order] = []
        var bags: [BagState] = []
        var devices = DeviceReport(devices: [])
        /// `flight seat generation`, by flight and seat.
        var marks: [String] = []
        var receipts: [[UInt8]] = []
    }

    static func read(_ store: any StoreWriter, groups: [[IncomingBatch]], marks: () throws -> [String]) throws -> Result
    {
        var result = Result()
        for (n, group) in groups.enumerated() {
            result.outcomes.append(try store.apply(group, at: date(Double(n))))
        }
        result.orders = try store.orders(flight: nil)
        result.bags = try store.bags(flight: nil)
        result.devices = try store.deviceReport()
        result.marks = try marks()
        result.receipts = try [flightA, flightB].flatMap { try store.receipts(flight: $0).map { $0.textBytes() } }
        return result
    }

    /// Applies `groups` to a SQLite store and to a PostgreSQL store; returns both results (SQLite's first).
    static func bothEngines(_ groups: [[IncomingBatch]]) async throws -> (expected: Result, actual: Result) {
        try await onOwnThread {
            let fixture = try Fixture()
            defer { fixture.remove() }
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let sqlite = try fixture.open()
            defer { try? sqlite.close() }
            let postgres = try PostgresStore(url: database.url, logger: Logger(label: "test"))
            defer { try? postgres.close() }
            let expected = try read(sqlite, groups: groups) {
                try DatabaseQueue(path: fixture.storePath).read { db in
                    try Row.fetchAll(
                        db, sql: "SELECT flight, seat, generation FROM dirty_receipts ORDER BY flight, seat"
                    )
                    .map { "\($0[0] as String) \($0[1] as String) \($0[2] as Int)" }
                }
            }
            let actual = try read(postgres, groups: groups) {
                let connection = try TestPostgres.connect(database.url)
                defer { try? connection.close().wait() }
                return try connection.query(
                    "SELECT flight, seat, generation FROM dirty_receipts ORDER BY flight, seat",
                    logger: Logger(label: "test")
                ).wait().map { row in
                    let (flight, seat, generation) = try row.decode((String, String, Int).self)
                    return "\(flight) \(seat) \(generation)"
                }
            }
            return (expected, actual)
        }
    }

    @Test func theSameIdTwiceInOneGroupIsNewOnceThenDuplicate() async throws {
        let groups = [
            [
                batch("cart-1", 1, [order(1), scan(2, tag: 1), order(1)]),
                batch("cart-1", 4, [order(1), scan(2, tag: 1), scan(3, tag: 1, point: .destination)]),
            ],
            [batch("cart-1", 1, [order(1), scan(2, tag: 1), order(1)]), batch("cart-1", 7, [scan(3, tag: 1)])],
        ]
        let (expected, actual) = try await Self.bothEngines(groups)
        #expect(expected.outcomes.map { $0.map(\.new) } == [[2, 1], [0, 0]])
        #expect(actual.outcomes == expected.outcomes)
        #expect(actual.orders == expected.orders && actual.orders.count == 1)
        #expect(actual.bags == expected.bags)
        #expect(actual.devices == expected.devices)
        #expect(actual.marks == expected.marks)
        #expect(actual == expected)
    }

    @Test func aRevisionAndItsOlderRevisionInOneGroupEndAtTheHighest() async throws {
        let groups = [
            [
                batch("cart-1", 1, [order(5, revision: 3, lines: [(chips, 1)]), order(6, revision: 1)]),
                batch("cart-1", 3, [order(5, revision: 2, lines: [(popcorn, 1)]), order(6, revision: 2)]),
                batch("cart-1", 5, [order(6, revision: 4, lines: [(chips, 3)]), order(6, revision: 3), order(5)]),
            ],
            [batch("cart-1", 8, [order(5, revision: 4), order(5, revision: 4), order(6, revision: 4)])],
        ]
        let (expected, actual) = try await Self.bothEngines(groups)
        // 5: revision 3 new, 2 and 1 old; 6: revisions 1, 2 and 4 new, 3 old. Then 5 at 4 once.
        #expect(expected.outcomes.map { $0.map(\.new) } == [[2, 1, 1], [1]])
        #expect(expected.orders.map(\.revision) == [4, 4])
        #expect(actual.outcomes == expected.outcomes)
        #expect(actual.orders == expected.orders)
        #expect(actual.devices == expected.devices)
        #expect(actual.marks == expected.marks)
        #expect(actual == expected)
    }

    @Test func anOrderMovingSeatsWithinOneGroupMarksEverySeatItLeft() async throws {
        let groups = [
            [batch("cart-1", 1, [order(8, seat: "3C")])],
            [
                batch("cart-1", 2, [order(7, seat: "1A"), order(8, revision: 2, seat: "4D")]),
                batch("cart-1", 4, [order(7, revision: 2, seat: "2B"), order(8, revision: 3, seat: "3C")]),
                batch("cart-1", 6, [order(7, revision: 3, flight: flightB, seat: "1A")]),
            ],
        ]
        let (expected, actual) = try await Self.bothEngines(groups)
        // 8 left 3C and 4D; 7 left 1A and 2B of flight A: every one of them is marked.
        #expect(
            Set(expected.marks.map { $0.split(separator: " ").dropLast().joined(separator: " ") }).isSuperset(
                of: [
                    "\(flightA.rawValue) 1A", "\(flightA.rawValue) 2B", "\(flightA.rawValue) 3C",
                    "\(flightA.rawValue) 4D",
                    "\(flightB.rawValue) 1A",
                ]))
        #expect(actual.outcomes == expected.outcomes)
        #expect(actual.orders == expected.orders)
        #expect(actual.marks == expected.marks)
        #expect(actual.receipts == expected.receipts)
        #expect(actual == expected)
    }

    @Test func anotherDevicesOrderAndASecondCurrencyInOneGroupAreRefusedAtTheirIndex() async throws {
        let groups = [
            [
                batch("cart-1", 1, [order(9), scan(10, tag: 2)]),
                batch("cart-2", 1, [scan(11, tag: 2), order(9, revision: 2), order(12)]),
                batch("cart-1", 3, [order(13), order(in: "EUR", 14, flight: flightB)]),
                batch("cart-3", 1, [order(in: "GBP", 15, flight: flightB), order(9)]),
            ],
            [batch("cart-2", 1, [scan(11, tag: 2), order(9, revision: 2), order(12)])],
        ]
        let (expected, actual) = try await Self.bothEngines(groups)
        let refused = expected.outcomes[0].map { $0.rejection?.index }
        #expect(refused == [nil, 1, nil, 0])
        #expect(actual.outcomes == expected.outcomes)
        #expect(actual.orders == expected.orders)
        #expect(actual.devices == expected.devices)
        #expect(actual.marks == expected.marks)
        #expect(actual == expected)
    }

    /// Weights and times that no binary double holds exactly, tiny or large, come back from PostgreSQL as the same
    /// doubles SQLite keeps (bags compared whole, both engines).
    @Test func scansKeepTheirDoublesExactly() async throws {
        // Weights are kept to the gram (three decimals, LuggageTag), so these are what the store keeps.
        let weights = [0.001, 0.1, 23.456, 333.333, 999.999, 42]
        let times = [0.000_001, 1.0 / 3.0, -86_400.123_456_789, 1e9 + 0.1, 123_456_789.987_654_32, 7]
        let records = zip(weights, times).enumerated().map { n, value in
            scan(20 + n, tag: 30 + n, weight: value.0, at: value.1)
        }
        let (expected, actual) = try await Self.bothEngines([[batch("ramp-1", 1, records)]])
        #expect(expected.bags.map(\.weight).sorted() == weights.sorted())
        #expect(actual.bags == expected.bags)
        #expect(actual == expected)
    }
}
