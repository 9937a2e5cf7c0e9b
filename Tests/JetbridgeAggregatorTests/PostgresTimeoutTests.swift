import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

@testable import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

/// Every wait of the PostgreSQL store is bounded (issue 23 items 10 and 12): the server's side by session settings
/// sent with each connection's start-up, this side by a time limit on each call, and a call overdue is visible at
/// once (`busySince`, `overdue(after:)`) for readiness. Each test has a database of its own; the frozen server is one
/// backend process of it, stopped with SIGSTOP.
@Suite(
    "PostgreSQL store: timeouts on every connection and call",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PostgresTimeoutTests {
    static let logger = quietLogger
    static let settings = [
        "lock_timeout", "idle_in_transaction_session_timeout", "statement_timeout", "tcp_keepalives_idle",
        "tcp_keepalives_interval", "tcp_keepalives_count",
    ]

    /// The kernel's view of the TCP connection from local `port`: `ss -o` shows its timer (`keepalive` when
    /// SO_KEEPALIVE is on and nothing is in flight).
    static func socketTimer(port: Int) throws -> String {
        try OwnPostgresCluster.shell(["ss", "-tnoH", "state", "established", "( sport = :\(port) )"])
    }

    @Test func everyConnectionCarriesTheTimeoutsAndKeepalives() async throws {
        let (first, again, reading, timers) = try await onOwnThread {
            () throws -> ([String], [String], [String], [String]) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? store.close() }
            let first = try Self.settings.map { try store.setting($0) }
            var timers: [String] = []
            let sessions = try TestPostgres.storeSessions(database)
            #expect(sessions.count == 1)
            if let port = sessions.first?.port { timers.append(try Self.socketTimer(port: port)) }
            // The server ends the session (as a restart or the idle-in-transaction timeout would): the next call
            // fails as unreachable, the one after connects again with the same settings.
            for session in sessions {
                try TestPostgres.admin(database.adminURL, "SELECT pg_terminate_backend(\(session.pid))")
            }
            do { _ = try store.dirtyReceiptCount() } catch let error as PostgresStoreError {
                #expect(error.unreachable, "\(error)")
            }
            let again = try Self.settings.map { try store.setting($0) }
            if let port = try TestPostgres.storeSessions(database).first?.port {
                timers.append(try Self.socketTimer(port: port))
            }
            let reader = try PostgresStore(url: database.url, logger: Self.logger, timeouts: .reading)
            defer { try? reader.close() }
            return (first, again, try Self.settings.map { try reader.setting($0) }, timers)
        }
        #expect(first == ["5s", "10s", "30s", "10", "5", "3"])
        #expect(again == first)
        // Reports and rebuilds read whole tables: no statement timeout; the rest stays.
        #expect(reading == ["5s", "10s", "0", "10", "5", "3"])
        #expect(timers.count == 2)
        for timer in timers { #expect(timer.contains("timer:(keepalive"), "\(timer)") }
    }

    /// An ack follows a commit whose batch is in the write-ahead log on disk: a database (or role) tuned to
    /// `synchronous_commit = off` is overridden for the aggregator's sessions; a stronger value is kept.
    @Test func aDatabaseThatTurnsSynchronousCommitOffDoesNotWeakenAnAck() async throws {
        let (off, remote) = try await onOwnThread { () throws -> (String, String) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            try TestPostgres.admin(database.adminURL, "ALTER DATABASE \"\(database.name)\" SET synchronous_commit = off")
            let store = try PostgresStore(url: database.url, logger: Self.logger)
            let off = try store.setting("synchronous_commit")
            try? store.close()
            try TestPostgres.admin(
                database.adminURL, "ALTER DATABASE \"\(database.name)\" SET synchronous_commit = remote_apply")
            let again = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? again.close() }
            return (off, try again.setting("synchronous_commit"))
        }
        #expect(off == "on")
        #expect(remote == "remote_apply")
    }

    @Test func aCallToAFrozenServerEndsAtItsTimeoutAndIsOverdueMeanwhile() async throws {
        try await onOwnThread {
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(
                url: database.url, logger: Self.logger,
                timeouts: .init(answer: .seconds(5), probe: .seconds(1)))
            defer { try? store.close() }
            _ = try store.apply([batch("cart-1", 1, [order(1, seat: "1A")])], at: date(0))
            #expect(store.busySince == nil && store.overdue(after: .zero) == nil)
            var stopped: [Int32] = []
            defer { for pid in stopped { kill(pid, SIGCONT) } }
            let backend = try #require(try TestPostgres.storeSessions(database).first?.pid)
            #expect(kill(backend, SIGSTOP) == 0)
            stopped.append(backend)

            let outcome = Locked2<Result<Int, any Error>?>(nil)
            let began = ContinuousClock.now
            Thread {
                let result = Result { try store.dirtyReceiptCount() }
                outcome.mutate { $0 = result }
            }.start()
            // Overdue while the call waits (its answer not in yet).
            var overdue = ""
            try waitUntilBlocking("the call is overdue", timeout: .seconds(20)) {
                overdue = store.overdue(after: .seconds(1)) ?? ""
                return !overdue.isEmpty || outcome.value != nil
            }
            #expect(
                overdue.contains("a store call has been waiting for"),
                "\(overdue) \(String(describing: outcome.value)) after \(ContinuousClock.now - began)")
            #expect(overdue.contains(store.name) && !overdue.contains("password"))
            try waitUntilBlocking("the call gives up", timeout: .seconds(30)) { outcome.value != nil }
            let took = ContinuousClock.now - began
            guard case .failure(let error) = outcome.value else {
                Issue.record("a call to a stopped server answered: \(String(describing: outcome.value))")
                return
            }
            let failure = try #require(error as? PostgresStoreError)
            #expect(failure.unreachable && failure.message.contains("did not answer within 5 s"), "\(failure)")
            #expect(took >= .seconds(5))
            #expect(store.busySince == nil)

            // The next call connects again (a new server process) and is answered.
            #expect(try store.dirtyReceiptCount() == 1)
            // A probe waits for its own, shorter limit.
            let next = try #require(try TestPostgres.storeSessions(database).map(\.pid).first { $0 != backend })
            #expect(kill(next, SIGSTOP) == 0)
            stopped.append(next)
            let probeBegan = ContinuousClock.now
            let problem = store.probe()
            #expect(problem?.contains("did not answer within 1 s") == true, "\(problem ?? "nil")")
            #expect(ContinuousClock.now - probeBegan < .seconds(10))
            #expect(store.probe() == nil)
        }
    }

    /// A long call whose statements are each answered in time is busy, not hung: it is never overdue, however long
    /// it takes in all (a 40,000-record group in a debug build takes several seconds in eight statements).
    @Test func aLongCallWhoseStatementsAreAnsweredIsNotOverdue() async throws {
        let (overdue, waited) = try await onOwnThread { () throws -> (String?, Bool) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? store.close() }
            let done = Locked2<Bool>(false)
            Thread {
                // 2.4 s in all, 0.3 s per statement.
                _ = try? store.locked { for _ in 0..<8 { try store.run("SELECT pg_sleep(0.3)") } }
                done.mutate { $0 = true }
            }.start()
            var overdue: String?
            var waited = false
            while !done.value {
                if store.busySince != nil { waited = true }
                overdue = overdue ?? store.overdue(after: .seconds(1))
                Thread.sleep(forTimeInterval: 0.02)
            }
            return (overdue, waited)
        }
        #expect(waited)
        #expect(overdue == nil, "\(overdue ?? "")")
    }

    /// A receipt writer stopped after claiming its seats (SIGSTOP, a partition, a long pause) holds them for its
    /// lease only: until then another writer skips them, after that it takes them over and renders them. When the
    /// first one resumes, its files may have replaced the newer ones, so it marks those seats again rather than
    /// clearing them.
    @Test func seatsClaimedByAStoppedReceiptWriterAreTakenOverWhenTheClaimExpires() async throws {
        let (outer, skipped, inner, markedAgain, last, remaining, claimsEnd) = try await onOwnThread {
            () throws -> ([String], [String], [String], Int, [String], Int, [Double?]) in
            var claimsEnd: [Double?] = []
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let timeouts = PostgresStore.Timeouts(claimLease: .seconds(1))
            let first = try PostgresStore(url: database.url, logger: Self.logger, timeouts: timeouts)
            defer { try? first.close() }
            let second = try PostgresStore(url: database.url, logger: Self.logger, timeouts: timeouts)
            defer { try? second.close() }
            _ = try first.apply([batch("cart-1", 1, (0..<3).map { order($0, seat: "\($0 + 1)A") })], at: date(0))
            let admin = try TestPostgres.connect(database.url)
            defer { try? admin.close().wait() }
            func walk(_ store: PostgresStore) throws -> [String] {
                try store.refreshReceipts(
                    after: nil, limit: 10, failed: { _, _, _ in }, write: { _, _, _ in }, durable: {}
                ).map(\.seat.rawValue)
            }
            var skipped: [String] = []
            var inner: [String] = []
            let outer = try first.refreshReceipts(
                after: nil, limit: 10, failed: { _, _, _ in },
                write: { _, seat, _ in
                    // The first writer "stops" while writing its first seat.
                    guard seat.rawValue == "1A" else { return }
                    skipped = try walk(second)
                    // When the other writer looks again without a commit (its receipts thread): as the claims end.
                    claimsEnd = [try second.receiptClaimsHeldElsewhere(), try first.receiptClaimsHeldElsewhere()]
                    try waitUntilBlocking("the claims expire on the server's clock", timeout: .seconds(20)) {
                        try admin.query(
                            "SELECT count(*) FROM dirty_receipts WHERE claimed_until < clock_timestamp()",
                            logger: Self.logger
                        ).wait().first?.decode(Int.self) == 3
                    }
                    claimsEnd.append(try second.receiptClaimsHeldElsewhere())
                    inner = try walk(second)
                    claimsEnd.append(try first.receiptClaimsHeldElsewhere())
                }, durable: {}
            ).map(\.seat.rawValue)
            let markedAgain = try first.dirtyReceiptCount()
            return (outer, skipped, inner, markedAgain, try walk(second), try first.dirtyReceiptCount(), claimsEnd)
        }
        #expect(outer == ["1A", "2A", "3A"])
        #expect(skipped == [], "a live claim was not respected")
        // Within the lease while held; 0 once ended; the holder's own claims are not another's; none once the other
        // writer's walk has cleared the marks.
        #expect(claimsEnd.count == 4)
        if claimsEnd.count == 4 {
            #expect(claimsEnd[0].map { $0 > 0 && $0 <= 1 } == true, "\(claimsEnd)")
            #expect(claimsEnd[1] == nil && claimsEnd[2] == 0, "\(claimsEnd)")
            #expect(claimsEnd[3] == nil, "a walk that finished left a claim: \(claimsEnd)")
        }
        #expect(inner == ["1A", "2A", "3A"], "an expired claim was not taken over")
        #expect(markedAgain == 3, "the writer whose claims were taken over cleared them")
        #expect(last == ["1A", "2A", "3A"])
        #expect(remaining == 0)
    }

    /// A writer slower than the lease (a slow shared file system) renews its claims as it goes: nobody takes over
    /// seats it is still writing.
    @Test func aLiveWriterSlowerThanTheLeaseKeepsItsClaims() async throws {
        let (outer, skipped, remaining) = try await onOwnThread { () throws -> ([String], [String], Int) in
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let timeouts = PostgresStore.Timeouts(claimLease: .seconds(2))
            let first = try PostgresStore(url: database.url, logger: Self.logger, timeouts: timeouts)
            defer { try? first.close() }
            let second = try PostgresStore(url: database.url, logger: Self.logger, timeouts: timeouts)
            defer { try? second.close() }
            _ = try first.apply([batch("cart-1", 1, (0..<4).map { order($0, seat: "\($0 + 1)A") })], at: date(0))
            var skipped: [String] = []
            let outer = try first.refreshReceipts(
                after: nil, limit: 10, failed: { _, _, _ in },
                write: { _, seat, _ in
                    // Each file takes 0.8 s to write: the last starts past the first lease.
                    Thread.sleep(forTimeInterval: 0.8)
                    guard seat.rawValue == "4A" else { return }
                    skipped = try second.refreshReceipts(
                        after: nil, limit: 10, failed: { _, _, _ in }, write: { _, _, _ in }, durable: {}
                    ).map(\.seat.rawValue)
                }, durable: {}
            ).map(\.seat.rawValue)
            return (outer, skipped, try first.dirtyReceiptCount())
        }
        #expect(outer == ["1A", "2A", "3A", "4A"])
        #expect(skipped == [], "a claim its writer kept renewing was taken over")
        #expect(remaining == 0)
    }

    /// A process frozen part-way through sending a statement leaves its session reading the rest, and one frozen
    /// before reading an answer leaves it waiting to send, its rows locked either way, where none of PostgreSQL's
    /// own bounds ends it (the stalled clients' sessions have `statement_timeout` and
    /// `idle_in_transaction_session_timeout` at 1 s). Another store ends both once it has found them so twice, past
    /// the store's idle-in-transaction bound (2 s here): their rows are free again and their connections closed. A
    /// session of another program stalled alike, a Jetbridge session stalled for less than the bound, and one that
    /// holds no row (no transaction id) are left alone.
    @Test func aSessionStalledMidStatementIsEndedByAnotherStoreAndItsRowsAreFreed() async throws {
        try await onOwnThread {
            let database = try TestPostgres.freshDatabase()
            defer { database.drop() }
            let store = try PostgresStore(
                url: database.url, logger: Self.logger, timeouts: .init(idleInTransaction: .seconds(2)))
            defer { try? store.close() }
            _ = try store.apply(
                (1...4).map { batch("cart-\($0)", 1, [order($0, seat: "\($0)A")]) }, at: date(0))
            func locked(_ device: String) throws -> Bool {
                let probe = try TestPostgres.connect(database.url)
                defer { try? probe.close().wait() }
                _ = try probe.query("BEGIN", logger: Self.logger).wait()
                defer { _ = try? probe.query("ROLLBACK", logger: Self.logger).wait() }
                do {
                    _ = try probe.query(
                        "SELECT 1 FROM devices WHERE device = \(device) FOR UPDATE NOWAIT", logger: Self.logger
                    ).wait()
                    return false
                } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
                    return true
                }
            }
            func holding(_ device: String) -> String {
                "SELECT 1 FROM devices WHERE device = '\(device)' FOR UPDATE"
            }
            func client(_ name: String, _ sql: String, _ stops: StalledClient.Stop = .midStatement) throws
                -> StalledClient
            {
                try StalledClient(url: database.url, applicationName: name, holding: sql, stops: stops)
            }
            let frozen = try client("jetbridge frozen-host:4242", holding("cart-1"))
            defer { frozen.close() }
            let notReading = try client("jetbridge frozen-host:4444", holding("cart-4"), .notReading)
            defer { notReading.close() }
            let other = try client("psql", holding("cart-2"))
            defer { other.close() }
            let readOnly = try client("jetbridge frozen-host:4545", "SELECT 1")
            defer { readOnly.close() }
            // Past their own 1 s bounds and the store's 2 s: the server has not ended them.
            Thread.sleep(forTimeInterval: 2.5)
            #expect(try locked("cart-1") && locked("cart-4"), "a stalled session no longer holds its row")
            // A first sighting ends nothing (a statement that ran long may be waiting an instant for its reader);
            // the next, at least a quarter of the bound later with the same message, ends them.
            #expect(try store.endStalledSessions().isEmpty)
            Thread.sleep(forTimeInterval: 0.6)
            let ended = try store.endStalledSessions()
            #expect(
                ended.map(\.applicationName).sorted() == ["jetbridge frozen-host:4242", "jetbridge frozen-host:4444"],
                "\(ended)")
            #expect(ended.allSatisfy { $0.seconds > 2 && $0.seconds < 60 }, "\(ended)")
            #expect(frozen.closedByServer())
            #expect(notReading.closedByServer())
            try waitUntilBlocking("the stalled sessions' rows are free", timeout: .seconds(10)) {
                try !locked("cart-1") && !locked("cart-4")
            }
            // One seen twice, but the second time not yet past the bound, is left: a store whose bound is 6 s sees
            // it after 3.3 s (past half the bound) and again 1.6 s later (past a quarter), at about 4.9 s.
            let patient = try PostgresStore(
                url: database.url, logger: Self.logger, timeouts: .init(idleInTransaction: .seconds(6)))
            defer { try? patient.close() }
            let recent = try client("jetbridge frozen-host:4343", holding("cart-3"))
            defer { recent.close() }
            Thread.sleep(forTimeInterval: 3.3)
            #expect(try patient.endStalledSessions().isEmpty)
            Thread.sleep(forTimeInterval: 1.6)
            let early = try patient.endStalledSessions()
            #expect(early.isEmpty, "ended before the bound: \(early)")
            // The other program's session, the recent one and the one without rows are still there.
            #expect(try locked("cart-2") && locked("cart-3"))
            let admin = try TestPostgres.connect(database.url)
            defer { try? admin.close().wait() }
            let left = try admin.query(
                """
                SELECT application_name FROM pg_stat_activity
                WHERE datname = \(database.name) AND application_name IN (
                    'psql', 'jetbridge frozen-host:4343', 'jetbridge frozen-host:4545')
                ORDER BY application_name
                """, logger: Self.logger
            ).wait().map { try $0.decode(String.self) }
            #expect(left == ["jetbridge frozen-host:4343", "jetbridge frozen-host:4545", "psql"])
            // The store that ended them goes on.
            #expect(try store.apply([batch("cart-1", 2, [order(5, seat: "5A")])], at: date(1)).first?.new == 1)
        }
    }

    /// Calls overlapping on several threads: the oldest one in progress is what `busySince` reports.
    @Test func busySinceIsTheOldestCallInProgress() throws {
        let calls = StoreCalls()
        #expect(calls.oldest == nil)
        let outerStart = ContinuousClock.now
        calls.measure {
            let outer = calls.oldest
            #expect(outer != nil && outer! >= outerStart)
            calls.measure { #expect(calls.oldest == outer) }
            #expect(calls.oldest == outer)
        }
        #expect(calls.oldest == nil)
        struct Thrown: Error {}
        #expect(throws: Thrown.self) { try calls.measure { throw Thrown() } }
        #expect(calls.oldest == nil)
    }
}
