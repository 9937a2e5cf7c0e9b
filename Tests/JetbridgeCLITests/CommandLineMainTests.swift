import ArgumentParser
import Foundation
import JetbridgeCLI
import SystemSupport
import Testing

@Suite("The command-line scaffold: global options, suggestions, exit statuses")
struct CommandLineMainTests {
    static let names = ["--config", "--home", "--log-level", "--log-format"]

    @Test func globalOptionsBeforeTheSubcommandMoveBehindItAndInFrontOfATerminator() {
        #expect(
            CommandLineMain.movingGlobalOptions(["--home", "g", "--log-level=debug", "serve"], names: Self.names)
                == ["serve", "--home", "g", "--log-level=debug"])
        #expect(
            CommandLineMain.movingGlobalOptions(
                ["--home", "g", "devices", "allow", "cart-1", "--", "-KEY"], names: Self.names)
                == ["devices", "allow", "cart-1", "--home", "g", "--", "-KEY"])
        // Behind the subcommand they stay where they are; other options are not global.
        #expect(
            CommandLineMain.movingGlobalOptions(["status", "--home", "g"], names: Self.names)
                == ["status", "--home", "g"])
        #expect(CommandLineMain.movingGlobalOptions(["--json", "status"], names: Self.names) == ["--json", "status"])
        #expect(CommandLineMain.movingGlobalOptions(["--home", "g"], names: []) == ["--home", "g"])
    }

    @Test func aMistypedSubcommandGetsTheNearestName() {
        let names = ["order", "scan", "status", "sync", "keys"]
        #expect(
            CommandLineMain.suggestion(for: ["stauts", "--json"], among: names)
                == "unknown command 'stauts'; did you mean 'status'? Commands: order, scan, status, sync, keys.")
        #expect(CommandLineMain.suggestion(for: ["zzzzzz"], among: names)?.contains("'zzzzzz'.") == true)
        for fine in [["status"], ["--help"], ["help"], []] {
            #expect(CommandLineMain.suggestion(for: fine, among: names) == nil)
        }
    }

    /// One exit-status type with one name per code (issue 24, item 6): the numbers are sysexits.h's.
    @Test func everyExitStatusIsSysexitsNumber() {
        let codes = Dictionary(uniqueKeysWithValues: ExitStatus.allCases.map { ("\($0)", $0.exitCode) })
        #expect(
            codes == [
                "success": 0, "failure": 1, "usage": 64, "dataError": 65, "noInput": 66, "unavailable": 69,
                "cannotCreate": 73, "tryAgain": 75,
            ])
        #expect(ExitCode(ExitStatus.tryAgain).rawValue == 75)
    }

    /// The executables spell no exit number: each status has its name (ExitStatus), and they end through the
    /// scaffold. A literal such as `exit(64)` or `ExitCode(66)` brings back a second spelling of a code.
    @Test func theExecutablesSpellNoExitNumber() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        var checked = 0
        for tool in ["jetbridge-agent", "jetbridge-aggregator", "jetbridge-queue", "JetbridgeCLI"] {
            let directory = root.appendingPathComponent(tool)
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
            where name.hasSuffix(".swift") {
                let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
                for pattern in [/\bexit\(\s*\d/, /ExitCode\(\s*\d/, /Foundation\.exit\(\s*[^s]/, /terminate\(\s*\d/] {
                    #expect(text.firstMatch(of: pattern) == nil, "\(tool)/\(name) spells an exit number")
                }
                checked += 1
            }
        }
        #expect(checked >= 10)
    }

    /// Only the executables and the scaffold import an argument parser; the libraries, the server's among them, do
    /// not (issue 24, item 6).
    @Test func noLibraryImportsAnArgumentParser() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        let allowed: Set<String> = ["JetbridgeCLI", "jetbridge-agent", "jetbridge-aggregator", "jetbridge-queue"]
        let files = try #require(FileManager.default.enumerator(atPath: root.path)).compactMap { $0 as? String }
        var checked = 0
        for file in files where file.hasSuffix(".swift") {
            let target = String(file.prefix { $0 != "/" })
            guard !allowed.contains(target) else { continue }
            let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
            #expect(text.firstMatch(of: /import ArgumentParser/) == nil, "\(file) imports ArgumentParser")
            checked += 1
        }
        #expect(checked > 50)
    }
}
