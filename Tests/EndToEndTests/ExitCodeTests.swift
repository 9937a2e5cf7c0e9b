import Foundation
import JetbridgeTestKit
import Testing

/// Issue 10: the two tools gave different exit codes for the same situation (a key pair that exists: 64 vs 69; a
/// missing `--config`: 66 vs 69; a bad endpoint: 64 vs 65). docs/EXIT-CODES.md has the one table both follow.
@Suite("Exit codes: the same situation gives the same code in both tools")
struct ExitCodeTests {
    struct Tools {
        let sandbox: AgentSandbox
        var ground: URL { sandbox.directory.appendingPathComponent("ground") }

        func agent(_ arguments: [String]) throws -> AgentSandbox.Run { try sandbox.agent(arguments) }

        func aggregator(_ arguments: [String]) throws -> AgentSandbox.Run {
            try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-aggregator"), ["--home", ground.path] + arguments,
                in: sandbox.directory)
        }
    }

    @Test func sameSituationSameCode() throws {
        let tools = Tools(sandbox: try AgentSandbox())

        // A key pair that exists, without --force: 73 (EX_CANTCREAT).
        #expect(try tools.agent(["keys", "generate"]).status == 0)
        #expect(try tools.aggregator(["keys", "generate"]).status == 0)
        let agentAgain = try tools.agent(["keys", "generate"])
        let groundAgain = try tools.aggregator(["keys", "generate"])
        #expect(agentAgain.status == 73 && agentAgain.stderr.contains("--force"), "\(agentAgain)")
        #expect(groundAgain.status == 73 && groundAgain.stderr.contains("--force"), "\(groundAgain)")

        // A --config file that does not exist: 66, with a message that names it (not Foundation's).
        let agentConfig = try tools.agent(["--config", "nope.json", "status"])
        let groundConfig = try tools.aggregator(["--config", "nope.json", "report", "flights"])
        for run in [agentConfig, groundConfig] {
            #expect(run.status == 66, "\(run)")
            #expect(run.stderr.contains("nope.json (from --config) does not exist"), "\(run)")
            #expect(!run.stderr.contains("could not be completed"), "\(run)")
        }

        // A malformed endpoint on the command line: 64; in a configuration file: 65.
        let agentFlag = try tools.agent(["sync", "--to", "tcp://nowhere", "--insecure"])
        let groundFlag = try tools.aggregator(["serve", "--data", "nowhere", "--insecure"])
        #expect(agentFlag.status == 64 && agentFlag.stderr.contains("--to"), "\(agentFlag)")
        #expect(groundFlag.status == 64 && groundFlag.stderr.contains("--data"), "\(groundFlag)")
        let agentFile = try tools.sandbox.write(
            #"{"ground": {"data": "tcp://nowhere", "acks": "tcp://127.0.0.1:5"}}"#, to: "agent.json")
        let groundFile = try tools.sandbox.write(#"{"dataEndpoint": "tcp://nowhere"}"#, to: "aggregator.json")
        let agentBad = try tools.agent(["--config", agentFile.path, "status"])
        let groundBad = try tools.aggregator(["--config", groundFile.path, "serve", "--insecure"])
        #expect(agentBad.status == 65 && agentBad.stderr.contains("ground.data"), "\(agentBad)")
        #expect(groundBad.status == 65 && groundBad.stderr.contains("dataEndpoint"), "\(groundBad)")
        // An ipc:// path longer than a Unix socket's address holds: refused as malformed before any socket.
        let longPath = "ipc://" + String(repeating: "x", count: 108)
        let agentLong = try tools.agent(["sync", "--to", longPath, "--acks", "tcp://127.0.0.1:5", "--insecure"])
        #expect(agentLong.status == 64 && agentLong.stderr.contains("at most 107 bytes"), "\(agentLong)")
        // A host only an aggregator binds (`*`) passes that check and is refused by libzmq when sync connects: 64
        // from the flag, 65 from the configuration file (before, 64 from either).
        #expect(try tools.agent(["order", "--seat", "1A", "--item", "Chips"]).status == 0)
        let starFlag = try tools.agent(["sync", "--to", "tcp://*:5560", "--acks", "tcp://127.0.0.1:5", "--insecure", "--timeout", "5"])
        #expect(starFlag.status == 64 && starFlag.stderr.contains("check --to/--acks"), "\(starFlag)")
        let starFile = try tools.sandbox.write(
            #"{"ground": {"data": "tcp://*:5560", "acks": "tcp://127.0.0.1:5"}}"#, to: "star.json")
        let starBad = try tools.agent(["--config", starFile.path, "sync", "--insecure", "--timeout", "5"])
        #expect(starBad.status == 65 && starBad.stderr.contains("ground.data/ground.acks in"), "\(starBad)")

        // A mistyped subcommand: 64 with a suggestion.
        let agentTypo = try tools.agent(["stauts"])
        let groundTypo = try tools.aggregator(["reprot"])
        #expect(agentTypo.status == 64 && agentTypo.stderr.contains("did you mean 'status'?"), "\(agentTypo)")
        #expect(groundTypo.status == 64 && groundTypo.stderr.contains("did you mean 'report'?"), "\(groundTypo)")

        // A home that cannot be created (its parent is a file): 73, not 1 or 69.
        let file = try tools.sandbox.write("not a directory", to: "plain-file")
        let agentHome = try AgentSandbox.run(
            AgentSandbox.executable("jetbridge-agent"),
            ["--home", file.path + "/home", "order", "--seat", "1A", "--item", "Chips"], in: tools.sandbox.directory)
        let groundHome = try AgentSandbox.run(
            AgentSandbox.executable("jetbridge-aggregator"), ["--home", file.path + "/home", "keys", "generate"],
            in: tools.sandbox.directory)
        #expect(agentHome.status == 73 && agentHome.stderr.contains(file.path), "\(agentHome)")
        #expect(groundHome.status == 73 && groundHome.stderr.contains(file.path), "\(groundHome)")
        // The home itself a file: 73 naming it for the commands that write there (capture, keys; before, 1 from the
        // first file made below it).
        for words in [["order", "--seat", "1A", "--item", "Chips"], ["keys", "generate"]] {
            let run = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-agent"), ["--home", file.path] + words, in: tools.sandbox.directory)
            #expect(run.status == 73 && run.stderr.contains("\(file.path): Not a directory"), "\(words): \(run)")
        }

        // --timeout -1 says why.
        let timeout = try tools.agent(["sync", "--timeout", "-1"])
        #expect(timeout.status == 64 && timeout.stderr.contains("positive number of seconds, not -1"), "\(timeout)")
    }

    /// What the agent reads must not read as nothing when it cannot be read: before, `status` and `set-aside list`
    /// showed an empty device with exit 0 (`FileManager.fileExists` and a failed listing both answer "none"), and
    /// `sync` said "no key pair" for keys it could not reach. The tests run as root, which no permission stops, so a
    /// file where a directory belongs stands in for a directory this user may not read (both are errors other than
    /// "does not exist"; docs/AGENT.md, "Exit codes and messages").
    @Test func whatCannotBeReadIsAnErrorNotNothing() throws {
        let sandbox = try AgentSandbox()
        #expect(try sandbox.agent(["order", "--seat", "1A", "--item", "Chips"]).status == 0)
        let rejected = sandbox.home.appendingPathComponent("rejected")
        try Data("not a directory".utf8).write(to: rejected)
        for words in [["status"], ["set-aside", "list"]] {
            let run = try sandbox.agent(words)
            #expect(run.status == 1 && run.stderr.contains("\(rejected.path): Not a directory"), "\(words): \(run)")
        }
        try FileManager.default.removeItem(at: rejected)
        let delivered = sandbox.home.appendingPathComponent("delivered")
        try Data("not a directory".utf8).write(to: delivered)
        let status = try sandbox.agent(["status"])
        #expect(status.status == 1 && status.stderr.contains("\(delivered.path): Not a directory"), "\(status)")
        try FileManager.default.removeItem(at: delivered)
        #expect(try sandbox.agent(["status"]).status == 0)
        // One flight's file in `delivered/` that cannot be read: not a flight that holds nothing.
        try FileManager.default.createDirectory(at: delivered, withIntermediateDirectories: false)
        let flightFile = delivered.appendingPathComponent("ZA101_2026-11-21.records")
        try FileManager.default.createDirectory(at: flightFile, withIntermediateDirectories: false)
        let flightStatus = try sandbox.agent(["status"])
        #expect(
            flightStatus.status == 1 && flightStatus.stderr.contains("cannot read \(flightFile.path)"),
            "\(flightStatus)")
        try FileManager.default.removeItem(at: delivered)

        // Keys the agent cannot reach are unreadable, not missing (no "run keys generate").
        let keys = sandbox.home.appendingPathComponent("keys")
        try Data("not a directory".utf8).write(to: keys)
        let sync = try sandbox.agent(["sync", "--timeout", "1"])
        #expect(sync.status == 65 && sync.stderr.contains("keys/device.key: Not a directory"), "\(sync)")
        #expect(!sync.stderr.contains("no key pair"), "\(sync)")
        // The ground reads its keys through the same code (KeyPairFiles).
        let ground = sandbox.directory.appendingPathComponent("ground")
        try FileManager.default.createDirectory(at: ground, withIntermediateDirectories: false)
        try Data("not a directory".utf8).write(to: ground.appendingPathComponent("keys"))
        let serve = try AgentSandbox.run(
            AgentSandbox.executable("jetbridge-aggregator"),
            ["--home", ground.path, "serve", "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"],
            in: sandbox.directory)
        #expect(serve.status == 65 && serve.stderr.contains("keys/server.key: Not a directory"), "\(serve)")
        #expect(!serve.stderr.contains("no server key pair"), "\(serve)")

        // A home that does not exist (a mistyped --home) is not synced as an empty one: 66, and nothing is created.
        let mistyped = sandbox.directory.appendingPathComponent("hmoe")
        let missing = try AgentSandbox.run(
            AgentSandbox.executable("jetbridge-agent"),
            ["--home", mistyped.path, "sync", "--insecure", "--timeout", "1"], in: sandbox.directory)
        #expect(missing.status == 66 && missing.stderr.contains("no device home at \(mistyped.path)"), "\(missing)")
        #expect(!FileManager.default.fileExists(atPath: mistyped.path))
        // With CURVE the keys are looked for first: the message says the home does not exist, not only that the
        // keys do not.
        let curve = try AgentSandbox.run(
            AgentSandbox.executable("jetbridge-agent"),
            ["--home", mistyped.path, "sync", "--server-key", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"],
            in: sandbox.directory)
        #expect(curve.status == 66 && curve.stderr.contains("no device home at \(mistyped.path)"), "\(curve)")
        #expect(curve.stderr.contains("check --home"), "\(curve)")
        #expect(!FileManager.default.fileExists(atPath: mistyped.path))
        // `status` on it is the same refusal, not `nothing captured` with exit 0 (before, a crew member with a typo in
        // --home read an empty device while the real one held records).
        for format in [["status"], ["status", "--json"]] {
            let status = try AgentSandbox.run(
                AgentSandbox.executable("jetbridge-agent"), ["--home", mistyped.path] + format, in: sandbox.directory)
            #expect(status.status == 66 && status.stderr.contains("no device home at \(mistyped.path)"), "\(status)")
            #expect(!status.stdout.contains("nothing captured"), "\(status)")
        }
        #expect(!FileManager.default.fileExists(atPath: mistyped.path))
    }

    @Test func aggregatorHelpHasExamplesAndExitCodes() throws {
        let tools = Tools(sandbox: try AgentSandbox())
        for help in [try tools.aggregator(["--help"]), try tools.agent(["--help"])] {
            #expect(help.status == 0)
            #expect(help.stdout.contains("Examples:") && help.stdout.contains("Exit codes"), "\(help)")
            #expect(help.stdout.contains("--config <file>") && help.stdout.contains("--home <dir>"), "\(help)")
        }
    }
}

@Suite("status while a sync runs")
struct StatusWhileSyncingTests {
    /// Issue 10: `status` said "last sync never" while a sync was running (its state was first written after 10 s).
    @Test func statusShowsARunningSync() throws {
        let sandbox = try AgentSandbox()
        #expect(try sandbox.agent(["scan", "--at", "origin", "--tag", Tags.json()]).status == 0)
        let home = sandbox.home.path
        // No ground listens on this endpoint: the sync runs, sending, until it is stopped.
        let sync = try PipelineTests.Background(
            AgentSandbox.executable("jetbridge-agent"),
            [
                "--home", home, "sync", "--insecure", "--to", "ipc://\(sandbox.directory.path)/nobody-data",
                "--acks", "ipc://\(sandbox.directory.path)/nobody-acks",
            ],
            in: sandbox.directory, name: "sync")
        defer { sync.kill9() }
        // Less than the 10 s between the running sync's later state writes: only a write at start shows in time.
        let deadline = Date().addingTimeInterval(8)
        var status = try sandbox.agent(["status"])
        // The state's own words: "(sync pid N running)" shows once the sync holds the home, a moment before it wrote
        // its first state (a loaded full run stopped waiting there and read "never").
        while !status.stdout.contains("running: "), Date() < deadline {
            usleep(50_000)
            status = try sandbox.agent(["status"])
        }
        #expect(
            status.stdout.contains("last sync       20") && status.stdout.contains("running: 0 records"), "\(status)")
        #expect(!status.stdout.contains("never"), "\(status)")
        // The running sync holds the home: status names it, and a second sync is refused (75, after 2 s) naming it.
        let pid = sync.process.processIdentifier
        #expect(status.stdout.contains("(sync pid \(pid) running)"), "\(status)")
        let second = try sandbox.agent(["sync", "--insecure", "--timeout", "5"])
        #expect(second.status == 75 && second.stderr.contains("another sync (pid \(pid)) is running"), "\(second)")
        // Killed, it leaves a state that says running; no one holds the lock, so status says at once that it stopped
        // without finishing (before, only once the state was 60 s old).
        sync.kill9()
        let after = try sandbox.agent(["status"])
        #expect(after.stdout.contains("no sync runs now: that one stopped without finishing"), "\(after)")
        #expect(!after.stdout.contains("sync pid"), "\(after)")
    }
}
