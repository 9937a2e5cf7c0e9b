import Foundation
import Testing

@Suite("Command line: help, usage errors, exit codes")
struct CommandLineTests {
    @Test("--help on every command exits 0 and shows usage", arguments: [[], ["order"], ["scan"], ["status"]])
    func help(command: [String]) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agentWithoutHome(command + ["--help"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("USAGE: jetbridge-agent"), "\(run)")
        if command.isEmpty {
            for subcommand in ["order", "scan", "status"] { #expect(run.stdout.contains(subcommand)) }
            #expect(run.stdout.contains("75 try again later"))
        }
    }

    /// Issue 28: the agent's subcommands hid `--home`, `--config` and the log flags in their `--help` (the
    /// aggregator's showed them): a user reading `sync --help` could not learn how to point it at a home. Both tools'
    /// leaf commands now include the one set of global options (JetbridgeCLI's `GlobalOptions`).
    @Test(arguments: [["order"], ["scan"], ["status"], ["sync"], ["keys", "generate"]])
    func subcommandHelpShowsTheGlobalOptions(command: [String]) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agentWithoutHome(command + ["--help"])
        #expect(run.status == 0, "\(run)")
        for option in ["--home <dir>", "--config <file>", "--log-level <level>", "--log-format <format>"] {
            #expect(run.stdout.contains(option), "\(command) --help lacks \(option):\n\(run.stdout)")
        }
    }

    @Test(
        "usage errors exit 64 and store nothing",
        arguments: [
            (["order", "--item", "Peanuts"], "--seat"),
            (["order", "--seat", "17B"], "--item"),
            (["order", "--seat", "17B", "--item", "=2"], "=2"),
            (["order", "--seat", "17B", "--item", "Peanuts", "--bogus"], "--bogus"),
            (["scan", "--at", "gate"], "gate"),
            (["scan"], "--at"),
            (["scan", "--at", "origin", "--tag", "{}", "--tag-file", "x"], "not both"),
            (["fly"], "fly"),
        ])
    func usage(arguments: [String], mention: String) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(arguments)
        #expect(run.status == 64, "\(run)")
        #expect(run.stderr.contains(mention), "\(run)")
        #expect(try sandbox.records().isEmpty)
    }

    @Test("the home comes from --home, else $JETBRIDGE_HOME, else .jetbridge/agent")
    func homeResolution() throws {
        let sandbox = try AgentSandbox()
        let order = ["order", "--seat", "1A", "--item", "Chips"]
        #expect(try sandbox.agentWithoutHome(order).status == 0)
        #expect(FileManager.default.fileExists(atPath: sandbox.directory.path + "/.jetbridge/agent/queue"))
        let environmentHome = sandbox.directory.appendingPathComponent("from-env").path
        #expect(try sandbox.agentWithoutHome(order, environment: ["JETBRIDGE_HOME": environmentHome]).status == 0)
        #expect(FileManager.default.fileExists(atPath: environmentHome + "/queue"))
        // --home wins over the environment, before or after the subcommand.
        let flagHome = sandbox.directory.appendingPathComponent("from-flag").path
        let run = try sandbox.agentWithoutHome(
            ["order", "--home", flagHome, "--seat", "1A", "--item", "Chips"],
            environment: ["JETBRIDGE_HOME": environmentHome])
        #expect(run.status == 0, "\(run)")
        let status = try sandbox.agentWithoutHome(
            ["status", "--json"], environment: ["JETBRIDGE_HOME": environmentHome])
        #expect(status.stdout.contains(#""records" : 1"#), "\(status)")
        #expect(FileManager.default.fileExists(atPath: flagHome + "/queue"))
    }
}
