import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 28: what a new user met in the first hour, each run as that user ran it: the built tools, a fresh directory.
@Suite("First hour: help, spellings, hints, JSON logs, the terminal")
struct FirstHourTests {
    /// One rule for a flight typed by a person, in both tools: any case, surrounding spaces ignored, stored and shown
    /// upper case. `report --flight za101/…` was "not a flight id" (64) while the agent took `--flight za101/…`.
    @Test func aFlightIsTypedInAnyCaseInBothTools() throws {
        let sandbox = try AgentSandbox()
        let order = try sandbox.agent(["order", "--seat", "1A", "--item", "Chips", "--flight", "za777/2026-11-26"])
        #expect(order.status == 0 && order.stdout.contains("flight ZA777/2026-11-26"), "\(order)")
        let ground = sandbox.directory.appendingPathComponent("ground").path
        #expect(try sandbox.aggregator(["--home", ground, "store", "migrate"]).status == 0)
        for kind in ["flights", "items", "luggage"] {
            let report = try sandbox.aggregator(
                ["--home", ground, "report", kind, "--flight", " za777/2026-11-26 "])
            #expect(report.status == 0, "report \(kind): \(report)")
        }
        // And both refuse what is no flight at all, saying what one looks like.
        let agentBad = try sandbox.agent(["order", "--seat", "1A", "--item", "Chips", "--flight", "za/2026"])
        let groundBad = try sandbox.aggregator(["--home", ground, "report", "flights", "--flight", "za/2026"])
        for run in [agentBad, groundBad] {
            #expect(run.status != 0 && run.stderr.contains("ZA101/2026-11-21"), "\(run)")
        }
    }

    /// `devices list` on a home that does not exist printed nothing and exited 0, while `devices allow` refused it
    /// (66): a listing pasted without the ground's --home looked like an empty allow list.
    @Test(arguments: [["devices", "list"], ["devices", "revoke", "cart-1"], ["devices", "allow", "cart-1", "x"]])
    func devicesOnAHomeThatDoesNotExistExit66(command: [String]) throws {
        let sandbox = try AgentSandbox()
        let missing = sandbox.directory.appendingPathComponent("no-such-ground").path
        let key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
        let arguments = command.last == "x" ? Array(command.dropLast()) + ["--", key] : command
        let run = try sandbox.aggregator(["--home", missing] + arguments)
        #expect(run.status == 66, "\(command): \(run)")
        #expect(run.stderr.contains("there is no aggregator home at \(missing)"), "\(run)")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    /// Hints that name a command keep the home the user gave: "run `jetbridge-agent keys generate`" sent a user of
    /// `--home cart-9` to generate keys in the default home.
    @Test func hintsKeepTheUsersHome() throws {
        let sandbox = try AgentSandbox()
        let home = sandbox.home.path
        let noKeys = try sandbox.agent(["sync", "--server-key", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"])
        #expect(noKeys.status == 66, "\(noKeys)")
        #expect(noKeys.stderr.contains("`jetbridge-agent --home \(home) keys generate`"), "\(noKeys)")

        #expect(try sandbox.agent(["scan", "--at", "origin", "--tag", Tags.json()]).status == 0)
        let nobody = "ipc://\(sandbox.directory.path)/nobody"
        let timedOut = try sandbox.agent([
            "sync", "--insecure", "--to", nobody + "-data", "--acks", nobody + "-acks", "--timeout", "1",
        ])
        #expect(timedOut.status == 75, "\(timedOut)")
        #expect(timedOut.stderr.contains("run `jetbridge-agent --home \(home) sync` again"), "\(timedOut)")

        let ground = sandbox.directory.appendingPathComponent("ground").path
        #expect(try sandbox.aggregator(["--home", ground, "keys", "generate"]).status == 0)
        let status = try sandbox.aggregator(["--home", ground, "status"])
        #expect(status.status == 69, "\(status)")
        #expect(status.stderr.contains("`jetbridge-aggregator --home \(ground) serve`"), "\(status)")

        // The default home needs no --home in a hint.
        let plain = try sandbox.agentWithoutHome(["sync", "--server-key", "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"])
        #expect(plain.status == 66 && plain.stderr.contains("run `jetbridge-agent keys generate`"), "\(plain)")
    }
}
