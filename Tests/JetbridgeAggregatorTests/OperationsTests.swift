import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeProtocol
import JetbridgeTestKit
import MessagePack
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The operator's side of `jetbridge-aggregator`, run as operators run it: real processes on a real home.
@Suite("Operations: lock, version, logs, metrics, status")
struct OperationsTests {
    typealias CLI = AggregatorCLITests

    /// A home with a key pair and one allowed device, and the `serve` arguments for kernel-chosen ports.
    static func home(_ fixture: Fixture) throws -> [String] {
        _ = try ServerKeys.generate(in: AggregatorHome(directory: fixture.directory), force: false)
        return ["--home", fixture.directory.path]
    }

    static let anyPorts = ["--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"]

    /// Waits until the log file at `url` contains `text` (or the process ends); returns the log.
    static func waitForLog(_ url: URL, _ text: String, process: ChildProcess) async throws -> String {
        var log = ""
        try await waitUntil("the log shows \(text)") {
            log = try String(contentsOf: url, encoding: .utf8)
            return log.contains(text) || !process.isRunning
        }
        return log
    }

    @Test func aSecondServeOnTheSameHomeIsRefusedNamingTheHomeAndThePID() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let (first, _, firstLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(firstLog, "aggregator serving", process: first)
        #expect(first.isRunning)

        // Without the lock the second one would serve on other ports: bounded by waitUntil, not waited on for good.
        let (second, _, secondLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        try await waitUntil("the second serve exits") { !second.isRunning }
        let refusal = try String(contentsOf: secondLog, encoding: .utf8)
        #expect(second.terminationStatus == 69)
        #expect(refusal.contains("pid \(first.processIdentifier)"), "\(refusal)")
        #expect(refusal.contains(fixture.directory.path), "\(refusal)")
        #expect(!refusal.contains("aggregator serving"))
        #expect(first.isRunning)

        // A holder killed with SIGKILL leaves the lock file, never the lock.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let (third, _, thirdLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if third.isRunning { kill(third.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(thirdLog, "aggregator serving", process: third)
        #expect(third.isRunning)
        #expect(HomeLock.holder(of: AggregatorHome(directory: fixture.directory)) == third.processIdentifier)
        third.terminate()
        third.waitUntilExit()
        #expect(third.terminationStatus == 0)
        #expect(HomeLock.holder(of: AggregatorHome(directory: fixture.directory)) == nil)
    }

    @Test func aStopRightAfterTheStartLineIsGracefulNotAKill() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        // The start-up line comes before the ServiceGroup listens for signals; a supervisor may stop at once.
        for _ in 0..<5 {
            let (process, _, log) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            _ = try await Self.waitForLog(log, "aggregator serving", process: process)
            process.terminate()
            try await waitUntil("serve exits") { !process.isRunning }
            #expect(process.terminationReason == .exit && process.terminationStatus == 0)
            #expect(try String(contentsOf: log, encoding: .utf8).contains("aggregator stopped"))
        }
    }

    /// Runs a built tool (`jetbridge-agent`, `jetbridge-queue`, …) next to the aggregator with `environment` added.
    static func tool(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], in directory: URL
    ) throws -> AggregatorCLITests.Output {
        let finished = try ExecutableRun.run(
            BuiltExecutable.expectedURL(name), arguments, in: directory, environment: environment)
        return .init(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    @Test func everyToolPrintsTheReleaseWireProtocolAndQueueFormatVersions() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        for name in ["jetbridge-agent", "jetbridge-aggregator", "jetbridge-queue"] {
            let output = try Self.tool(name, ["--version"], in: fixture.directory)
            #expect(output.status == 0)
            #expect(
                output.stdout
                    == "\(name) \(JetbridgeVersion.release) (wire protocol \(WireProtocol.version), queue format 1)\n")
            #expect(JetbridgeVersion.release.wholeMatch(of: /\d+\.\d+\.\d+/) != nil)
        }
    }

    @Test func aMalformedMetricsFlagIsAUsageError() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.appendingPathComponent("h").path]
        // As for --data and --acks: a bad flag value is 64 (docs/EXIT-CODES.md); the same value in aggregator.json 65.
        let bad = try Self.tool("jetbridge-aggregator", home + ["serve", "--metrics", "nonsense"], in: fixture.directory)
        #expect(bad.status == 64, "\(bad.stderr)")
        #expect(bad.stderr.contains("--metrics: the metrics endpoint 'nonsense' is not HOST:PORT"), "\(bad.stderr)")
    }

    @Test func badLogSettingsAreUsageErrorsInBothToolsFromFlagsAndEnvironment() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.appendingPathComponent("h").path]
        // `devices list` needs a home that exists (66 otherwise, issue 28).
        try FileManager.default.createDirectory(
            at: fixture.directory.appendingPathComponent("h"), withIntermediateDirectories: true)
        for name in ["jetbridge-agent", "jetbridge-aggregator"] {
            let command = name == "jetbridge-agent" ? ["status"] : ["devices", "list"]
            let badEnvironment = try Self.tool(
                name, home + command, environment: ["JETBRIDGE_LOG_LEVEL": "loud"], in: fixture.directory)
            #expect(badEnvironment.status == 64, "\(name): \(badEnvironment.stderr)")
            #expect(badEnvironment.stderr.contains("$JETBRIDGE_LOG_LEVEL: 'loud' is not a log level"))
            let badFlag = try Self.tool(name, home + ["--log-format", "xml"] + command, in: fixture.directory)
            #expect(badFlag.status == 64, "\(name): \(badFlag.stderr)")
            #expect(badFlag.stderr.contains("--log-format: 'xml' is not a log format"))
            let badFormat = try Self.tool(
                name, home + command, environment: ["JETBRIDGE_LOG_FORMAT": "yaml"], in: fixture.directory)
            #expect(badFormat.status == 64, "\(name): \(badFormat.stderr)")
            let good = try Self.tool(
                name, home + ["--log-level", "debug"] + command, environment: ["JETBRIDGE_LOG_FORMAT": "JSON"],
                in: fixture.directory)
            #expect(good.status == 0, "\(name): \(good.stderr)")
        }
        // The queue tool has no log options; it follows the environment, and refuses a bad value there the same way.
        let queue = fixture.directory.appendingPathComponent("h/queue").path
        for (variable, value, words) in [
            ("JETBRIDGE_LOG_FORMAT", "yaml", "is not a log format"), ("JETBRIDGE_LOG_LEVEL", "loud", "is not a log level"),
        ] {
            let bad = try Self.tool("jetbridge-queue", ["status", queue], environment: [variable: value], in: fixture.directory)
            #expect(bad.status == 64, "jetbridge-queue: \(bad.stderr)")
            #expect(bad.stderr.contains("Error: $\(variable): '\(value)' \(words)"), "\(bad.stderr)")
        }
        // A bad level beside JETBRIDGE_LOG_FORMAT=json is reported as JSON, by every tool.
        for (name, words) in [
            ("jetbridge-queue", ["status", queue]), ("jetbridge-agent", home + ["status"]),
            ("jetbridge-aggregator", home + ["devices", "list"]),
        ] {
            let run = try Self.tool(
                name, words, environment: ["JETBRIDGE_LOG_LEVEL": "loud", "JETBRIDGE_LOG_FORMAT": "json"],
                in: fixture.directory)
            #expect(run.status == 64, "\(name): \(run.stderr)")
            let line = run.stderr.split(separator: "\n").first.map(String.init) ?? ""
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["level"] as? String == "error", "\(name): \(run.stderr)")
            #expect((object?["message"] as? String)?.contains("is not a log level") == true, "\(name): \(run.stderr)")
        }
        // Help is printed whatever the environment says: asked for, through `help`, or by a command group.
        for (name, words) in [
            ("jetbridge-queue", ["--help"]), ("jetbridge-queue", ["status", "--help"]), ("jetbridge-agent", ["--help"]),
            ("jetbridge-agent", ["help", "sync"]), ("jetbridge-aggregator", ["keys"]), ("jetbridge-aggregator", ["serve", "--help"]),
        ] {
            let help = try Self.tool(name, words, environment: ["JETBRIDGE_LOG_LEVEL": "loud"], in: fixture.directory)
            #expect(help.status == 0, "\(name) \(words): \(help.stderr)")
            #expect((help.stdout + help.stderr).contains("USAGE"), "\(name) \(words): \(help.stdout)")
        }
    }

    @Test func serveWritesOneJSONObjectPerLineWithTheFiveFields() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let (process, _, log) = try CLI.start(
            home + ["serve", "--log-format", "json"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(log, "aggregator serving", process: process)
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        #expect(lines.count >= 3)
        for line in lines {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(Set(object.keys) == ["time", "level", "label", "message", "metadata"], "\(line)")
        }
        #expect(lines.contains { $0.contains(#""message":"aggregator serving""#) && $0.contains(#""data":"tcp://"#) })
    }

    @Test func aRefusedKeyUnderAReconnectLoopIsWarnedOnceWithItsKeyAndAddress() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let serverKey = try Z85.decode(
            try String(contentsOf: AggregatorHome(directory: fixture.directory).serverPublicKeyFile, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))
        let (process, _, log) = try CLI.start(
            home + ["serve", "--log-format", "json"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let started = try await Self.waitForLog(log, "aggregator serving", process: process)
        let data = try #require(started.firstMatch(of: /"data":"(tcp:\/\/[0-9.]+:[0-9]+)"/)?.output.1)

        // A device whose key is not on the allow list, opening a fresh connection after each refusal (libzmq does
        // not reconnect after a ZAP refusal; the agent does, with a new socket).
        let stranger = try CurveKeyPair.generate()
        let context = try ZeroMQContext()
        for _ in 0..<10 {
            let push = try context.socket(.push)
            try push.set(.linger, .zero)
            try push.makeCurveClient(keys: stranger, serverPublicKey: serverKey)
            let events = try push.monitor(events: .handshakeFailed)
            try push.connect(String(data))
            let event = await firstEvent(events) { _ in true }
            try push.close(linger: .zero)
            guard case .handshakeFailed(_, .authentication(status: 400)) = event else {
                Issue.record("expected a ZAP refusal, got \(String(describing: event))")
                break
            }
        }
        await context.terminate()
        process.terminate()
        process.waitUntilExit()

        let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        let warnings = lines.filter { $0.contains("refused a handshake") }
        #expect(warnings.count == 1, "\(warnings)")
        let warning = try #require(warnings.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(warning.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "warning")
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["key"] as? String == stranger.publicKeyZ85)
        #expect(metadata["address"] as? String == "127.0.0.1")
        #expect(metadata["result"] as? String == "refused-key")
        // All ten reached the handler: the final statistics count them.
        let final = try #require(lines.first { $0.contains(#""message":"final statistics""#) })
        let refused = try #require(final.firstMatch(of: /"refusedHandshakes":([0-9]+)/)?.output.1)
        #expect(Int(refused)! >= 10)
    }

    /// Issue 28: `status` listed one key that kept reconnecting ten times, one row per refusal. Refusals are grouped
    /// by key (and result and address) with a count and the latest time.
    @Test func statusGroupsRefusedHandshakesByKeyWithACount() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let serverKey = try Z85.decode(
            try String(contentsOf: AggregatorHome(directory: fixture.directory).serverPublicKeyFile, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))
        let (process, _, log) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let started = try await Self.waitForLog(log, "aggregator serving", process: process)
        let data = try #require(started.firstMatch(of: /data=(tcp:\/\/[0-9.]+:[0-9]+)/)?.output.1)
        let strangers = [try CurveKeyPair.generate(), try CurveKeyPair.generate()]
        let context = try ZeroMQContext()
        for (stranger, times) in [(strangers[0], 7), (strangers[1], 2)] {
            for _ in 0..<times {
                let push = try context.socket(.push)
                try push.set(.linger, .zero)
                try push.makeCurveClient(keys: stranger, serverPublicKey: serverKey)
                let events = try push.monitor(events: .handshakeFailed)
                try push.connect(String(data))
                _ = await firstEvent(events) { _ in true }
                try push.close(linger: .zero)
            }
        }
        await context.terminate()
        var text = ""
        try await waitUntil("status shows the nine refusals") {
            text = try CLI.run(home + ["status"], in: fixture.directory).stdout
            return text.contains("refused-key 9")
        }
        let rows = text.split(separator: "\n").filter { $0.contains("refused-key") && !$0.contains("handshakes") }
        #expect(rows.count == 2, "\(text)")
        #expect(text.contains("COUNT"), "\(text)")
        for (stranger, times) in [(strangers[0], 7), (strangers[1], 2)] {
            let row = rows.first { $0.contains(stranger.publicKeyZ85) }
            #expect(row?.hasSuffix("  \(times)") == true, "\(text)")
        }
        process.terminate()
        process.waitUntilExit()
    }

    @Test func aClientWithAWrongServerKeyIsWarnedAboutOnceAsAFailedHandshake() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let (process, _, log) = try CLI.start(
            home + ["serve", "--log-format", "json"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let started = try await Self.waitForLog(log, "aggregator serving", process: process)
        let data = try #require(started.firstMatch(of: /"data":"(tcp:\/\/[0-9.]+:[0-9]+)"/)?.output.1)

        // Five fresh connections that believe in another server key: CURVE fails before ZAP is asked.
        let attackStarted = ContinuousClock.now
        let wrongServer = try CurveKeyPair.generate()
        let context = try ZeroMQContext()
        for _ in 0..<5 {
            let push = try context.socket(.push)
            try push.set(.linger, .zero)
            try push.makeCurveClient(keys: try CurveKeyPair.generate(), serverPublicKey: wrongServer.publicKey)
            let events = try push.monitor(events: [.handshakeFailed, .disconnected])
            try push.connect(String(data))
            _ = await firstEvent(events) { _ in true }
            try push.close(linger: .zero)
        }
        await context.terminate()
        var lines: [Substring] = []
        try await waitUntil("the failures are counted") {
            let status = try CLI.run(["--home", fixture.directory.path, "status", "--json"], in: fixture.directory)
            // At least 5: libzmq may retry a connection once before it is closed.
            let count = status.stdout.firstMatch(of: /"failed" : ([0-9]+)/).flatMap { Int($0.output.1) } ?? 0
            return count >= 5
        }
        process.terminate()
        process.waitUntilExit()
        lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        // One warning per socket and cause every 300 s (HandshakeMonitor.warningInterval): the five wrong-key
        // failures give exactly one. A loaded machine may also make a connection fail another way (seen: "failed
        // without detail (Connection reset by peer)" when the client's close beat its handshake); that cause has a
        // warning of its own, at most one too.
        let warnings = lines.filter { $0.contains("a handshake on the data socket failed") }
        let wrongKey = warnings.filter { $0.contains("another server public key") }
        #expect(wrongKey.count == 1, "\(warnings)")
        // The cause is everything up to the rate note: "failed without detail (104)" and "(32)" are two causes.
        let causes = warnings.map { $0.firstMatch(of: /failed: (.*?) \(at most one warning/)?.output.1 }
        #expect(Set(causes).count == warnings.count, "\(warnings)")
        #expect(warnings.allSatisfy { $0.contains(#""level":"warning""#) }, "\(warnings)")
        #expect(ContinuousClock.now - attackStarted < .seconds(300), "the test outlasted one warning interval")
    }

    @Test func statusDescribesTheRunningServeAndExits69WhenNoneRuns() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let homeURL = AggregatorHome(directory: fixture.directory)
        let serverKey = try Z85.decode(
            try String(contentsOf: homeURL.serverPublicKeyFile, encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines))
        let keys = try CurveKeyPair.generate()
        #expect(try CLI.run(home + ["devices", "allow", "cart-1", "--", keys.publicKeyZ85], in: fixture.directory).status == 0)

        let never = try CLI.run(home + ["status"], in: fixture.directory)
        #expect(never.status == 69)
        #expect(never.stderr.contains("no jetbridge-aggregator serve is running on the home \(fixture.directory.path)"))

        let (process, _, log) = try CLI.start(
            home + ["serve", "--metrics", "127.0.0.1:0"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let started = try await Self.waitForLog(log, "aggregator serving", process: process)
        let data = try #require(started.firstMatch(of: /data=(tcp:\/\/[0-9.]+:[0-9]+)/)?.output.1)
        let acks = try #require(started.firstMatch(of: /acks=(tcp:\/\/[0-9.]+:[0-9]+)/)?.output.1)

        // One device sends 3 orders, acked stored.
        let device = try TestDevice(
            id: "cart-1", keys: keys, serverKey: serverKey, data: String(data), acks: String(acks),
            routingID: Data("cart-1-0123456789abcdef".utf8))
        try device.send(try outgoing("cart-1", 1, [order(1), order(2), order(3)]))
        let ack = try #require(try await device.ack())
        #expect(ack.status == .stored)
        device.close()

        // The status file is rewritten every 2 s: wait until it shows the batch.
        var json = ""
        try await waitUntil("status --json shows cart-1's batch") {
            let output = try CLI.run(home + ["status", "--json"], in: fixture.directory)
            json = output.stdout
            return output.status == 0 && json.contains(#""stored" : 1"#)
        }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["running"] as? Bool == true)
        #expect(object["pid"] as? Int == Int(process.processIdentifier))
        #expect(object["version"] as? String == JetbridgeVersion.release)
        #expect(object["notReady"] == nil)
        let devices = try #require(object["devices"] as? [[String: Any]])
        #expect(devices.first?["device"] as? String == "cart-1")
        #expect((devices.first?["records"] as? [String: Int])?["new"] == 3)
        #expect((object["totals"] as? [String: Int])?["newRecords"] == 3)
        #expect((object["endpoints"] as? [String: Any])?["data"] as? String == String(data))
        #expect(object["lastCommitAt"] is String)

        let text = try CLI.run(home + ["status"], in: fixture.directory)
        #expect(text.status == 0)
        for expected in [
            "pid \(process.processIdentifier)", "ready             yes", String(data), "cart-1", "handshakes",
            "version           \(JetbridgeVersion.release)", "metrics           http://127.0.0.1:",
        ] {
            #expect(text.stdout.contains(expected), "\(expected) in \(text.stdout)")
        }

        process.terminate()
        process.waitUntilExit()
        let stopped = try CLI.run(home + ["status"], in: fixture.directory)
        #expect(stopped.status == 69)
        #expect(stopped.stderr.contains("no jetbridge-aggregator serve is running"))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.appendingPathComponent("status.json").path))
    }

    /// A `serve` killed with SIGKILL leaves its last `status.json`; the next `serve` holds the lock at once but writes
    /// its own status only once its store is open. Before, `status` showed the dead process's file in between: exit 0,
    /// ready, its pid and counts. Now a file whose pid is not the lock holder's is not shown: 75, as before a first
    /// status. The new holder here is this test process, which takes the home's lock as a starting `serve` does.
    @Test func statusNeverShowsTheStatusOfAServeThatWasKilled() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let (process, _, log) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(log, "aggregator serving", process: process)
        try await waitUntil("serve writes its status") {
            try CLI.run(home + ["status", "--json"], in: fixture.directory).status == 0
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let statusFile = fixture.directory.appendingPathComponent("status.json")
        #expect(FileManager.default.fileExists(atPath: statusFile.path))
        #expect(try CLI.run(home + ["status"], in: fixture.directory).status == 69)

        let lock = try HomeLock(home: AggregatorHome(directory: fixture.directory))
        defer { lock.release() }
        for words in [["status"], ["status", "--json"]] {
            let starting = try CLI.run(home + words, in: fixture.directory)
            #expect(starting.status == 75, "\(words): \(starting)")
            #expect(starting.stderr.contains("(pid \(getpid())) is running") && starting.stderr.contains("has not written its status yet"), "\(starting)")
            #expect(starting.stdout.isEmpty && !starting.stderr.contains("pid \(process.processIdentifier)"), "\(starting)")
        }
    }
}
