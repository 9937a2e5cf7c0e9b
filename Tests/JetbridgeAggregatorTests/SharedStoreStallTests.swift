import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import PostgresNIO
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A device on raw sockets syncing at a steady pace: one batch of `size` records per `period` (window 1; a tick
/// missed while a batch waits is skipped, not made up), each batch sent again after `retry` (50 ms later) or when no
/// answer came within 2 s, until it is stored. With a `fallback`, the first batch unanswered for 2 s moves the
/// device there for good, as an agent with several aggregators does (docs/AGENT.md). On a thread of its own until
/// ``finish()``.
final class PacedDevice: @unchecked Sendable {
    struct Stored: Sendable {
        let at: ContinuousClock.Instant
        let records: Int
    }

    let id: String
    let size: Int
    private let serve: ServeProcess
    private let fallback: ServeProcess?
    private let period: Duration
    private let records: @Sendable (_ batch: Int, _ failedOver: Bool) -> [Record]
    /// When the device moved to its fallback, if it did.
    let failedOverAt = Locked2<ContinuousClock.Instant?>(nil)
    /// Every stored batch, in order.
    let stored = Locked2<[Stored]>([])
    private let stopping = Locked2<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    /// Why the device gave up, if it did.
    let failure = Locked2<String?>(nil)

    init(
        _ id: String, to serve: ServeProcess, fallback: ServeProcess? = nil, period: Duration, size: Int,
        records: @escaping @Sendable (_ batch: Int, _ failedOver: Bool) -> [Record]
    ) {
        self.id = id
        self.serve = serve
        self.fallback = fallback
        self.period = period
        self.size = size
        self.records = records
        Thread { [self] in
            do { try run() } catch { failure.mutate { $0 = "\(error)" } }
            done.signal()
        }.start()
    }

    /// Records stored between `from` and `to`.
    func records(from: ContinuousClock.Instant, to: ContinuousClock.Instant) -> Int {
        stored.value.filter { $0.at >= from && $0.at < to }.map(\.records).reduce(0, +)
    }

    /// Stops after the batch in hand is stored; blocks (at most `timeout`) until then.
    func finish(timeout: Duration = .seconds(120)) -> Bool {
        stopping.mutate { $0 = true }
        return done.wait(timeout: .now() + .nanoseconds(Int(timeout / .nanoseconds(1)))) == .success
    }

    private func run() throws {
        var device = try RawDevice(id: id, to: serve)
        defer { device.close() }
        var next = ContinuousClock.now
        var n = 0
        while !stopping.value {
            let now = ContinuousClock.now
            if next > now { Thread.sleep(forTimeInterval: Double((next - now) / .milliseconds(1)) / 1000) }
            let first = UInt64(n * size + 1)
            let batch = try outgoing(id, first, records(n, failedOverAt.value != nil))
            var sent = ContinuousClock.now
            try device.send(batch)
            while true {
                guard let ack = try device.ack(timeout: .seconds(2)) else {
                    guard ContinuousClock.now - sent < .seconds(300) else {
                        throw TestPostgresError("\(id): batch \(n) unanswered for 5 minutes")
                    }
                    if let fallback, failedOverAt.value == nil {
                        device.close()
                        device = try RawDevice(id: id, to: fallback)
                        failedOverAt.mutate { $0 = .now }
                    }
                    try device.send(batch)
                    continue
                }
                // An answer to an earlier send of an earlier batch.
                guard ack.first == first else { continue }
                if ack.status == .retry || ack.status == .limited {
                    Thread.sleep(forTimeInterval: 0.05)
                    sent = ContinuousClock.now
                    try device.send(batch)
                    continue
                }
                guard ack.status == .stored, (ack.new ?? 0) + (ack.duplicates ?? 0) == size else {
                    throw TestPostgresError("\(id): batch \(n) answered \(ack)")
                }
                break
            }
            stored.mutate { $0.append(Stored(at: .now, records: size)) }
            n += 1
            next = max(next + period, ContinuousClock.now - period)
        }
    }
}

/// One hung aggregator or a hung PostgreSQL server must not stall the ground (issue 23 items 10 and 12), measured
/// with real processes: two `serve` on one database with devices syncing to both, one stopped with SIGSTOP for a
/// minute while its session holds a write transaction; and PostgreSQL itself stopped for 20 s.
///
/// Serialized: the two tests run one after the other, so that the processes they start never load the machine
/// together (run at once, they made the timing bounds of unrelated tests running beside them fail on two cores).
/// Every blocking call (sockets, the database, `pg_ctl`) runs on a thread of its own, never on the cooperative pool
/// the other tests share.
@Suite(
    "Shared store: a stopped aggregator or server holds no one back", .serialized,
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct SharedStoreStallTests {
    static let logger = quietLogger

    /// Polls `condition` on a thread of its own (it may block: a socket, the database) every 50 ms until it holds.
    static func waitOffPool(
        _ what: String, timeout: Duration = .seconds(20), _ condition: @escaping @Sendable () throws -> Bool
    ) async throws {
        let deadline = ContinuousClock.now + timeout
        while try await !onOwnThread(condition) {
            guard ContinuousClock.now < deadline else { throw TestPostgresError("timed out waiting until \(what)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Whether A holds an open write transaction with the statistics row of one of `devices`: A's session sits
    /// idle in a transaction (A is stopped), and a probe that asks for those rows without waiting (`FOR UPDATE
    /// NOWAIT`, rolled back at once) finds one locked. Such a transaction holds that device's batch: its ids, its
    /// statistics row and (if A got that far) its seats' receipt marks, which B needs once the device sends the
    /// batch to B.
    static func holdsDeviceRows(
        _ connection: PostgresConnection, ports: Set<Int>, database: String, devices: [String]
    ) throws -> Bool {
        let idle =
            try connection.query(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = \(database) AND client_port = ANY(\(ports.map { Int32($0) }))
                    AND state = 'idle in transaction' AND backend_xid IS NOT NULL
                """, logger: logger
            ).wait().first?.decode(Int.self) ?? 0
        guard idle > 0 else { return false }
        _ = try connection.query("BEGIN", logger: logger).wait()
        defer { _ = try? connection.query("ROLLBACK", logger: logger).wait() }
        do {
            _ = try connection.query(
                "SELECT 1 FROM devices WHERE device = ANY(\(devices)) FOR UPDATE NOWAIT", logger: logger
            ).wait()
            return false
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55P03" {
            return true
        }
    }

    /// Issue 23 item 10's acceptance test. A and B share one database and one receipts directory. Two devices sync
    /// to B and two to A on the seats of one flight, and move to B when A stops answering for 2 s (as an agent with
    /// several aggregators does); a fifth device syncs to A alone, on a flight of its own. A is stopped with SIGSTOP
    /// at a moment its session sits in an open transaction holding a moving device's batch (its ids, its statistics
    /// row, perhaps its seats' receipt marks: rows B's transactions need once that batch is sent to B), for 60 s (and
    /// on until B has written A's own flight's receipts, 180 s at most).
    /// B's devices keep committing at no less than half their rate before the stop; B writes the receipts of A's
    /// own flight while A is stopped; after SIGCONT A serves again, every total is exact and the shared receipts
    /// are what a rebuild writes.
    ///
    /// Before the store's timeouts, B's transactions waited on A's rows for the whole minute (B's devices' rate fell
    /// to nothing); now the server ends A's idle transaction after 10 s, and a wait of B's gives up after 5 s.
    @Test func anAggregatorStoppedForAMinuteMidTransactionHoldsNoOtherBack() async throws {
        let database = try await onOwnThread { try TestPostgres.freshDatabase() }
        defer { database.drop() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let receipts = fixture.directory.appendingPathComponent("receipts")
        let configuration = #"{"receipts": "\#(receipts.path)"}"#
        let a = try await ServeProcess(
            store: database.url, in: fixture.directory, name: "a", configuration: configuration)
        let b = try await ServeProcess(
            store: database.url, in: fixture.directory, name: "b", configuration: configuration)
        let pgPort = URLComponents(string: database.url)?.port ?? 5432
        // The shared flight's 36 seats; the fifth device's flight has 12.
        let seats = (1...6).flatMap { row in ["A", "B", "C", "D", "E", "F"].map { "\(row)\($0)" } }
        let size = 10
        // 50 records/s each: B has room for A's two devices on top of its own, and the test leaves the machine room
        // for the tests that run beside it.
        func device(_ index: Int, _ id: String, _ serve: ServeProcess, fallback: ServeProcess?) -> PacedDevice {
            PacedDevice(id, to: serve, fallback: fallback, period: .milliseconds(200), size: size) { n, _ in
                (0..<size).map { i in
                    order(index * 1_000_000 + n * size + i, seat: seats[(n * 7 + i * 5 + index) % seats.count])
                }
            }
        }
        let moving = [device(1, "cart-a1", a, fallback: b), device(2, "cart-a2", a, fallback: b)]
        let onB = [device(3, "cart-b1", b, fallback: nil), device(4, "cart-b2", b, fallback: nil)]
        let own = PacedDevice("cart-a0", to: a, period: .milliseconds(200), size: size) { n, _ in
            (0..<size).map { i in order(n * size + i, flight: flightB, seat: seats[(n + i) % 12]) }
        }
        let everyone = moving + onB + [own]
        var finished = false
        defer {
            kill(a.pid, SIGCONT)
            if !finished {
                for device in everyone { _ = device.finish(timeout: .zero) }
                // The devices' threads still hold both processes.
                a.killNow()
                b.killNow()
            }
        }
        func bRecords(_ from: ContinuousClock.Instant, _ to: ContinuousClock.Instant) -> Int {
            onB.map { $0.records(from: from, to: to) }.reduce(0, +)
        }

        // B's devices' rate while both run: a 15 s window (a measurement, not a wait for a condition).
        let baselineStart = ContinuousClock.now
        try await Task.sleep(for: .seconds(15))
        let baselineEnd = ContinuousClock.now
        let before = Double(bRecords(baselineStart, baselineEnd)) / ((baselineEnd - baselineStart) / .seconds(1))
        #expect(before > 0, "B stored nothing before the stop: \(b.logText.suffix(2_000))")

        // Aim: stop A, look at its sessions; continue it and try again until it holds a moving device's batch in
        // an open transaction.
        let tries = try await onOwnThread { () throws -> Int in
            let admin = try TestPostgres.connect(database.url)
            defer { try? admin.close().wait() }
            var rng = SplitMix(state: 23)
            for attempt in 1...400 {
                kill(a.pid, SIGSTOP)
                // What A's server processes were running finishes; then they wait for A.
                Thread.sleep(forTimeInterval: 0.15)
                if try Self.holdsDeviceRows(
                    admin, ports: a.localPorts(connectedTo: pgPort), database: database.name,
                    devices: moving.map(\.id))
                {
                    return attempt
                }
                kill(a.pid, SIGCONT)
                Thread.sleep(forTimeInterval: 0.02 + Double(rng.next() % 200) / 1000)
            }
            throw TestPostgresError("A was never caught holding a moving device's batch in 400 tries")
        }
        let stoppedAt = ContinuousClock.now
        let reader = try await onOwnThread { try PostgresStore(url: database.url, logger: Self.logger) }
        defer { try? reader.close() }
        let claims = try? await onOwnThread { () throws -> Int in
            let admin = try TestPostgres.connect(database.url)
            defer { try? admin.close().wait() }
            return try admin.query(
                "SELECT count(*) FROM dirty_receipts WHERE claimed_by LIKE \("%:\(a.pid):%")", logger: Self.logger
            ).wait().first?.decode(Int.self) ?? 0
        }

        // While A is stopped, B renders A's own flight's receipts (A's claims on them expire after 20 s): that
        // flight changes no more (its device waits for A), so once no seat of it is marked, its files are final.
        // B's devices' rate is measured over the first minute. A stays stopped past it until those receipts are
        // current, for 180 s at most: while B's devices keep committing, B's receipts thread may defer a refresh by
        // up to 30 s plus nine times the last one's length (docs/AGGREGATOR.md, `receiptsIntervalSeconds`); with the
        // 10 s before the server ends A's transaction, that passed the minute once in a full run on 2 cores.
        let stopEnd = stoppedAt + .seconds(60)
        let receiptsDeadline = stoppedAt + .seconds(180)
        var ownReceiptsCurrentAt: Duration?
        while ContinuousClock.now < receiptsDeadline {
            let current = try await onOwnThread { () throws -> Bool in
                let marks = try TestPostgres.connect(database.url)
                defer { try? marks.close().wait() }
                let pending =
                    try marks.query(
                        "SELECT count(*) FROM dirty_receipts WHERE flight = \(flightB.rawValue)", logger: Self.logger
                    ).wait().first?.decode(Int.self) ?? 1
                guard pending == 0 else { return false }
                let receiptsOfA = try reader.receipts(flight: flightB)
                return !receiptsOfA.isEmpty
                    && receiptsOfA.allSatisfy { receipt in
                        (try? Data(contentsOf: receipts.appendingPathComponent(receipt.fileStem + ".txt")))
                            == Data(receipt.textBytes())
                    }
            }
            if current {
                ownReceiptsCurrentAt = ContinuousClock.now - stoppedAt
                break
            }
            try await Task.sleep(for: .seconds(1))
        }
        // What held those receipts back, seen while A is still stopped: the flight's marks and their claims, the
        // database's sessions, and B's receipt log lines (a failure here was seen once and could not be explained
        // from the log alone).
        var stuck = ""
        if ownReceiptsCurrentAt == nil {
            stuck = (try? await onOwnThread { () throws -> String in
                let admin = try TestPostgres.connect(database.url)
                defer { try? admin.close().wait() }
                let marks = try admin.query(
                    """
                    SELECT seat || ' ' || generation || ' ' || coalesce(claimed_by, '-') || ' '
                        || coalesce(round(EXTRACT(EPOCH FROM claimed_until - clock_timestamp()))::text, '-')
                    FROM dirty_receipts WHERE flight = \(flightB.rawValue) ORDER BY seat
                    """, logger: Self.logger
                ).wait().map { try $0.decode(String.self) }
                let sessions = try admin.query(
                    """
                    SELECT application_name || ' ' || coalesce(state, '-') || ' ' || coalesce(wait_event, '-') || ' '
                        || round(EXTRACT(EPOCH FROM clock_timestamp() - state_change)) || 's '
                        || left(regexp_replace(query, '\\s+', ' ', 'g'), 80)
                    FROM pg_stat_activity WHERE datname = \(database.name) AND pid <> pg_backend_pid()
                    """, logger: Self.logger
                ).wait().map { try $0.decode(String.self) }
                return "marks (seat generation claimedBy secondsLeft): \(marks)\nsessions: \(sessions.joined(separator: "\n"))"
            }) ?? "could not be read"
            let receiptLines = b.logText.split(separator: "\n").filter { $0.contains("receipt") }.suffix(20)
            stuck += "\nB's receipt lines: \(receiptLines.joined(separator: "\n"))"
        }
        // The rest of the minute, if the receipts came within it.
        if stopEnd > ContinuousClock.now { try await Task.sleep(until: stopEnd, clock: .continuous) }
        let stillStopped = a.process.isRunning
        kill(a.pid, SIGCONT)
        let resumedAt = ContinuousClock.now
        let during = Double(bRecords(stoppedAt, stopEnd)) / 60
        // The longest stretch without a commit of B's devices during the stop.
        let times =
            [stoppedAt] + onB.flatMap { $0.stored.value.map(\.at) }.filter { $0 >= stoppedAt && $0 < stopEnd }.sorted()
            + [stopEnd]
        let longestGap = zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? .seconds(60)
        let ratio = during / before
        let movedAfter = moving.map { $0.failedOverAt.value.map { "\($0 - stoppedAt)" } ?? "never" }
        print(
            """
            SharedStoreStallTests: A stopped for \(resumedAt - stoppedAt) after \(tries) tries, holding a moving \
            device's batch (A's receipt claims at the stop: \(claims.map(String.init) ?? "n/a")); A's devices moved \
            to B after \(movedAfter); B's devices committed \(String(format: "%.0f", before)) records/s before, \
            \(String(format: "%.0f", during)) records/s in the stop's first minute: ratio \
            \(String(format: "%.2f", ratio)); longest gap without a commit \(longestGap); A's own flight's receipts \
            current after \(ownReceiptsCurrentAt.map { "\($0)" } ?? "never")
            """)
        #expect(stillStopped)
        // The issue's acceptance criterion: no less than half the rate.
        #expect(ratio >= 0.5, "B's devices' rate fell from \(before) to \(during) records/s while A was stopped")
        #expect(
            ownReceiptsCurrentAt != nil,
            "B did not write the receipts of A's flight in the 180 s A was stopped: \(stuck)")
        #expect(moving.allSatisfy { $0.failedOverAt.value != nil })

        // A serves again: its stopped transaction failed (the server had ended the session), its device's batch
        // is answered `retry` or stored on the next attempt.
        let ownBefore = own.stored.value.count
        do {
            try await JetbridgeTestKit.waitUntil("A stores again after SIGCONT", timeout: .seconds(60)) {
                own.stored.value.count >= ownBefore + 3
            }
        } catch {
            Issue.record("A stored nothing after SIGCONT: \(a.logText.suffix(6_000))")
            throw error
        }
        let recovered = ContinuousClock.now - resumedAt
        let allFinished = try await onOwnThread { everyone.map { $0.finish() }.allSatisfy { $0 } }
        finished = true
        #expect(allFinished)
        for device in everyone { #expect(device.failure.value == nil, "\(device.id): \(device.failure.value!)") }
        let resumedLog = a.logText.split(separator: "\n").filter {
            $0.contains("store unreachable") || $0.contains("transaction failed") || $0.contains("receipt claims")
                || $0.contains("took over")
        }
        print(
            "SharedStoreStallTests: A stored again \(recovered) after SIGCONT; A's log: \(resumedLog.joined(separator: "\n"))"
        )
        print(
            "SharedStoreStallTests: B's log: \(b.logText.split(separator: "\n").filter { $0.contains("transaction failed") || $0.contains("took over") }.prefix(5).joined(separator: "\n"))"
        )

        // Exact totals: every batch stored once, whatever was retried, resent or rolled back.
        let (orders, statistics) = try await onOwnThread { (try reader.orders(), try reader.deviceReport()) }
        let expected = everyone.map { $0.stored.value.count * size }.reduce(0, +)
        #expect(orders.count == expected)
        #expect(Set(orders.map(\.id)).count == expected)
        for device in everyone {
            let row = statistics.devices.first { $0.device == device.id }
            #expect(row?.new == device.stored.value.count * size, "\(device.id): \(String(describing: row))")
        }
        // Once both are idle the marks are cleared, and the shared directory holds exactly what a rebuild writes:
        // no receipt left stale by a claim taken over, no temporary file.
        try await Self.waitOffPool("every receipt mark is cleared", timeout: .seconds(120)) {
            (try? reader.dirtyReceiptCount()) == 0
        }
        let rebuilt = fixture.directory.appendingPathComponent("rebuilt")
        try await onOwnThread {
            _ = try ReceiptWriter(directory: rebuilt, logger: Self.logger).rebuildAll(reader)
        }
        func files(_ directory: URL) throws -> [String: Data] {
            var files: [String: Data] = [:]
            // The writers' locks (.receipts.lock, .receipts.rebuild) are not receipts.
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
            where !name.hasPrefix(".receipts.") {
                files[name] = try Data(contentsOf: directory.appendingPathComponent(name))
            }
            return files
        }
        let written = try files(receipts)
        let expectedFiles = try files(rebuilt)
        #expect(written.keys.sorted() == expectedFiles.keys.sorted())
        #expect(
            written == expectedFiles, "stale: \(written.filter { expectedFiles[$0.key] != $0.value }.keys.sorted())")
        try await a.stop()
        try await b.stop()
        #expect(a.process.terminationStatus == 0 && b.process.terminationStatus == 0)
    }

    /// An aggregator frozen part-way through sending a statement (a group's insert is one message of several MB)
    /// holds its transaction's rows where none of PostgreSQL's own bounds ends it: the session is not idle, it waits
    /// for the rest of the message. `serve` ends such a session of another process once two of its checks (every 5
    /// s) have found it so, the second more than 10 s after its last message: a device whose statistics row the
    /// frozen session holds is answered `retry` meanwhile, then stored again; the frozen session's connection is
    /// closed, and `serve` says what it ended.
    @Test func anotherAggregatorFrozenMidStatementIsEndedAndItsRowsAreFreed() async throws {
        let database = try await onOwnThread { try TestPostgres.freshDatabase() }
        defer { database.drop() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(store: database.url, in: fixture.directory, name: "b")
        let size = 10
        let device = PacedDevice("cart-1", to: serve, period: .milliseconds(200), size: size) { n, _ in
            (0..<size).map { i in order(n * size + i, seat: "\(1 + i)A") }
        }
        var finished = false
        defer {
            if !finished {
                _ = device.finish(timeout: .zero)
                serve.killNow()
            }
        }
        try await JetbridgeTestKit.waitUntil("the device stores", timeout: .seconds(30)) {
            device.stored.value.count >= 3
        }
        // Before the session's last message: it is ended once 10 s have passed since then.
        let frozenAt = ContinuousClock.now
        let storedAtFreeze = device.stored.value.count
        let frozen = try await onOwnThread {
            try StalledClient(
                url: database.url, applicationName: "jetbridge frozen-host:4242",
                holding: "SELECT 1 FROM devices WHERE device = 'cart-1' FOR UPDATE")
        }
        defer { frozen.close() }
        try await JetbridgeTestKit.waitUntil("serve ends the frozen session", timeout: .seconds(40)) {
            serve.logText.contains("ended a database session that stopped in the middle of a statement")
        }
        let endedAfter = ContinuousClock.now - frozenAt
        try await JetbridgeTestKit.waitUntil("the device stores again", timeout: .seconds(30)) {
            device.stored.value.count >= storedAtFreeze + 5
        }
        let storedAgainAfter = ContinuousClock.now - frozenAt
        // While the frozen session held the row, the device's batches waited (answered retry after 5 s each).
        let during = device.stored.value.filter { $0.at > frozenAt + .seconds(6) && $0.at < frozenAt + .seconds(10) }
        #expect(during.isEmpty, "the device stored while its row was held: the frozen session held nothing")
        #expect(try await onOwnThread { frozen.closedByServer() })
        let line = serve.logText.split(separator: "\n").first { $0.contains("ended a database session") }
        #expect(line?.contains("jetbridge frozen-host:4242") == true, "\(line ?? "")")
        print(
            "SharedStoreStallTests: a session frozen mid-statement ended after \(endedAfter); the device stored again \(storedAgainAfter) after the freeze"
        )
        let allFinished = try await onOwnThread { device.finish() }
        finished = true
        #expect(allFinished)
        #expect(device.failure.value == nil, "\(device.failure.value ?? "")")
        let reader = try await onOwnThread { try PostgresStore(url: database.url, logger: Self.logger) }
        defer { try? reader.close() }
        let orders = try await onOwnThread { try reader.orders() }
        #expect(orders.count == device.stored.value.count * size)
        try await serve.stop()
    }

    /// Issue 23 item 12: PostgreSQL frozen (every server process stopped with SIGSTOP) for 20 s while a device syncs.
    /// `/readyz` must say not ready within seconds (a store call overdue), and ready again after; nothing is lost.
    /// Before, `/readyz` answered 200 throughout.
    @Test func aFrozenPostgreSQLServerMakesReadyzUnreadyWithinSeconds() async throws {
        let cluster = try await onOwnThread { try OwnPostgresCluster() }
        defer { cluster.remove() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(store: cluster.url, in: fixture.directory, name: "a", metrics: true)
        let metrics = try #require(serve.metricsEndpoint)
        let device = PacedDevice("cart-1", to: serve, period: .milliseconds(200), size: 10) { n, _ in
            (0..<10).map { order(n * 10 + $0, seat: "\($0 + 1)C") }
        }
        var frozen = false
        defer {
            if frozen { _ = try? cluster.signalAll(SIGCONT) }
            _ = device.finish(timeout: .zero)
            // The device's thread still holds the process.
            serve.killNow()
        }
        try await Self.waitOffPool("a few batches are stored and serve is ready") {
            device.stored.value.count >= 20 && httpStatus(metrics, "/readyz") == 200
        }
        try await onOwnThread { _ = try cluster.signalAll(SIGSTOP) }
        frozen = true
        let frozenAt = ContinuousClock.now
        var unreadyAfter: Duration?
        var answers: [String: Int] = [:]
        let thawAt = frozenAt + .seconds(20)
        while ContinuousClock.now < thawAt {
            let status = try await onOwnThread { httpStatus(metrics, "/readyz") }
            answers[status.map(String.init) ?? "none", default: 0] += 1
            if unreadyAfter == nil, status == 503 { unreadyAfter = ContinuousClock.now - frozenAt }
            try await Task.sleep(for: .milliseconds(100))
        }
        let storedWhileFrozen = device.records(from: frozenAt + .seconds(1), to: thawAt)
        try await onOwnThread { _ = try cluster.signalAll(SIGCONT) }
        frozen = false
        let thawed = ContinuousClock.now
        try await Self.waitOffPool("/readyz is ready again", timeout: .seconds(60)) {
            httpStatus(metrics, "/readyz") == 200
        }
        let readyAfter = ContinuousClock.now - thawed
        let count = device.stored.value.count
        try await waitUntil("the device stores again", timeout: .seconds(60)) { device.stored.value.count > count + 5 }
        print(
            """
            SharedStoreStallTests: PostgreSQL frozen 20 s: /readyz 503 after \(unreadyAfter.map { "\($0)" } ?? "never"), \
            ready again \(readyAfter) after SIGCONT; \(storedWhileFrozen) records stored while frozen
            """)
        #expect(
            unreadyAfter != nil,
            "/readyz never answered 503 during the freeze (answers: \(answers)): \(serve.logText.suffix(3_000))")
        if let unreadyAfter { #expect(unreadyAfter < .seconds(15)) }
        #expect(storedWhileFrozen == 0)
        let ok = try await onOwnThread { device.finish() }
        #expect(ok && device.failure.value == nil, "\(device.failure.value ?? "")")
        let orders = try await onOwnThread {
            let store = try PostgresStore(url: cluster.url, logger: Self.logger)
            defer { try? store.close() }
            return try store.orders()
        }
        #expect(orders.count == device.stored.value.count * 10)
        #expect(Set(orders.map(\.id)).count == orders.count)
        #expect(serve.process.isRunning)
        try await serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }
}
