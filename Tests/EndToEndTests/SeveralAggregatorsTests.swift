import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One device syncing to two `jetbridge-aggregator serve` processes listed in its `ground` (docs/PROTOCOL.md, "Several
/// aggregators"). Each aggregator has its own SQLite home here — there is no shared store in these tests — so they
/// check the union of what the two stores hold (every captured record at least once) and what the agent counted
/// (each batch once); exactly once across aggregators needs the shared PostgreSQL store and is checked there.
@Suite("Several aggregators", .serialized)
struct SeveralAggregatorsTests {
    /// Two ground homes, each with its own key pair and allow list, and one device that lists both.
    struct Twin {
        let sandbox: AgentSandbox
        let grounds: [URL]
        let data: [String]
        let acks: [String]
        let serverKeys: [String]
        let device = "cart-1"
        /// `--store` for both aggregators and the reports (a PostgreSQL URL), or nil: each its own SQLite home.
        var store: String?
        var home: URL { sandbox.directory.appendingPathComponent(device) }

        /// - Parameter window: `sync.window`; batches are 10 records, the ack timeout 0.5 s.
        init(window: Int = 4, store: String? = nil) throws {
            self.store = store
            sandbox = try AgentSandbox()
            let directory = sandbox.directory
            grounds = ["ground-a", "ground-b"].map { directory.appendingPathComponent($0) }
            data = ["a", "b"].map { "ipc://" + directory.appendingPathComponent("data-\($0).ipc").path }
            acks = ["a", "b"].map { "ipc://" + directory.appendingPathComponent("acks-\($0).ipc").path }
            var keys: [String] = []
            for ground in grounds {
                let generated = try AgentSandbox.run(
                    AgentSandbox.executable("jetbridge-aggregator"), ["--home", ground.path, "keys", "generate"],
                    in: directory)
                try check(generated.status == 0, "\(generated)")
                keys.append(
                    try String(contentsOf: ground.appendingPathComponent("keys/server.pub"), encoding: .utf8)
                        .trimmingCharacters(in: .whitespacesAndNewlines))
            }
            serverKeys = keys
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            func quoted(_ text: String) -> String {
                "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                    + "\""
            }
            let list = (0..<2).map {
                #"{"data": \#(quoted(data[$0])), "acks": \#(quoted(acks[$0])), "serverPublicKey": \#(quoted(keys[$0]))}"#
            }
            // Separate SQLite homes (no shared store) can never confirm a flight: each holds part of it. Proof of
            // delivery is off for them; the shared PostgreSQL runs keep it on.
            let configuration = """
                {"device": "\(device)", "ground": [\(list.joined(separator: ", "))],
                 "sync": {"batchRecords": 10, "window": \(window), "ackTimeoutSeconds": 0.5\(store == nil ? ", \"confirmDelivery\": false" : "")}}
                """
            try Data(configuration.utf8).write(to: home.appendingPathComponent("agent.json"))
            let generated = try agent(["keys", "generate"])
            try check(generated.status == 0, "\(generated)")
            let publicKey = try String(contentsOf: home.appendingPathComponent("keys/device.pub"), encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            for ground in grounds {
                let allowed = try AgentSandbox.run(
                    AgentSandbox.executable("jetbridge-aggregator"),
                    ["devices", "allow", "--home", ground.path, "--", device, publicKey], in: directory)
                try check(allowed.status == 0, "\(allowed)")
            }
        }

        func agent(_ arguments: [String], stdin: Data? = nil) throws -> AgentSandbox.Run {
            try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-agent"), ["--home", home.path] + arguments, in: sandbox.directory,
                stdin: stdin)
        }

        /// Scans `count` distinct bags at origin: one record per tag, so a store's luggage report lists the records
        /// it holds.
        func capture(_ count: Int) throws -> Set<String> {
            let ids = (0..<count).map { _ in UUID() }
            let scanned = try agent(
                ["scan", "--at", "origin"], stdin: Data(ids.map { Tags.json(id: $0) }.joined(separator: "\n").utf8))
            try check(scanned.status == 0, "\(scanned)")
            return Set(ids.map(\.uuidString))
        }

        func serve(_ index: Int) throws -> PipelineTests.Background {
            try PipelineTests.Background(
                AgentSandbox.executable("jetbridge-aggregator"),
                ["--home", grounds[index].path, "serve", "--data", data[index], "--acks", acks[index]] + storeFlag,
                in: sandbox.directory, name: "serve-\(index)-\(UUID().uuidString.prefix(4))")
        }

        func sync(_ extra: [String] = ["--until-drained", "--timeout", "90"]) throws -> PipelineTests.Background {
            try PipelineTests.Background(
                AgentSandbox.executable("jetbridge-agent"), ["--home", home.path, "sync", "--json"] + extra,
                in: sandbox.directory, name: "sync-\(UUID().uuidString.prefix(4))")
        }

        /// The tag ids in aggregator `index`'s store (empty when it never stored anything).
        func storedTags(_ index: Int) throws -> Set<String> {
            let report = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"),
                ["--home", grounds[index].path, "report", "luggage", "--format", "json"] + storeFlag,
                in: sandbox.directory)
            if report.status == 69 { return [] }  // no store yet
            try check(report.status == 0, "\(report)")
            struct Bags: Decodable {
                struct Bag: Decodable { var tag: String }
                var bags: [Bag]
            }
            let bags = try JSONDecoder().decode(Bags.self, from: Data(report.stdout.utf8)).bags
            return Set(bags.map { $0.tag.uppercased() })
        }

        /// Waits until both aggregators have bound their ipc endpoints (after opening their store), so the device
        /// finds both up from its first batch instead of sending everything to the one that started first.
        func waitUntilListening() throws {
            let paths = (data + acks).map { String($0.dropFirst("ipc://".count)) }
            let deadline = Date().addingTimeInterval(30)
            while !paths.allSatisfy({ FileManager.default.fileExists(atPath: $0) }), Date() < deadline { usleep(10_000) }
            try check(paths.allSatisfy { FileManager.default.fileExists(atPath: $0) }, "both aggregators listen")
        }

        var storeFlag: [String] { store.map { ["--store", $0] } ?? [] }

        /// `report devices` row of the device: (records, new, duplicates) summed over every aggregator that stored.
        func deviceCounts() throws -> (records: Int, new: Int, duplicates: Int) {
            let report = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"),
                ["--home", grounds[0].path, "report", "devices", "--format", "json"] + storeFlag, in: sandbox.directory)
            try check(report.status == 0, "\(report)")
            struct Devices: Decodable {
                struct Device: Decodable { var device: String, records: Int, new: Int, duplicates: Int }
                var devices: [Device]
            }
            let rows = try JSONDecoder().decode(Devices.self, from: Data(report.stdout.utf8)).devices
            guard let row = rows.first(where: { $0.device == device }) else { return (0, 0, 0) }
            return (row.records, row.new, row.duplicates)
        }

        func acknowledged() -> UInt64 {
            (try? FileQueue.check(directory: home.appendingPathComponent("queue")).status.acknowledgedThrough) ?? 0
        }
    }

    /// `sync --json`'s last line.
    struct Summary: Decodable {
        struct Aggregator: Decodable {
            var data: String
            var batchesSent: Int
            var acknowledged: Int
            var lateAcks: Int
        }
        var outcome: String
        var exitCode: Int
        var acknowledged: Int
        var new: Int
        var duplicates: Int
        var remaining: Int?
        var aggregators: [Aggregator]

        init(_ output: String) throws {
            let last = output.split(separator: "\n").last.map(String.init) ?? ""
            do {
                self = try JSONDecoder().decode(Summary.self, from: Data(last.utf8))
            } catch {
                throw PipelineFailure(description: "no summary object at the end of: \(output)")
            }
        }
    }

    @Test("batches are spread over both aggregators; every record is stored and counted once by the device")
    func spread() async throws {
        _ = try await onThreads(1) { _ in try Self.spreadRun() }
    }

    static func spreadRun() throws {
        let twin = try Twin()
        let captured = try twin.capture(400)
        let servers = try [twin.serve(0), twin.serve(1)]
        defer { for server in servers { server.kill9() } }
        try twin.waitUntilListening()
        let sync = try twin.sync()
        try check(sync.wait(atMost: 90) == 0, "sync: \(sync.output)")
        let summary = try Summary(sync.output)
        try check(summary.outcome == "drained" && summary.acknowledged == captured.count, "\(sync.output)")
        try check(summary.aggregators.map(\.data) == twin.data, "\(sync.output)")
        for aggregator in summary.aggregators {
            try check(aggregator.batchesSent > 0 && aggregator.acknowledged > 0, "both got some: \(sync.output)")
        }
        try check(
            summary.aggregators.map(\.acknowledged).reduce(0, +) == captured.count,
            "each batch counted once: \(sync.output)")
        let stored = try [twin.storedTags(0), twin.storedTags(1)]
        try check(!stored[0].isEmpty && !stored[1].isEmpty, "both stores hold records")
        try check(stored[0].union(stored[1]) == captured, "the union of the two stores is what was captured")
        try check(twin.acknowledged() == UInt64(captured.count), "the queue is acknowledged through the end")
    }

    @Test("one aggregator down from the start: everything goes through the other")
    func oneDown() async throws {
        _ = try await onThreads(1) { _ in try Self.oneDownRun() }
    }

    static func oneDownRun() throws {
        let twin = try Twin()
        let captured = try twin.capture(200)
        let server = try twin.serve(1)
        defer { server.kill9() }
        let sync = try twin.sync()
        try check(sync.wait(atMost: 90) == 0, "sync: \(sync.output)")
        let summary = try Summary(sync.output)
        try check(summary.acknowledged == captured.count && summary.remaining == 0, "\(sync.output)")
        try check(
            summary.aggregators[0].batchesSent == 0, "nothing went to the aggregator that is down: \(sync.output)")
        try check(summary.aggregators[1].acknowledged == captured.count, "\(sync.output)")
        try check(try twin.storedTags(1) == captured, "the live aggregator stored everything")
        try check(try twin.storedTags(0).isEmpty, "the other one never ran")
    }

    @Test("an aggregator SIGKILLed mid-sync: the sync finishes through the other, every record stored at least once")
    func killedMidSync() async throws {
        let note = try await onThreads(1) { _ in try Self.killedMidSyncRun() }[0]
        print("several aggregators: \(note)")
    }

    static func killedMidSyncRun() throws -> String {
        try killFirstMidSync { run in
            try check(run.output.contains("is down"), "the log names the aggregator that went down: \(run.output)")
            let union = try run.twin.storedTags(0).union(run.twin.storedTags(1))
            try check(union == run.captured, "every captured record is in one store or the other (\(union.count))")
            return "acknowledged \(run.atKill) of \(run.captured.count) at the kill; \(run.shares)"
        }
    }

    /// A sync that lost its first aggregator to SIGKILL, finished through the second.
    struct KilledRun {
        let twin: Twin
        let captured: Set<String>
        let summary: Summary
        /// What the sync printed.
        let output: String
        /// The queue's acknowledged position at the kill.
        let atKill: UInt64

        /// What each aggregator acknowledged, for the test's note.
        var shares: String {
            summary.aggregators.map { "\($0.data.suffix(10)): \($0.acknowledged)" }.joined(separator: ", ")
        }
    }

    /// The kill tests' run: 3,000 records, a window of 2, both aggregators listening, and the first SIGKILLed once a
    /// tenth is acknowledged (by then both have batches, the first some in flight). Checks that the kill came
    /// mid-sync, the sync drained through the other and the first had acknowledged some, then runs `verify` while
    /// the second aggregator still runs.
    /// - Parameters:
    ///   - store: `--store` for both aggregators (a PostgreSQL URL), or nil for a SQLite home each.
    ///   - verify: The test's own checks; returns its note.
    static func killFirstMidSync(store: String? = nil, verify: (KilledRun) throws -> String) throws -> String {
        let twin = try Twin(window: 2, store: store)
        let captured = try twin.capture(3000)
        let servers = try [twin.serve(0), twin.serve(1)]
        defer { for server in servers { server.kill9() } }
        try twin.waitUntilListening()
        let sync = try twin.sync()
        let deadline = Date().addingTimeInterval(60)
        while twin.acknowledged() < 300, Date() < deadline, sync.process.isRunning { usleep(5_000) }
        let atKill = twin.acknowledged()
        servers[0].kill9()
        try check(atKill < UInt64(captured.count), "the kill came mid-sync (acknowledged \(atKill))")
        try check(sync.wait(atMost: 90) == 0, "sync: \(sync.output)")
        let summary = try Summary(sync.output)
        try check(summary.acknowledged == captured.count && summary.remaining == 0, "\(sync.output)")
        try check(summary.aggregators[0].acknowledged > 0, "the first had acknowledged some: \(sync.output)")
        return try verify(
            KilledRun(twin: twin, captured: captured, summary: summary, output: sync.output, atKill: atKill))
    }

    /// A new database on the test server (`JETBRIDGE_TEST_POSTGRES`), by `psql`, so this test's counts are its own.
    static func freshDatabase() throws -> String? {
        guard let url = ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"], !url.isEmpty else {
            return nil
        }
        let name = "several_\(UUID().uuidString.prefix(8).lowercased())"
        let created = try AgentSandbox.run(
            URL(fileURLWithPath: "/usr/bin/psql"), [url, "-qc", "CREATE DATABASE \(name)"],
            in: FileManager.default.temporaryDirectory)
        try check(created.status == 0, "CREATE DATABASE: \(created)")
        guard let slash = url.range(of: "/", options: .backwards) else { return nil }
        return url[..<slash.upperBound] + name
    }

    @Test(
        "two aggregators on one PostgreSQL store, one SIGKILLed mid-sync: the device finishes through the other and every record is new exactly once",
        .enabled(
            if: ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"] != nil
                || ProcessInfo.processInfo.environment["CI"] == "true",
            "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")"))
    func killedMidSyncOnASharedStore() async throws {
        let note = try await onThreads(1) { _ in try Self.killedMidSyncOnASharedStoreRun() }[0]
        print("several aggregators, shared PostgreSQL store: \(note)")
    }

    static func killedMidSyncOnASharedStoreRun() throws -> String {
        guard let store = try freshDatabase() else {
            throw PipelineFailure(description: "JETBRIDGE_TEST_POSTGRES is not set (CI=true needs it)")
        }
        return try killFirstMidSync(store: store) { run in
            let (twin, captured) = (run.twin, run.captured)
            // Exactly once in the shared store: every tag once, and over both aggregators each record counted new
            // once (a batch the killed one stored but never acked comes back from the other as duplicates, never as
            // new).
            try check(try twin.storedTags(1) == captured, "the shared store holds exactly what was captured")
            try check(try twin.storedTags(0) == captured, "either aggregator's home reads the same shared store")
            let counts = try twin.deviceCounts()
            try check(counts.new == captured.count, "new \(counts.new) of \(captured.count): each record new once")
            try check(counts.records == counts.new + counts.duplicates, "records = new + duplicates: \(counts)")
            return "acknowledged \(run.atKill) of \(captured.count) at the kill; \(counts.duplicates) duplicates "
                + "resent; \(run.shares)"
        }
    }

    @Test("a late ack from an aggregator that was stopped is not counted again; its batches went to the other")
    func lateAck() async throws {
        let note = try await onThreads(1) { _ in try Self.lateAckRun() }[0]
        print("several aggregators: \(note)")
    }

    static func lateAckRun() throws -> String {
        let twin = try Twin()
        let captured = try twin.capture(2000)
        let servers = try [twin.serve(0), twin.serve(1)]
        defer {
            kill(servers[0].process.processIdentifier, SIGCONT)
            for server in servers { server.kill9() }
        }
        try twin.waitUntilListening()
        // No --until-drained: the sync must still be running when the stopped aggregator answers.
        let sync = try twin.sync(["--timeout", "90", "--log-level", "info"])
        defer { sync.kill9() }
        var deadline = Date().addingTimeInterval(60)
        while twin.acknowledged() < 50, Date() < deadline, sync.process.isRunning { usleep(2_000) }
        // Stop it only once it is taking batches (its store holds some), so it has batches in flight when it stops.
        while try twin.storedTags(0).isEmpty, Date() < deadline, sync.process.isRunning { usleep(20_000) }
        // SIGSTOP: the aggregator keeps its connections but reads and answers nothing, like a hung host.
        kill(servers[0].process.processIdentifier, SIGSTOP)
        let atStop = twin.acknowledged()
        // What it had stored before it stopped (a reader does not wait for a stopped writer in WAL mode).
        let storedBefore = try twin.storedTags(0).count
        deadline = Date().addingTimeInterval(60)
        while twin.acknowledged() < UInt64(captured.count), Date() < deadline, sync.process.isRunning {
            usleep(20_000)
        }
        try check(twin.acknowledged() == UInt64(captured.count), "the other aggregator took everything: \(sync.output)")
        kill(servers[0].process.processIdentifier, SIGCONT)
        // It now stores what it received while stopped and acks it, late: wait until its store grows.
        deadline = Date().addingTimeInterval(20)
        while try twin.storedTags(0).count <= storedBefore, Date() < deadline { usleep(200_000) }
        usleep(1_000_000)  // its acks leave right after the commit
        kill(sync.process.processIdentifier, SIGTERM)
        try check(sync.wait(atMost: 30) == 0, "stopped with nothing left: \(sync.output)")
        let summary = try Summary(sync.output)
        try check(summary.acknowledged == captured.count, "every record counted once: \(sync.output)")
        try check(summary.new + summary.duplicates == captured.count, "\(sync.output)")
        try check(summary.aggregators[0].lateAcks >= 1, "the stopped aggregator's answers came late: \(sync.output)")
        try check(
            summary.aggregators.map(\.acknowledged).reduce(0, +) == captured.count,
            "no batch counted twice: \(sync.output)")
        let union = try twin.storedTags(0).union(twin.storedTags(1))
        try check(union == captured, "every captured record is stored")
        return "acknowledged \(atStop) at the stop; late acks \(summary.aggregators[0].lateAcks)"
    }
}
