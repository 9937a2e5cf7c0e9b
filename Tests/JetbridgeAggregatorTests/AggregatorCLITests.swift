import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The built `jetbridge-aggregator` executable, run as operators run it.
@Suite("CLI: the jetbridge-aggregator executable")
struct AggregatorCLITests {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static var binary: URL { BuiltExecutable.expectedURL("jetbridge-aggregator") }

    /// Starts the executable with output going to files in `directory` (no pipe to fill up).
    /// Starts the aggregator with `arguments` in `directory` (the test kit's ``ExecutableRun``, streams apart).
    static func start(_ arguments: [String], in directory: URL) throws -> (ChildProcess, stdout: URL, stderr: URL) {
        let run = try ExecutableRun(executable: binary, arguments, in: directory, output: .separate)
        return (run.process, run.log, run.errorLog)
    }

    static func run(_ arguments: [String], in directory: URL) throws -> Output {
        let finished = try ExecutableRun.run(binary, arguments, in: directory)
        return Output(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    /// A public key whose Z85 text starts with '-'.
    static func dashKey() throws -> String {
        while true {
            let key = try CurveKeyPair.generate().publicKeyZ85
            if key.hasPrefix("-") { return key }
        }
    }

    @Test func keysGenerateWritesAnOwnerOnlySecretAndRefusesToOverwrite() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = fixture.directory.path
        let first = try Self.run(["--home", home, "keys", "generate"], in: fixture.directory)
        #expect(first.status == 0)
        let key = first.stdout.trimmingCharacters(in: .newlines)
        #expect(key.count == 40)
        #expect((try? Z85.decode(key))?.count == 32)
        let secret = AggregatorHome(directory: fixture.directory).serverSecretKeyFile.path
        let mode = try FileManager.default.attributesOfItem(atPath: secret)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        let again = try Self.run(["keys", "generate", "--home", home], in: fixture.directory)
        #expect(again.status == 73)
        #expect(again.stderr.contains("--force"))
        let forced = try Self.run(["--home", home, "keys", "generate", "--force"], in: fixture.directory)
        #expect(forced.status == 0)
        #expect(forced.stdout != first.stdout)
    }

    @Test func devicesAllowListAndRevokeKeepAValidAllowList() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.path]
        let key = try CurveKeyPair.generate().publicKeyZ85
        #expect(try Self.run(home + ["devices", "allow", "bad id!", "--", key], in: fixture.directory).status == 65)
        let badKey = try Self.run(home + ["devices", "allow", "cart-1", "not-a-key"], in: fixture.directory)
        #expect(badKey.status == 65)
        #expect(badKey.stderr.contains("Z85"))
        // `--`: a Z85 key may start with '-'; this one does.
        let dashKey = try Self.dashKey()
        #expect(try Self.run(home + ["devices", "allow", "cart-0", "--", dashKey], in: fixture.directory).status == 0)
        #expect(try Self.run(home + ["devices", "revoke", "cart-0"], in: fixture.directory).status == 0)
        let allowed = try Self.run(home + ["devices", "allow", "cart-1", "--", key], in: fixture.directory)
        #expect(allowed.status == 0 && allowed.stdout == "allowed cart-1\n", "\(allowed)")
        // Another key for an id already allowed replaces it, and says so; the same key again is no replacement.
        let other = try CurveKeyPair.generate().publicKeyZ85
        let replaced = try Self.run(home + ["devices", "allow", "cart-1", "--", other], in: fixture.directory)
        #expect(replaced.status == 0 && replaced.stdout.contains("replacing the key it had"), "\(replaced)")
        #expect(try Self.run(home + ["devices", "list"], in: fixture.directory).stdout == "cart-1\t\(other)\n")
        #expect(try Self.run(home + ["devices", "allow", "cart-1", "--", key], in: fixture.directory).status == 0)
        let same = try Self.run(home + ["devices", "allow", "cart-1", "--", key], in: fixture.directory)
        #expect(same.status == 0 && same.stdout == "allowed cart-1\n", "\(same)")
        #expect(try Self.run(home + ["devices", "list"], in: fixture.directory).stdout == "cart-1\t\(key)\n")
        let list = try DeviceAllowlist.load(from: AggregatorHome(directory: fixture.directory).devicesFile)
        #expect(list.byPublicKey == [key: "cart-1"])
        #expect(try Self.run(home + ["devices", "revoke", "cart-1"], in: fixture.directory).status == 0)
        // Issue 10: the agent's hint pasted without the ground's --home created ./.jetbridge/aggregator/devices.json,
        // where `serve` never looks; a home that does not exist is refused instead.
        let elsewhere = try Self.run(["devices", "allow", "cart-1", "--", key], in: fixture.directory)
        #expect(elsewhere.status == 66 && elsewhere.stderr.contains("--home"), "\(elsewhere.stderr)")
        // The home is checked first, as revoke and list check it: a bad key there is still 66, not 65.
        let elsewhereBadKey = try Self.run(["devices", "allow", "cart-1", "not-a-key"], in: fixture.directory)
        #expect(elsewhereBadKey.status == 66 && elsewhereBadKey.stderr.contains("--home"), "\(elsewhereBadKey.stderr)")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.appendingPathComponent(".jetbridge").path))
        #expect(try Self.run(home + ["devices", "list"], in: fixture.directory).stdout == "")
        #expect(try Self.run(home + ["devices", "revoke", "cart-1"], in: fixture.directory).status == 65)
    }

    /// Issue 16, item 8: `devices allow` accepted `.`, `..` and `CON`.
    @Test(arguments: [".", "..", "CON", "nul", "Com1", "lpt9.txt", "-cart", ".hidden", "cart."])
    func devicesAllowRefusesIdsThatReadAsPathsOrReservedNames(device: String) throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let key = try CurveKeyPair.generate().publicKeyZ85
        let result = try Self.run(
            ["--home", fixture.directory.path, "devices", "allow", "--", device, key], in: fixture.directory)
        #expect(result.status == 65)
        #expect(result.stderr.contains("invalid device id"))
        #expect(!FileManager.default.fileExists(atPath: AggregatorHome(directory: fixture.directory).devicesFile.path))
    }

    @Test func reportsAndReceiptsReadTheStore() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.path]
        let missing = try Self.run(home + ["report", "flights"], in: fixture.directory)
        #expect(missing.status == 69)
        #expect(missing.stderr.contains("no store"))

        let store = try fixture.open()
        _ = try store.apply([batch("cart-1", 1, [order(1, lines: [(chips, 2)]), scan(10, tag: 1)])])
        try store.close()
        let json = try Self.run(home + ["report", "flights", "--format", "json"], in: fixture.directory)
        #expect(json.status == 0)
        #expect(
            json.stdout == """
                {"flights":[{"flight":"ZA101/2026-11-21","currency":"USD","orders":1,"revenue":600,\
                "items":[{"name":"Chips","count":2,"revenue":600}],\
                "bags":{"checked":1,"departed":1,"arrived":0,"missing":1,"weight":42.0,"conflicts":0}}]}

                """)
        let file = fixture.directory.appendingPathComponent("flights.json")
        let written = try Self.run(
            home + ["report", "flights", "--format", "json", "--output", file.path], in: fixture.directory)
        #expect(written.status == 0 && written.stdout.isEmpty)
        #expect(try String(contentsOf: file, encoding: .utf8) == json.stdout)
        // What the ground writes is private to its account (umask 077), whatever the caller's umask.
        #expect(try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int == 0o600)
        // CSV ends in CR LF, once: no blank line (an empty record) after it on standard output.
        let csv = try Self.run(home + ["report", "flights", "--format", "csv"], in: fixture.directory)
        #expect(csv.status == 0 && csv.stdout.hasSuffix("\r\n") && !csv.stdout.hasSuffix("\r\n\n"))
        let table = try Self.run(home + ["report", "devices"], in: fixture.directory)
        #expect(table.status == 0 && table.stdout.contains("cart-1"))
        // Issue 10 refused `--flight` for devices (it was silently ignored); issue 25 made it the flight's fleet.
        let devicesFlight = try Self.run(
            home + ["report", "devices", "--flight", "ZA101/2026-11-21"], in: fixture.directory)
        #expect(devicesFlight.status == 0 && devicesFlight.stdout.contains("Announced"), "\(devicesFlight)")
        #expect(try Self.run(home + ["report", "flights", "--format", "xml"], in: fixture.directory).status == 64)
        #expect(try Self.run(home + ["report", "flights", "--flight", "ZA101"], in: fixture.directory).status == 64)
        // Issue 10: `--output` into a missing directory created it; now exit 73 (EX_CANTCREAT), nothing created.
        let nowhere = fixture.directory.appendingPathComponent("no/such/dir/flights.json")
        let cannot = try Self.run(home + ["report", "flights", "--output", nowhere.path], in: fixture.directory)
        #expect(cannot.status == 73 && cannot.stderr.contains("does not exist"))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.appendingPathComponent("no").path))
        let missingBags = try Self.run(home + ["report", "luggage", "--status", "missing"], in: fixture.directory)
        #expect(missingBags.status == 0 && missingBags.stdout.contains("(no luggage)"))
        let inTransit = try Self.run(home + ["report", "luggage", "--status", "in-transit"], in: fixture.directory)
        #expect(inTransit.status == 0 && inTransit.stdout.contains("in-transit"))

        // Issue 10, defect 7: the summary tells rewritten receipts from current ones.
        let rebuilt = try Self.run(home + ["receipts", "rebuild"], in: fixture.directory)
        #expect(rebuilt.status == 0)
        #expect(
            rebuilt.stdout == "receipts rebuilt: 1 receipt, 1 rewritten, 0 already current; 0 stale files removed\n")
        let again = try Self.run(home + ["receipts", "rebuild"], in: fixture.directory)
        #expect(
            again.stdout == "receipts rebuilt: 1 receipt, 0 rewritten, 1 already current; 0 stale files removed\n")
        #expect(
            FileManager.default.fileExists(
                atPath: fixture.receipts.appendingPathComponent("ZA101_2026-11-21_17B.txt").path))
    }

    @Test func configurationErrorsNameTheirCauseAndFlagsOverrideTheFile() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = ["--home", fixture.directory.path]
        let config = AggregatorHome(directory: fixture.directory).configurationFile
        try Data(#"{"dataEndpoint": "tcp://127.0.0.1:*", "transactionMaxBatchez": 3}"#.utf8).write(to: config)
        let unknown = try Self.run(home + ["serve", "--insecure"], in: fixture.directory)
        #expect(unknown.status == 65)
        #expect(unknown.stderr.contains("'transactionMaxBatchez'"))

        try Data(#"{"dataEndpoint": "tcp://127.0.0.1:*", "acksEndpoint": "tcp://127.0.0.1:*"}"#.utf8).write(to: config)
        let noKeys = try Self.run(home + ["serve"], in: fixture.directory)
        #expect(noKeys.status == 66)
        #expect(noKeys.stderr.contains("keys generate"))

        // The file says any port; the flag names one that is taken.
        let context = try ZeroMQContext()
        let squatter = try context.socket(.pull)
        try squatter.bind("tcp://127.0.0.1:*")
        let taken = try squatter.lastEndpoint
        let busy = try Self.run(home + ["serve", "--insecure", "--data", taken], in: fixture.directory)
        #expect(busy.status == 69)
        #expect(busy.stderr.contains("\(taken) is in use"))
        #expect(busy.stderr.contains("INSECURE"))
        try squatter.close(linger: .zero)
        context.terminate()
        #expect(try Self.run(["serve", "--bogus"], in: fixture.directory).status == 64)

        // The same code for the same situation (docs/EXIT-CODES.md): an HTTP address this host does not have is a
        // setting to fix, 65, as for the data endpoint; a configuration file that cannot be read is 66, as for the
        // agent; a home that cannot be created is 73.
        // (Where the kernel binds addresses it does not have, `ip_nonlocal_bind`, serve would start and serve.)
        let nonlocalBind = try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_nonlocal_bind", encoding: .utf8)
        if nonlocalBind?.hasPrefix("0") == true {
            let elsewhere = try Self.run(
                home + ["serve", "--insecure", "--metrics", "192.0.2.1:9560"], in: fixture.directory)
            #expect(elsewhere.status == 65, "\(elsewhere.stderr)")
            #expect(elsewhere.stderr.contains("cannot bind the metrics"), "\(elsewhere.stderr)")
        }
        let unreadable = try Self.run(
            ["--config", fixture.directory.path] + home + ["store", "migrate"], in: fixture.directory)
        #expect(unreadable.status == 66, "\(unreadable.stderr)")
        #expect(unreadable.stderr.contains("cannot read configuration file"), "\(unreadable.stderr)")
        let notADirectory = fixture.directory.appendingPathComponent("aggregator.json/home").path
        let noHome = try Self.run(["--home", notADirectory, "keys", "generate"], in: fixture.directory)
        #expect(noHome.status == 73, "\(noHome.stderr)")
        #expect(noHome.stderr.contains("cannot create home directory"), "\(noHome.stderr)")
    }

    /// SIGTERM while a device streams batches: the process exits 0 and every batch it acked is in the store; a report
    /// runs while it serves.
    @Test func sigtermDuringAStreamLosesNoAckedBatch() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let homeURL = AggregatorHome(directory: fixture.directory)
        let home = ["--home", fixture.directory.path]
        let serverKey = try Z85.decode(ServerKeys.generate(in: homeURL, force: false))
        let keys = try CurveKeyPair.generate()
        #expect(
            try Self.run(home + ["devices", "allow", "cart-1", "--", keys.publicKeyZ85], in: fixture.directory).status
                == 0)
        let (process, _, stderr) = try Self.start(
            home + ["serve", "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"], in: fixture.directory)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        var log = ""
        try await waitUntil("the aggregator logs its endpoints") {
            log = try String(contentsOf: stderr, encoding: .utf8)
            return log.contains("aggregator serving") || !process.isRunning
        }
        func endpoint(_ name: String) throws -> String {
            let match = try #require(log.firstMatch(of: try Regex("\(name)=(tcp://[0-9.]+:[0-9]+)")))
            return String(try #require(match.output[1].substring))
        }
        let data = try endpoint("data")
        let acks = try endpoint("acks")

        let device = try TestDevice(
            id: "cart-1", keys: keys, serverKey: serverKey, data: data, acks: acks, sendHighWaterMark: 8)
        let (push, dealer) = (device.push, device.dealer)

        let perBatch = 20
        var acked: [Ack] = []
        var sent = 0
        var terminated = false
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning && ContinuousClock.now < deadline {
            let records = (0..<perBatch).map { order(sent * perBatch + $0, seat: "\($0 % 30 + 1)A") }
            do {
                try push.send(try outgoing("cart-1", UInt64(sent * perBatch + 1), records).frames(), options: .dontWait)
                sent += 1
            } catch let error as ZeroMQError where error.isTryAgain {}
            if try poll([PollItem(dealer, .readable)], timeout: .milliseconds(5))[0].contains(.readable) {
                while let frame = try dealer.receive(options: .dontWait) {
                    acked.append(try WireCoding.decode(Ack.self, from: frame))
                }
            }
            if !terminated && acked.count >= 20 {
                // Reports read their own snapshot while serve writes.
                let report = try Self.run(home + ["report", "devices", "--format", "csv"], in: fixture.directory)
                #expect(report.status == 0 && report.stdout.contains("cart-1,"))
                process.terminate()  // SIGTERM, mid-stream
                terminated = true
            }
        }
        // Acks sent just before exit are still arriving.
        while try poll([PollItem(dealer, .readable)], timeout: .milliseconds(300))[0].contains(.readable) {
            if let frame = try dealer.receive() { acked.append(try WireCoding.decode(Ack.self, from: frame)) }
        }
        device.close()
        process.waitUntilExit()
        #expect(terminated)
        #expect(process.terminationStatus == 0)
        #expect(process.terminationReason == .exit)

        let store = try fixture.open()
        let stored = Set(try store.orders().map(\.id))
        #expect(acked.allSatisfy { $0.status == .stored })
        for ack in acked {
            for sequence in ack.first...ack.last {
                #expect(stored.contains(uuid(Int(sequence) - 1)), "acked record \(sequence) is not in the store")
            }
        }
        #expect(acked.count >= 20)
    }
}
