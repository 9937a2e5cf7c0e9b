import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

/// The PostgreSQL store inserts new rows with a plain `INSERT` (issue 29): orders after asking which ids are stored,
/// scans at once. A stored id, or one another aggregator stores in between, fails the plain insert with 23505
/// (unique_violation), and the store must fall back (a savepoint, then the round again or `ON CONFLICT DO NOTHING`)
/// and count each record once. These tests make that happen every time: aggregator a's transaction has inserted the
/// batch and is held open by a third session's lock while aggregator b, with the same batch, finds the ids not stored
/// and waits on a's rows; then a commits. The batch either resends a record stored before (the 23505 comes at once,
/// then the fallback waits) or holds only new ones (the plain insert itself waits, and then fails).
@Suite(
    "PostgreSQL store: a plain insert that meets another aggregator's rows falls back and counts them once",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PostgresApplyRaceTests {
    static let logger = quietLogger

    enum Kind: String, CaseIterable, Sendable {
        case orders, scans
    }

    /// What the race left.
    struct Outcome: Sendable {
        var a: Result<[BatchOutcome], any Error>?
        var b: Result<[BatchOutcome], any Error>?
        var waitersBeforeRelease = 0
        var rows = 0
        var device: DeviceStatistics?
        /// `device_flights`: records, held, digest, valid.
        var counter: (records: Int, held: Int, digest: UInt64, valid: Bool)?
        var staleMarks = 0
    }

    /// Record `n` of `kind`: orders of cart-1, scans of ramp-1, all on flight A.
    static func record(_ kind: Kind, _ n: Int) -> Record {
        switch kind {
        case .orders: order(n, seat: "\(n % 9 + 1)A")
        case .scans: scan(n, tag: n)
        }
    }

    static func device(_ kind: Kind) -> String { kind == .orders ? "cart-1" : "ramp-1" }

    @Test(arguments: Kind.allCases, [true, false])
    func aBatchStoredByAnotherAggregatorWhileThisOneInsertsItIsDuplicateOnce(
        _ kind: Kind, resendsAStoredRecord: Bool
    ) async throws {
        let first = resendsAStoredRecord ? 1 : 2
        let outcome = try await onOwnThread { () throws -> Outcome in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let a = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? a.close() }
            let b = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? b.close() }
            let device = Self.device(kind)
            // Record 1 stored before: the flight and the device's counter row exist, and record 1 comes again.
            _ = try a.apply([batch(device, 1, [Self.record(kind, 1)])], at: date(0))
            let resent = batch(device, 2, (first...11).map { Self.record(kind, $0) })

            let holder = try TestPostgres.connect(database.url)
            defer { try? holder.close().wait() }
            func run(_ sql: String) throws {
                _ = try holder.query(PostgresQuery(unsafeSQL: sql), logger: Self.logger).wait()
            }
            try run("BEGIN")
            try run("SELECT 1 FROM device_flights WHERE device = '\(device)' FOR UPDATE")
            var outcome = Outcome()
            let applied = Locked2<(a: Result<[BatchOutcome], any Error>?, b: Result<[BatchOutcome], any Error>?)>(
                (nil, nil))
            // a inserts the batch's rows, then waits for the counter row the holder locked.
            Thread {
                let result = Result { try a.apply([resent], at: date(1)) }
                applied.mutate { $0.a = result }
            }.start()
            try waitUntilBlocking("a waits for the counter row") { try TestPostgres.lockWaiters(database) == 1 }
            // b finds ids 2…11 not stored (a's rows are not committed) and waits on a's rows.
            Thread {
                let result = Result { try b.apply([resent], at: date(2)) }
                applied.mutate { $0.b = result }
            }.start()
            try waitUntilBlocking("b waits for a's rows") { try TestPostgres.lockWaiters(database) == 2 }
            outcome.waitersBeforeRelease = try TestPostgres.lockWaiters(database)
            try run("ROLLBACK")
            try waitUntilBlocking("both applies return") { applied.value.a != nil && applied.value.b != nil }
            (outcome.a, outcome.b) = applied.value

            let table = kind == .orders ? "orders" : "scans"
            outcome.rows = try holder.query(
                PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(table)"), logger: Self.logger
            ).wait().first!.decode(Int.self)
            outcome.device = try a.deviceReport().devices.first { $0.device == device }
            if let row = try holder.query(
                "SELECT records, held, digest_hi, digest_lo, digest_valid FROM device_flights", logger: Self.logger
            ).wait().first {
                let (records, held, high, low, valid) = try row.decode((Int, Int, Int64, Int64, Bool).self)
                outcome.counter = (
                    records, held, (UInt64(bitPattern: high) << 32) &+ UInt64(bitPattern: low), valid
                )
            }
            outcome.staleMarks = try holder.query("SELECT count(*) FROM stale_digests", logger: Self.logger).wait()
                .first!.decode(Int.self)
            return outcome
        }
        #expect(outcome.waitersBeforeRelease == 2)
        let a = try #require(outcome.a)
        let b = try #require(outcome.b)
        // a stored ids 2…11; b met them once a committed, and counts them all as duplicates (before the fallback: a
        // failure, "duplicate key value violates unique constraint" [SQLSTATE 23505]).
        let sent = 12 - first
        #expect(try a.get().map { [$0.new, $0.duplicates] } == [[10, sent - 10]], "\(a)")
        #expect(try b.get().map { [$0.new, $0.duplicates] } == [[0, sent]], "\(b)")
        #expect(outcome.rows == 11)
        let device = try #require(outcome.device)
        #expect(
            device.batches == 3 && device.records == 1 + 2 * sent && device.new == 11
                && device.duplicates == 2 * sent - 10)
        // The flight counter and the kept digest counted each record once.
        var expected = DeliverySummary()
        for n in 1...11 {
            switch Self.record(kind, n) {
            case .order(let order): expected.add(order: order.id, revision: order.revision)
            case .scan(let scan): expected.add(scan: scan.id)
            }
        }
        let counter = try #require(outcome.counter)
        #expect(counter.records == 11 && counter.held == 11 && counter.valid)
        #expect(counter.digest == expected.digest)
        #expect(outcome.staleMarks == 0)
    }
}
