import FileQueue
import Foundation
import JetbridgeModel
import JetbridgeTestKit
import MessagePack
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A failed check inside a pipeline run; thrown because the run happens on a thread of its own (blocking process
/// waits must not occupy Swift's cooperative pool), where `#expect` has no test to report to.
struct PipelineFailure: Error, CustomStringConvertible {
    var description: String
}

/// Throws ``PipelineFailure`` with `message` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw PipelineFailure(description: message()) }
}

/// The whole pipeline as separate processes: `jetbridge-aggregator serve` and three `jetbridge-agent`s that capture
/// and then sync, over CURVE on ipc endpoints, with SIGKILLs in the middle.
@Suite("Pipeline", .serialized)
struct PipelineTests {
    /// A process left running in the background (the test kit's ``ExecutableRun``); its output goes to a file in
    /// the sandbox.
    final class Background {
        let process: ChildProcess
        let name: String
        let log: URL

        init(
            _ executable: URL, _ arguments: [String], in directory: URL, name: String,
            environment extra: [String: String] = [:]
        ) throws {
            self.name = name
            let run = try ExecutableRun(executable: executable, arguments, in: directory, environment: extra)
            process = run.process
            log = run.log
        }

        func kill9() {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }

        /// Waits for the exit, killing the process after `seconds` so a hung child cannot hang the suite.
        func wait(atMost seconds: Double) -> Int32 {
            let deadline = Date().addingTimeInterval(seconds)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
            }
            process.waitUntilExit()
            return process.terminationStatus
        }

        var output: String { (try? String(contentsOf: log, encoding: .utf8)) ?? "" }
    }

    /// One ground home and several agent homes under a temporary directory.
    struct Fleet {
        let sandbox: AgentSandbox
        let ground: URL
        let data: String
        let acks: String
        let serverKey: String

        /// - Parameter prepareGround: called with the ground's directory before anything is written there (a test
        ///   mounts a small file system on it).
        init(prepareGround: (URL) throws -> Void = { _ in }) throws {
            sandbox = try AgentSandbox()
            ground = sandbox.directory.appendingPathComponent("ground")
            try prepareGround(ground)
            data = "ipc://" + sandbox.directory.appendingPathComponent("data.ipc").path
            acks = "ipc://" + sandbox.directory.appendingPathComponent("acks.ipc").path
            let keys = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"), ["--home", ground.path, "keys", "generate"],
                in: sandbox.directory)
            try check(keys.status == 0, "\(keys)")
            serverKey = try String(
                contentsOf: ground.appendingPathComponent("keys/server.pub"), encoding: .utf8
            ).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func home(_ device: String) -> URL { sandbox.directory.appendingPathComponent(device) }

        func aggregator(_ arguments: [String]) throws -> AgentSandbox.Run {
            try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"), ["--home", ground.path] + arguments,
                in: sandbox.directory)
        }

        func agent(_ device: String, _ arguments: [String], stdin: Data? = nil) throws -> AgentSandbox.Run {
            try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-agent"), ["--home", home(device).path] + arguments,
                in: sandbox.directory, stdin: stdin)
        }

        /// Configures a device, generates its keys and, if `allow`, puts it on the ground's allow list.
        func enroll(_ device: String, allow: Bool = true) throws {
            try FileManager.default.createDirectory(at: home(device), withIntermediateDirectories: true)
            let configuration = """
                {"device": "\(device)",
                 "ground": {"data": "\(data)", "acks": "\(acks)", "serverPublicKey": "\(serverKey.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\""))"},
                 "sync": {"batchRecords": 10, "window": 1, "ackTimeoutSeconds": 0.5}}
                """
            try Data(configuration.utf8).write(to: home(device).appendingPathComponent("agent.json"))
            let keys = try agent(device, ["keys", "generate"])
            try check(keys.status == 0, "\(keys)")
            try check(keys.stdout.contains("jetbridge-aggregator devices allow "), "\(keys)")
            guard allow else { return }
            let publicKey = try String(
                contentsOf: home(device).appendingPathComponent("keys/device.pub"), encoding: .utf8
            ).trimmingCharacters(in: .whitespacesAndNewlines)
            // `--`: a Z85 key may start with `-`; `--home` goes before it (the aggregator moves it otherwise).
            let allowed = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"),
                ["devices", "allow", "--home", ground.path, "--", device, publicKey], in: sandbox.directory)
            try check(allowed.status == 0, "\(allowed)")
        }

        /// Orders and scans on one device; `sharedBag` is scanned by every device.
        func capture(_ device: String, orders: Int, bags: Int, sharedBag: UUID) throws {
            for index in 0..<orders {
                let run = try agent(
                    device,
                    [
                        "order", "--seat", "\(index + 1)\(["A", "B", "C"][index % 3])", "--item",
                        "Peanuts=\(index % 3 + 1)", "--item", "Chips",
                    ])
                try check(run.status == 0, "\(run)")
            }
            var origin = (0..<bags).map { _ in Tags.json() }
            origin.append(Tags.json(id: sharedBag))
            let scanned = try agent(
                device, ["scan", "--at", "origin"], stdin: Data(origin.joined(separator: "\n").utf8))
            try check(scanned.status == 0, "\(scanned)")
            // Half of this device's bags arrive; the others are missing.
            let arrived = origin.prefix(bags / 2).joined(separator: "\n")
            let destination = try agent(device, ["scan", "--at", "destination"], stdin: Data(arrived.utf8))
            try check(destination.status == 0, "\(destination)")
        }

        func records(_ device: String) throws -> [Record] {
            var payloads: [Data] = []
            try FileQueue.forEachRecord(directory: home(device).appendingPathComponent("queue")) { _, payload in
                payloads.append(Data(payload))
            }
            return try payloads.map { try MessagePackDecoder().decode(Record.self, from: $0) }
        }

        func acknowledged(_ device: String) -> UInt64 {
            (try? FileQueue.check(directory: home(device).appendingPathComponent("queue")).status.acknowledgedThrough)
                ?? 0
        }

        func serve() throws -> Background {
            try Background(
                AgentSandbox.executable("jetbridge-aggregator"),
                ["--home", ground.path, "serve", "--data", data, "--acks", acks], in: sandbox.directory, name: "serve")
        }

        /// Starts `sync --until-drained`, logging at debug level so a test can see the agent's link go down.
        func sync(_ device: String, _ extra: [String] = []) throws -> Background {
            try Background(
                AgentSandbox.executable("jetbridge-agent"),
                ["--home", home(device).path, "sync", "--until-drained", "--timeout", "90"] + extra,
                in: sandbox.directory, name: "sync-\(device)-\(UUID().uuidString.prefix(4))",
                environment: ["JETBRIDGE_LOG_LEVEL": "debug"])
        }
    }

    @Test("3 agents sync through an aggregator killed and restarted, one agent killed and restarted: exact totals")
    func killAndRestart() async throws {
        let note = try await onThreads(1) { _ in try Self.killAndRestartRun() }[0]
        // Not an assertion on timing, only a note of what this run exercised.
        print("pipeline: unacknowledged records at the kill: \(note)")
    }

    static func killAndRestartRun() throws -> String {
        let fleet = try Fleet()
        let devices = ["cart-1", "cart-2", "ramp-1"]
        let sharedBag = UUID()
        for device in devices {
            try fleet.enroll(device)
            try fleet.capture(device, orders: 4, bags: 1500, sharedBag: sharedBag)
        }
        // What the agents captured, totalled by the model: what the ground must report, nothing lost or doubled.
        let perDevice = try devices.map { try fleet.records($0) }
        let captured = perDevice.flatMap { $0 }
        let orders = captured.compactMap { if case .order(let order) = $0 { order } else { nil } }
        let scans = captured.compactMap { if case .scan(let scan) = $0 { scan } else { nil } }
        let expected = FlightReports(flights: try FlightReport.all(orders: orders, bags: BagState.bags(from: scans)))
        try check(
            expected.flights.first?.bags.checked == 3 * 1500 + 1, "every device's bags and the shared one: \(expected)")

        var serve = try fleet.serve()
        var syncs = try devices.map { try fleet.sync($0) }

        // Once cart-2 has its first acks, SIGKILL it and the aggregator together: batches are in flight on every side.
        // Both waits only set the scene (the checks below hold whatever it is): at their bound the run goes on.
        try? waitUntilBlocking("cart-2 has its first acks", timeout: .seconds(30), every: .milliseconds(5)) {
            fleet.acknowledged(devices[1]) > 0
        }
        serve.kill9()
        syncs[1].kill9()
        let unackedWhenKilled = zip(devices, perDevice).map { "\($0) \(UInt64($1.count) - fleet.acknowledged($0))" }
        // Restart once the agents still running have seen the ground go, so that they reconnect and resend (was a
        // fixed 300 ms pause: too short for a loaded machine, longer than needed on a quiet one).
        try? waitUntilBlocking("the running agents saw the ground go", timeout: .seconds(10), every: .milliseconds(20))
        {
            [syncs[0], syncs[2]].allSatisfy {
                !$0.process.isRunning || $0.output.contains("the link to the ground is down")
            }
        }
        serve = try fleet.serve()
        syncs[1] = try fleet.sync(devices[1])

        for (device, sync) in zip(devices, syncs) {
            let status = sync.wait(atMost: 90)
            try check(status == 0, "\(device): exit \(status)\n\(sync.output)")
            try check(sync.output.contains("sync drained"), "\(sync.output)")
        }
        let report = try fleet.aggregator(["report", "flights", "--format", "json"])
        try check(report.status == 0, "\(report)")
        let reported = try JSONDecoder().decode(FlightReports.self, from: Data(report.stdout.utf8))
        try check(reported == expected, "report:\n\(report.stdout)\nexpected from the agents' queues: \(expected)")
        for device in devices {
            let status = try fleet.agent(device, ["status", "--json"])
            try check(status.stdout.contains(#""unacknowledged" : 0"#), "\(status)")
        }

        // A device whose key the ground does not know: refused, nothing of it stored.
        try fleet.enroll("stranger", allow: false)
        try fleet.capture("stranger", orders: 2, bags: 3, sharedBag: UUID())
        let stranger = try fleet.agent("stranger", ["sync", "--until-drained", "--timeout", "2"])
        try check(stranger.status == 75, "\(stranger)")
        // A device configured with another device's id than its key's: told so at once, 65, nothing stored (before,
        // its hello was ignored and the answers went to the key's device: it resent until its timeout, then 75).
        try fleet.enroll("imposter")
        let configuration = fleet.home("imposter").appendingPathComponent("agent.json")
        let text = try String(contentsOf: configuration, encoding: .utf8)
        try text.replacingOccurrences(of: #""device": "imposter""#, with: #""device": "cart-9""#)
            .write(to: configuration, atomically: true, encoding: .utf8)
        try fleet.capture("imposter", orders: 1, bags: 1, sharedBag: UUID())
        let imposter = try fleet.agent("imposter", ["sync", "--until-drained", "--timeout", "20"])
        try check(imposter.status == 65, "\(imposter)")
        try check(imposter.stderr.contains("belongs to 'imposter'"), "\(imposter)")
        let after = try fleet.aggregator(["report", "flights", "--format", "json"])
        try check(try JSONDecoder().decode(FlightReports.self, from: Data(after.stdout.utf8)) == expected, "\(after)")

        kill(serve.process.processIdentifier, SIGTERM)
        try check(serve.wait(atMost: 30) == 0, "\(serve.output)")
        return unackedWhenKilled.joined(separator: ", ")
    }

    @Test("sync --help, keys generate refuses to overwrite, sync without keys or server key says what to do")
    func commandLine() async throws {
        _ = try await onThreads(1) { _ in try Self.commandLineRun() }
    }

    static func commandLineRun() throws {
        let sandbox = try AgentSandbox()
        let help = try sandbox.agent(["sync", "--help"])
        try check(help.status == 0, "\(help)")
        try check(help.stdout.contains("--until-drained"), "\(help)")
        let first = try sandbox.agent(["keys", "generate"])
        try check(first.status == 0, "\(first)")
        let attributes = try FileManager.default.attributesOfItem(
            atPath: sandbox.home.appendingPathComponent("keys/device.key").path)
        try check((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "device.key mode: \(attributes)")
        let again = try sandbox.agent(["keys", "generate"])
        try check(again.status == 73, "\(again)")
        try check(again.stderr.contains("--force"), "\(again)")
        let forced = try sandbox.agent(["keys", "generate", "--force"])
        try check(forced.status == 0, "\(forced)")

        let noServerKey = try sandbox.agent(["sync", "--until-drained", "--timeout", "1"])
        try check(noServerKey.status == 64, "\(noServerKey)")
        try check(noServerKey.stderr.contains("ground.serverPublicKey"), "\(noServerKey)")
        try FileManager.default.removeItem(at: sandbox.home.appendingPathComponent("keys"))
        let noKeys = try sandbox.agent(["sync", "--until-drained", "--timeout", "1"])
        try check(noKeys.status == 66, "\(noKeys)")
        try check(noKeys.stderr.contains("keys generate"), "\(noKeys)")
        let insecure = try sandbox.agent([
            "sync", "--insecure", "--until-drained", "--timeout", "1", "--to", "ipc:///nonexistent/x",
        ])
        try check(insecure.stderr.contains("WARNING: --insecure"), "\(insecure)")
        try check(insecure.status == 0, "an empty queue is drained: \(insecure)")
    }
}
