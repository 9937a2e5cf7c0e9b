import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

/// No session may hold the store's transactions for long (issue 23 items 10 and 11): a lock wait ends at the lock
/// timeout, the receipt walk holds no row while its files are written, and every transaction takes its row locks in
/// the documented order (flights, orders, scans, devices, receipt marks), so one that follows that order never
/// deadlocks with `apply`. Each test plays the other aggregator with a raw session of its own.
@Suite(
    "PostgreSQL store: lock waits are bounded and taken in one order",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PostgresLockTests {
    static let logger = quietLogger

    /// Runs `body` on a thread of its own and answers its result once it returns, or nil when it has not within
    /// `timeout` (the thread is left to finish when what holds it lets go).
    static func returns<T: Sendable>(
        within timeout: Duration, _ body: @escaping @Sendable () throws -> T
    ) -> Result<T, any Error>? {
        let outcome = Locked2<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            let result = Result { try body() }
            outcome.mutate { $0 = result }
            done.signal()
        }.start()
        guard done.wait(timeout: .now() + .nanoseconds(Int(timeout / .nanoseconds(1)))) == .success else {
            return nil
        }
        return outcome.value
    }

    /// Another aggregator stopped while its transaction held a device's statistics row: the store's transaction for
    /// that device gives up at the lock timeout (5 s) with SQLSTATE 55P03, a failure worth retrying later (`serve`
    /// answers the batches `retry`), instead of waiting as long as the other holds it.
    @Test func aTransactionWaitingOnAHeldRowFailsAtTheLockTimeout() async throws {
        let (outcome, after) = try await onOwnThread { () throws -> (Result<[BatchOutcome], any Error>?, Int) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? store.close() }
            let other = try TestPostgres.connect(database.url)
            defer { try? other.close().wait() }
            func run(_ sql: String) throws {
                _ = try other.query(PostgresQuery(unsafeSQL: sql), logger: Self.logger).wait()
            }
            try run("BEGIN")
            try run("INSERT INTO devices (device, batches) VALUES ('cart-1', 1)")
            let incoming = batch("cart-1", 1, [order(1, seat: "1A")])
            let outcome = Self.returns(within: .seconds(20)) { try store.apply([incoming], at: date(0)) }
            try run("ROLLBACK")
            // The connection is still good: the same batch is stored once the row is free.
            let after = try store.apply([incoming], at: date(1)).first?.new ?? -1
            return (outcome, after)
        }
        let result = try #require(outcome, "apply still waited for the other session's row after 20 s")
        guard case .failure(let error) = result else {
            Issue.record("apply stored the batch while another session held the device's row: \(result)")
            return
        }
        let failure = try #require(error as? PostgresStoreError, "\(error)")
        #expect(failure.sqlState == "55P03", "\(failure)")
        #expect(!failure.unreachable)
        #expect(FailureClass(failure) == .busy)
        #expect(after == 1)
    }

    /// The receipt walk writes its files with no row locked: a commit that marks a seat the walk is rendering goes
    /// through at once. (It claimed the seats with `SELECT … FOR UPDATE` and kept them locked while writing: a
    /// stopped aggregator held every other one's commits on those seats, issue 23 item 10.)
    @Test func aCommitOnASeatWhoseReceiptIsBeingWrittenDoesNotWait() async throws {
        let (waited, marks) = try await onOwnThread { () throws -> (Bool, Int) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let walker = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? walker.close() }
            let other = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? other.close() }
            _ = try other.apply([batch("cart-1", 1, [order(1, seat: "1A"), order(2, seat: "2A")])], at: date(0))
            var waited = false
            _ = try walker.refreshReceipts(
                after: nil, limit: 10, failed: { _, _, _ in },
                write: { _, seat, _ in
                    // While this "file" is written, another aggregator commits an order on the same seat.
                    guard seat.rawValue == "1A" else { return }
                    let commit = Self.returns(within: .seconds(10)) {
                        try other.apply([batch("cart-2", 1, [order(3, seat: "1A", device: "cart-2")])], at: date(1))
                    }
                    waited = commit == nil
                }, durable: {})
            // The seat the commit marked during the walk stays marked (its receipt predates the order).
            return (waited, try other.dirtyReceiptCount())
        }
        #expect(!waited, "a commit on a seat being rendered waited for the receipt walk")
        #expect(marks == 1)
    }

    /// A transaction that takes its locks in the documented order — a device's row, then a seat's receipt mark —
    /// never deadlocks with `apply`. `apply` used to mark the seat a corrected order left in a trigger fired by the
    /// orders statement, before the devices rows: the two waited on each other (issue 23 item 11, seen as
    /// `deadlock detected` between `INSERT INTO dirty_receipts` and `INSERT INTO devices`).
    @Test func aTransactionInTheDocumentedLockOrderDoesNotDeadlockWithApply() async throws {
        let (otherResult, stored, marks) = try await onOwnThread {
            () throws -> (Result<Void, any Error>, Result<[BatchOutcome], any Error>?, [String]) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? store.close() }
            // Order 1 in seat 3C; its revision 2 moves it to 4D, which marks 3C.
            _ = try store.apply([batch("cart-1", 1, [order(1, seat: "3C")])], at: date(0))
            let other = try TestPostgres.connect(database.url)
            defer { try? other.close().wait() }
            func run(_ sql: String) throws {
                _ = try other.query(PostgresQuery(unsafeSQL: sql), logger: Self.logger).wait()
            }
            // The other session finds a deadlock at once if there is one; the store would find it after 1 s.
            try run("SET deadlock_timeout = '50ms'")
            try run("BEGIN")
            try run("UPDATE devices SET batches = batches + 1 WHERE device = 'cart-1'")
            let moved = batch("cart-1", 2, [order(1, revision: 2, seat: "4D")])
            let applied = Locked2<Result<[BatchOutcome], any Error>?>(nil)
            Thread {
                let result = Result { try store.apply([moved], at: date(1)) }
                applied.mutate { $0 = result }
            }.start()
            // The store now waits for the devices row (after its orders statement).
            try waitUntilBlocking("the store waits for the device's row", timeout: .seconds(20)) {
                try TestPostgres.lockWaiters(database) > 0
            }
            // Then the other session marks the seat, as a transaction in the documented order does.
            let otherResult = Result {
                try run(
                    """
                    INSERT INTO dirty_receipts (flight, seat, generation) VALUES ('\(flightA.rawValue)', '3C', 1)
                    ON CONFLICT (flight, seat) DO UPDATE SET generation = dirty_receipts.generation + 1
                    """)
                try run("COMMIT")
            }
            if case .failure = otherResult { try? run("ROLLBACK") }
            try waitUntilBlocking("the store's apply returns", timeout: .seconds(20)) { applied.value != nil }
            let marks = try other.query(
                "SELECT seat FROM dirty_receipts ORDER BY seat", logger: Self.logger
            ).wait().map { try $0.decode(String.self) }
            return (otherResult, applied.value, marks)
        }
        if case .failure(let error) = otherResult {
            Issue.record("the session in the documented lock order failed: \(error)")
        }
        let outcome = try #require(stored)
        #expect((try? outcome.get())?.first?.new == 1, "\(outcome)")
        // The seat it left and the seat it moved to.
        #expect(marks == ["3C", "4D"])
    }
}
