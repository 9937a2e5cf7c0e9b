import Foundation
import JetbridgeTestKit
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Shared-store mode with real processes: `jetbridge-aggregator serve --store postgres://…` twice on one database,
/// devices on raw ZeroMQ sockets, PostgreSQL stopped and started under a sync, and the operator commands
/// (`report`, `receipts rebuild`, `store migrate`) against PostgreSQL next to SQLite (issue 11).
///
/// Needs a PostgreSQL server: `JETBRIDGE_TEST_POSTGRES` (see `TestPostgres`); skipped without it, failing in CI.
@Suite(
    "Shared store: several serve processes on one PostgreSQL database",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct SharedStoreTests {
    static let logger = quietLogger

    /// The next ack, or a failure naming what was waited for.
    static func ack(_ device: RawDevice, _ what: String) throws -> Ack {
        guard let ack = try device.ack() else { throw TestPostgresError("no ack for \(what) within 20 s") }
        return ack
    }

    /// What the concurrent tests share: two `serve` processes on one fresh database, a device connected to each
    /// (`devices`: their ids), and `count` rounds of `round` on a thread of its own (the devices' calls block).
    /// - Parameters:
    ///   - round: One round, given its index and the devices connected to `a` and to `b`.
    ///   - verify: Checks every round's result, with the database's URL and both processes still there.
    static func onTwoAggregators<Round: Sendable>(
        devices: (a: String, b: String), rounds count: Int,
        _ round: @escaping @Sendable (_ index: Int, _ toA: RawDevice, _ toB: RawDevice) throws -> Round,
        verify: (_ rounds: [Round], _ url: String, _ a: ServeProcess, _ b: ServeProcess) async throws -> Void
    ) async throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let a = try await ServeProcess(store: database.url, in: fixture.directory, name: "a")
        let b = try await ServeProcess(store: database.url, in: fixture.directory, name: "b")
        let rounds = try await onOwnThread {
            let toA = try RawDevice(id: devices.a, to: a)
            let toB = try RawDevice(id: devices.b, to: b)
            defer {
                toA.close()
                toB.close()
            }
            return try (0..<count).map { try round($0, toA, toB) }
        }
        try await verify(rounds, database.url, a, b)
    }

    /// Every round's acks say stored, with `new` new and `duplicates` duplicate records between them.
    static func expectStored(
        _ rounds: [[Ack]], new: Int, duplicates: Int, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for (round, acks) in rounds.enumerated() {
            #expect(acks.allSatisfy { $0.status == .stored }, "round \(round): \(acks)", sourceLocation: sourceLocation)
            #expect(
                acks.map { $0.new ?? -1 }.reduce(0, +) == new, "round \(round): \(acks)", sourceLocation: sourceLocation)
            #expect(
                acks.map { $0.duplicates ?? -1 }.reduce(0, +) == duplicates, "round \(round): \(acks)",
                sourceLocation: sourceLocation)
        }
    }

    @Test func theSameBatchToTwoAggregatorsAtOnceIsStoredOnceNewOnceDuplicateOnce() async throws {
        // One device that resent its batch to the other aggregator after a timeout: both copies in flight.
        try await Self.onTwoAggregators(devices: ("cart-1", "cart-1"), rounds: 6) { round, toA, toB in
            let records = (0..<40).map { order(round * 100 + $0, seat: "\($0 % 9 + 1)A") }
            let batch = try outgoing("cart-1", UInt64(round * 40 + 1), records)
            try toA.send(batch)
            try toB.send(batch)
            return [try Self.ack(toA, "round \(round) on a"), try Self.ack(toB, "round \(round) on b")]
        } verify: { rounds, url, a, b in
            // Every record once new and once duplicate, between the two answers.
            Self.expectStored(rounds, new: 40, duplicates: 40)
            for (round, acks) in rounds.enumerated() {
                // Rows are written in id order, so the first transaction to take an id takes them all: one copy is
                // all new, the other all duplicate.
                #expect(Set(acks.map { [$0.new ?? -1, $0.duplicates ?? -1] }) == [[40, 0], [0, 40]], "round \(round)")
            }
            let (orders, devices) = try await onOwnThread {
                let store = try PostgresStore(url: url, logger: Self.logger)
                defer { try? store.close() }
                return (try store.orders(), try store.deviceReport())
            }
            #expect(orders.count == 240)
            #expect(Set(orders.map(\.id)).count == 240)
            let cart = try #require(devices.devices.first { $0.device == "cart-1" })
            #expect(cart.batches == 12 && cart.records == 480 && cart.new == 240 && cart.duplicates == 240)
            try await a.stop()
            try await b.stop()
            #expect(a.process.terminationStatus == 0 && b.process.terminationStatus == 0)
        }
    }

    @Test func theSameRecordInBatchesToDifferentAggregatorsIsStoredOnce() async throws {
        // Two handlers scanned into one scan id (a scan synced twice from two devices' queues): each batch has
        // records of its own around it.
        try await Self.onTwoAggregators(devices: ("ramp-1", "ramp-2"), rounds: 10) { round, ramp1, ramp2 in
            let shared = scan(500_000 + round, tag: round)
            let first = try outgoing(
                "ramp-1", UInt64(round * 3 + 1),
                [scan(100_000 + round, tag: round), shared, scan(200_000 + round, tag: round)])
            let second = try outgoing(
                "ramp-2", UInt64(round * 3 + 1),
                [scan(300_000 + round, tag: round), shared, scan(400_000 + round, tag: round)])
            try ramp1.send(first)
            try ramp2.send(second)
            return [try Self.ack(ramp1, "round \(round)"), try Self.ack(ramp2, "round \(round)")]
        } verify: { rounds, url, _, _ in
            Self.expectStored(rounds, new: 5, duplicates: 1)
            let (bags, devices) = try await onOwnThread {
                let store = try PostgresStore(url: url, logger: Self.logger)
                defer { try? store.close() }
                return (try store.bags(), try store.deviceReport().devices)
            }
            #expect(bags.count == 10)
            #expect(devices.map(\.new).reduce(0, +) == 50)
            #expect(devices.map(\.duplicates).reduce(0, +) == 10)
        }
    }

    @Test func revisionsTwoAndThreeOnTwoAggregatorsAtOnceEndAtThree() async throws {
        try await Self.onTwoAggregators(devices: ("cart-1", "cart-1"), rounds: 8) { round, toA, toB in
            // Each round sends three batches of ten records: its revisions 1, 2 and 3, in sequence order.
            func batch(_ ids: Range<Int>, revision: Int) throws -> OutgoingBatch {
                try outgoing(
                    "cart-1", UInt64(round * 30 + (revision - 1) * 10 + 1),
                    ids.map { order($0, revision: revision, seat: "\($0 % 7 + 1)C", lines: [(chips, revision)]) })
            }
            let ids = (round * 10)..<(round * 10 + 10)
            try toA.send(try batch(ids, revision: 1))
            _ = try Self.ack(toA, "revision 1 of round \(round)")
            let two = try batch(ids, revision: 2)
            let three = try batch(ids, revision: 3)
            // Which aggregator gets the newer revision alternates.
            let (threeTo, twoTo) = round % 2 == 0 ? (toA, toB) : (toB, toA)
            try threeTo.send(three)
            try twoTo.send(two)
            return (revision3: try Self.ack(threeTo, "revision 3"), revision2: try Self.ack(twoTo, "revision 2"))
        } verify: { rounds, url, _, _ in
            for (round, acks) in rounds.enumerated() {
                #expect(acks.revision3.status == .stored && acks.revision2.status == .stored, "round \(round)")
                // Revision 3 always raises the stored one (from 1 or 2); revision 2 only when it came first.
                #expect(acks.revision3.new == 10, "round \(round): \(acks)")
                #expect([0, 10].contains(acks.revision2.new ?? -1), "round \(round): \(acks)")
            }
            let (orders, receipts) = try await onOwnThread {
                let store = try PostgresStore(url: url, logger: Self.logger)
                defer { try? store.close() }
                return (try store.orders(), try store.receipts(flight: flightA))
            }
            #expect(orders.count == 80)
            #expect(orders.allSatisfy { $0.revision == 3 }, "\(orders.filter { $0.revision != 3 }.map(\.revision))")
            // Each seat's receipt totals revision 3 of its orders: 3 Chips at 300 each.
            #expect(receipts.map(\.total).reduce(0, +) == 80 * 900)
        }
    }

    /// A scrape of `/metrics` in shared-store mode (issue 23 item 1): rendering it asked PostgreSQL for the receipts
    /// backlog and waited on a future on the metrics server's event loop, which SwiftNIO traps (SIGILL on the first
    /// scrape, what the shipped shared-store unit runs). Now the status thread reads it and the scrape shows that.
    @Test func scrapingMetricsOnAPostgreSQLStoreAnswersAndServeKeepsRunning() async throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(store: database.url, in: fixture.directory, name: "a", metrics: true)
        let endpoint = try #require(serve.metricsEndpoint)
        let ack = try await onOwnThread {
            let device = try RawDevice(id: "cart-1", to: serve)
            defer { device.close() }
            try device.send(try outgoing("cart-1", 1, (0..<5).map { order($0, seat: "\($0 + 1)C") }))
            return try Self.ack(device, "5 orders")
        }
        #expect(ack.status == .stored)
        let url = try #require(URL(string: "http://\(endpoint)/metrics"))
        // Scraped until the status thread's reading of the receipts backlog shows (within 2 s of the start).
        var text = ""
        let deadline = ContinuousClock.now + .seconds(20)
        repeat {
            let (data, response) = try await URLSession.shared.data(from: url)
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            text = String(decoding: data, as: UTF8.self)
            if MetricsTests.sample(text, "jetbridge_receipts_pending") != nil { break }
            try await Task.sleep(for: .milliseconds(100))
        } while ContinuousClock.now < deadline && serve.process.isRunning
        #expect(text.contains("jetbridge_batches_total"))
        #expect(MetricsTests.sample(text, "jetbridge_receipts_pending") != nil)
        #expect(serve.process.isRunning, "serve died on a scrape: \(serve.logText.suffix(2_000))")
        try await serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }

    @Test func aPostgreSQLRestartDuringASyncCostsRetriesOnlyAndTheTotalsAreExact() async throws {
        // A cluster of this test's own: stopping the shared one would fail the tests running beside it.
        let cluster = try await onOwnThread { try OwnPostgresCluster() }
        defer { cluster.remove() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(store: cluster.url, in: fixture.directory, name: "a", metrics: true)
        let metrics = try #require(serve.metricsEndpoint)
        #expect(httpStatus(metrics, "/readyz") == 200)

        let batches = 40
        let perBatch = 20
        let restart = Locked2<(stopped: Bool, notReadySeen: Bool, started: Bool)>((false, false, false))
        let result = try await onOwnThread {
            let device = try RawDevice(id: "cart-1", to: serve)
            defer { device.close() }
            var stored: [Ack] = []
            var retries = 0
            for n in 0..<batches {
                let records = (0..<perBatch).map { order(n * perBatch + $0, seat: "\($0 % 12 + 1)D") }
                let batch = try outgoing("cart-1", UInt64(n * perBatch + 1), records)
                if n == 10 {
                    // PostgreSQL goes away mid-sync (a fast shutdown terminates the aggregator's connections) and
                    // comes back once /readyz has said so.
                    Thread {
                        do {
                            try cluster.pgctl("stop")
                            restart.mutate { $0.stopped = true }
                            let deadline = Date() + 20
                            while Date() < deadline, httpStatus(metrics, "/readyz") != 503 { usleep(50_000) }
                            let seen = httpStatus(metrics, "/readyz") == 503
                            restart.mutate { $0.notReadySeen = seen }
                            try cluster.pgctl("start")
                        } catch {
                            Issue.record("pg_ctl failed: \(error)")
                        }
                        restart.mutate { $0.started = true }
                    }.start()
                    while !restart.value.stopped { usleep(10_000) }
                }
                // As the agent does: resend on `retry` after a pause, and when no answer comes in time.
                let (ack, retried) = try device.store(batch)
                retries += retried
                stored.append(ack)
            }
            return (stored, retries)
        }
        try await waitUntil("PostgreSQL is back") { restart.value.started }
        let (acks, retries) = result
        #expect(restart.value.notReadySeen, "/readyz never said not ready while PostgreSQL was down")
        #expect(retries > 0, "the outage was never seen by a batch")
        #expect(acks.count == batches && acks.allSatisfy { $0.status == .stored })
        // Each batch counted once, at its stored answer: new, or duplicate when a commit whose answer was lost with
        // the connection had stored it before the resend.
        #expect(acks.map { ($0.new ?? 0) + ($0.duplicates ?? 0) }.reduce(0, +) == batches * perBatch)
        let orders = try await onOwnThread {
            let store = try PostgresStore(url: cluster.url, logger: Self.logger)
            defer { try? store.close() }
            return try store.orders()
        }
        #expect(orders.count == batches * perBatch)
        #expect(Set(orders.map(\.id)).count == batches * perBatch)
        try await waitUntil("/readyz is ready again") { httpStatus(metrics, "/readyz") == 200 }
        #expect(serve.process.isRunning)
        // One outage, logged once by each of the two connections (batches, receipts) at most, not once per batch.
        let outages = serve.count("store unreachable; reconnecting with backoff (up to 5.0 seconds)")
        #expect((1...2).contains(outages), "\(outages) outage lines:\n\(serve.logText)")
        #expect(serve.count("transaction failed; its batches were answered retry") == 1, "\(serve.logText)")
        #expect(serve.count("store reachable again") >= 1)
        #expect(!serve.logText.contains("password"))
        try await serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }

    @Test func reportsAndReceiptsFromPostgreSQLAreByteIdenticalToSQLites() async throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let sqliteHome = fixture.directory.appendingPathComponent("sqlite")
        let postgresHome = fixture.directory.appendingPathComponent("postgres")
        let refreshed = fixture.directory.appendingPathComponent("refreshed")
        try await onOwnThread {
            try FileManager.default.createDirectory(at: sqliteHome, withIntermediateDirectories: true)
            let sqlite = try SQLiteStore(
                path: sqliteHome.appendingPathComponent(SQLiteStore.fileName).path, logger: Self.logger)
            defer { try? sqlite.close() }
            let postgres = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? postgres.close() }
            _ = try StoreParityTests.snapshot(of: sqlite)
            _ = try StoreParityTests.snapshot(of: postgres)
            // The serve path's walk (claimed seats, SKIP LOCKED) renders what a rebuild renders.
            let writer = ReceiptWriter(directory: refreshed, logger: Self.logger)
            #expect(try writer.refreshDirty(postgres) > 0)
            #expect(try postgres.dirtyReceiptCount() == 0)
        }
        let sqlite = ["--home", sqliteHome.path]
        let postgres = ["--home", postgresHome.path]
        let store = ["--store", database.url]
        for kind in ["flights", "items", "luggage", "devices"] {
            for format in ["table", "csv", "json"] {
                let expected = try AggregatorCLITests.run(sqlite + ["report", kind, "--format", format], in: fixture.directory)
                let actual = try AggregatorCLITests.run(
                    postgres + ["report", kind, "--format", format] + store, in: fixture.directory)
                #expect(expected.status == 0, "\(kind) \(format): \(expected.stderr)")
                #expect(actual.status == expected.status, "\(kind) \(format): \(actual.stderr)")
                #expect(actual.stdout == expected.stdout, "\(kind) \(format)")
                #expect(!expected.stdout.isEmpty)
            }
            let html = try AggregatorCLITests.run(
                postgres + ["report", kind, "--format", "html"] + store, in: fixture.directory)
            #expect(html.status == 0 && html.stdout.contains("<html"), "\(kind) html: \(html.stderr)")
        }
        let expected = try AggregatorCLITests.run(sqlite + ["receipts", "rebuild"], in: fixture.directory)
        let actual = try AggregatorCLITests.run(postgres + ["receipts", "rebuild"] + store, in: fixture.directory)
        #expect(expected.status == 0, "\(expected.stderr)")
        #expect(actual.status == expected.status && actual.stdout == expected.stdout, "\(actual.stdout) \(actual.stderr)")
        func files(_ directory: URL) throws -> [String: Data] {
            var files: [String: Data] = [:]
            // The writers' locks (.receipts.lock, .receipts.rebuild) are not receipts.
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
            where !name.hasPrefix(".receipts.") {
                files[name] = try Data(contentsOf: directory.appendingPathComponent(name))
            }
            return files
        }
        let sqliteReceipts = try files(sqliteHome.appendingPathComponent("receipts"))
        #expect(sqliteReceipts.count > 20)
        #expect(try files(postgresHome.appendingPathComponent("receipts")) == sqliteReceipts)
        #expect(try files(refreshed) == sqliteReceipts)
    }

    @Test func aSeatClaimedByOneReceiptWriterIsSkippedByAnother() async throws {
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let (inner, outer, remaining) = try await onOwnThread {
            let first = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? first.close() }
            let second = try PostgresStore(url: database.url, logger: Self.logger)
            defer { try? second.close() }
            _ = try first.apply([batch("cart-1", 1, (0..<4).map { order($0, seat: "\($0 + 1)A") })], at: date(0))
            var inner: [String] = []
            // The first writer claims one seat and, while it holds it, the second walks everything it can claim.
            let outer = try first.refreshReceipts(
                after: nil, limit: 1, failed: { _, _, _ in }, write: { _, _, _ in },
                durable: {
                    inner = try second.refreshReceipts(
                        after: nil, limit: 10, failed: { _, _, _ in }, write: { _, _, _ in }, durable: {}
                    ).map(\.seat.rawValue)
                })
            return (inner, outer.map(\.seat.rawValue), try first.dirtyReceiptCount())
        }
        #expect(outer == ["1A"])
        #expect(inner == ["2A", "3A", "4A"])
        #expect(remaining == 0)
    }
}

/// `store migrate` and `--store` without a server to reach: what is said, and that no password is.
@Suite("Shared store: the --store flag and store migrate")
struct StoreFlagTests {
    @Test func anUnreachableStoreIsUnavailableAndItsPasswordNeverPrinted() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.path]
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let url = "postgres://jetbridge:s3cret-pw@127.0.0.1:1/jetbridge"
        for command in [["store", "migrate"], ["report", "flights"], ["receipts", "rebuild"]] {
            let output = try AggregatorCLITests.run(home + command + ["--store", url], in: fixture.directory)
            #expect(output.status == 69, "\(command): \(output.stderr)")
            #expect(output.stderr.contains("postgres://jetbridge@127.0.0.1:1/jetbridge"), "\(output.stderr)")
            #expect(!(output.stdout + output.stderr).contains("s3cret"))
        }
        let bad = try AggregatorCLITests.run(
            home + ["store", "migrate", "--store", "postgres://:pw@127.0.0.1/x"], in: fixture.directory)
        #expect(bad.status == 65, "\(bad.stderr)")
        #expect(bad.stderr.contains("names no user") && !bad.stderr.contains("pw@"), "\(bad.stderr)")
    }

    @Test func storeMigrateOnTheDefaultSQLiteStorePrintsItsVersion() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let output = try AggregatorCLITests.run(["--home", fixture.directory.path, "store", "migrate"], in: fixture.directory)
        #expect(output.status == 0, "\(output.stderr)")
        let path = fixture.directory.appendingPathComponent("jetbridge.sqlite").path
        #expect(output.stdout.hasPrefix("store \(path): schema version "), "\(output.stdout)")
        #expect(FileManager.default.fileExists(atPath: path))
    }

    @Test func theStoreKeyInTheFileIsUsedAndTheFlagWins() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        try Data(#"{"store": "from-file.sqlite"}"#.utf8).write(to: fixture.directory.appendingPathComponent("aggregator.json"))
        let home = ["--home", fixture.directory.path]
        let fromFile = try AggregatorCLITests.run(home + ["store", "migrate"], in: fixture.directory)
        #expect(fromFile.stdout.contains("from-file.sqlite"), "\(fromFile.stdout) \(fromFile.stderr)")
        let fromFlag = try AggregatorCLITests.run(home + ["store", "migrate", "--store", "flag.sqlite"], in: fixture.directory)
        #expect(fromFlag.stdout.contains("flag.sqlite") && !fromFlag.stdout.contains("from-file"), "\(fromFlag.stdout)")
    }
}
