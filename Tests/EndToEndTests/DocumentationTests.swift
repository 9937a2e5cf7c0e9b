import Foundation
import Testing

/// What the docs, the `--help` texts and the scripts' headers tell a user to run works as they say (issue 28).
@Suite("Documentation: help texts, commands in the docs")
struct DocumentationTests {
    static let packageRoot = ReadmeTranscriptTests.packageRoot

    static let agentCommands: [[String]] = [
        [], ["order"], ["scan"], ["status"], ["sync"], ["keys"], ["keys", "generate"],
    ]
    static let aggregatorCommands: [[String]] = [
        [], ["serve"], ["status"], ["report"], ["receipts"], ["receipts", "rebuild"], ["store"], ["store", "migrate"],
        ["keys"], ["keys", "generate"], ["devices"], ["devices", "allow"], ["devices", "revoke"], ["devices", "list"],
    ]

    /// Every text file of the repository (sources, docs, scripts), relative to the package root.
    static func repositoryTexts() throws -> [(path: String, text: String)] {
        let root = packageRoot
        var texts: [(String, String)] = []
        for top in ["README.md", "Package.swift", "Sources", "Tests", "Benchmarks", "docs", "deploy", "config", "Fuzz"] {
            let url = root.appendingPathComponent(top)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else { continue }
            let files =
                isDirectory.boolValue
                ? (FileManager.default.enumerator(atPath: url.path)?.compactMap { $0 as? String } ?? []).map { "\(top)/\($0)" }
                : [top]
            for file in files where [".swift", ".md", ".sh", ".py", ".service", ".conf"].contains(where: file.hasSuffix) {
                if let text = try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8) {
                    texts.append((file, text))
                }
            }
        }
        return texts
    }

    /// A doc the repository cites must be in it (issue 24): every `docs/…` page named anywhere exists, and the
    /// founding design outside the repository is never cited (docs/ARCHITECTURE.md is the project's own account).
    @Test func everyCitedDocExistsAndNoneIsOutsideTheRepository() throws {
        let texts = try Self.repositoryTexts()
        #expect(texts.count > 100)
        var cited = Set<String>()
        for (path, text) in texts {
            // The tarball's docs/ holds README.md beside docs/docs/ (Tests/package): not a page of this repository.
            for match in text.matches(of: /docs\/([A-Z][A-Z0-9-]*\.md)/) where match.output.1 != "README.md" {
                cited.insert(String(match.output.1))
            }
            // Spelt in two parts so that this file does not count itself.
            #expect(!text.contains("DES" + "IGN.md"), "\(path) cites the design outside the repository")
        }
        #expect(cited.contains("ARCHITECTURE.md"))
        for name in cited.sorted() {
            let url = Self.packageRoot.appendingPathComponent("docs/\(name)")
            #expect(FileManager.default.fileExists(atPath: url.path), "docs/\(name) is cited but missing")
        }
    }

    /// Every section a citation names is in its page: a page of docs/ and a title in quotes (anywhere in the
    /// repository, also split over comment lines) name a heading of that page (the whole heading, or its start before
    /// `:`, ` (`, ` —` or `,`), or a paragraph's bold lead-in (`**Title.**`, `**Title: …**`). A renamed section must
    /// not leave readers searching for what the text cites.
    @Test func everyCitedSectionIsInItsPage() throws {
        let texts = try Self.repositoryTexts()
        var labels: [String: (headings: [String], leads: [String])] = [:]
        func labelsOf(_ page: String) -> (headings: [String], leads: [String]) {
            if let known = labels[page] { return known }
            let url = Self.packageRoot.appendingPathComponent("docs/\(page)")
            let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
            var found: (headings: [String], leads: [String]) = ([], [])
            for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
                if let heading = line.firstMatch(of: /^#+\s+(.*)$/) {
                    found.headings.append(String(heading.output.1).trimmingCharacters(in: .whitespaces))
                }
                for lead in line.matches(of: /\*\*([^*]+?)\*\*/) { found.leads.append(String(lead.output.1)) }
            }
            labels[page] = found
            return found
        }
        var checked = 0
        for (path, text) in texts where path != "Tests/EndToEndTests/DocumentationTests.swift" {
            // A citation may run over lines of a comment or a paragraph.
            let joined = text.replacing(/\n[ \t]*(?:\/\/\/|\/\/|#|--)?[ \t]*/, with: " ")
            for match in joined.matches(of: /docs\/([A-Z][A-Z0-9-]*\.md),? "([^"]{2,80})"/) {
                let (page, title) = (String(match.output.1), String(match.output.2))
                let found = labelsOf(page)
                let heading = found.headings.contains { heading in
                    heading == title || [":", " (", " —", ","].contains { heading.hasPrefix(title + $0) }
                }
                let lead = found.leads.contains { lead in
                    [title, title + ".", title + ":"].contains(lead) || lead.hasPrefix(title + ":")
                        || lead.hasPrefix(title + ".")
                }
                checked += 1
                #expect(heading || lead, "\(path) cites docs/\(page), \"\(title)\", which is no heading there")
            }
        }
        #expect(checked > 200)
    }

    /// Every `deploy/….sh` the docs, the sources, the scripts or CI name is in the repository, so that a renamed or
    /// removed demo never leaves the README or .ci/run pointing at nothing.
    @Test func everyCitedDeployScriptExists() throws {
        var texts = try Self.repositoryTexts()
        let ci = Self.packageRoot.appendingPathComponent(".ci/run")
        texts.append((".ci/run", try String(contentsOf: ci, encoding: .utf8)))
        var cited: [String: String] = [:]
        for (path, text) in texts {
            for match in text.matches(of: /deploy\/[a-z0-9_-]+\.sh/) where cited[String(match.output)] == nil {
                cited[String(match.output)] = path
            }
        }
        #expect(cited["deploy/failover.sh"] != nil && cited["deploy/scale-out.sh"] != nil)
        for (script, citer) in cited.sorted(by: { $0.key < $1.key }) {
            let url = Self.packageRoot.appendingPathComponent(script)
            #expect(FileManager.default.fileExists(atPath: url.path), "\(citer) names \(script), which does not exist")
        }
    }

    /// docs/ARCHITECTURE.md names the types that keep each rule; a rename must not leave it pointing at nothing.
    /// Every `UpperCamelCase` name in backticks there is a type, extension or file of Sources/.
    @Test func everyTypeTheArchitecturePageNamesExists() throws {
        let page = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("docs/ARCHITECTURE.md"), encoding: .utf8)
        let sources = try Self.repositoryTexts().filter { $0.path.hasPrefix("Sources/") }
        // Targets (the directories of Sources/) and the library types the page names count as declared.
        let targets = try FileManager.default.contentsOfDirectory(
            atPath: Self.packageRoot.appendingPathComponent("Sources").path)
        let libraries = ["Service", "ServiceGroup", "UnixSignalsSequence"]
        let declared = Set(
            targets + libraries
                + sources.flatMap { file in
                file.text.matches(of: /(?:class|struct|enum|protocol|actor|extension|typealias) ([A-Z][A-Za-z0-9]*)/)
                    .map { String($0.output.1) }
                    + [String(file.path.split(separator: "/").last!.split(separator: ".").first!)]
            })
        let named = Set(page.matches(of: /`([A-Z][A-Za-z0-9]+)(?:\+[A-Za-z]+)?`/).map { String($0.output.1) })
        #expect(named.count > 30)
        let socketsAndSignals: Set<String> = ["PULL", "PUSH", "DEALER", "ROUTER", "ZAP", "SIGTERM", "SIGINT", "SIGHUP"]
        let missing = named.subtracting(socketsAndSignals).subtracting(declared).sorted()
        #expect(missing.isEmpty, "docs/ARCHITECTURE.md names what Sources/ does not declare: \(missing)")
    }

    /// `jetbridge-aggregator --help` wrapped the `store migrate` example's URL onto a line of its own, unindented:
    /// pasted, it ran `store migrate` without `--store`. Every line of an example block is a whole command.
    @Test func everyExampleInEveryHelpIsOneIndentedLine() throws {
        let sandbox = try AgentSandbox()
        let tools = [("jetbridge-agent", Self.agentCommands), ("jetbridge-aggregator", Self.aggregatorCommands)]
        for (tool, commands) in tools {
            for command in commands {
                let run = try AgentSandbox.run(
                    AgentSandbox.executable(tool), command + ["--help"], in: sandbox.directory,
                    environment: ["COLUMNS": "80"])
                #expect(run.status == 0, "\(tool) \(command) --help: \(run)")
                var inExamples = false
                for line in run.stdout.split(separator: "\n", omittingEmptySubsequences: false) {
                    if line.trimmingCharacters(in: .whitespaces).hasPrefix("Examples:") {
                        inExamples = true
                    } else if line.isEmpty {
                        inExamples = false
                    } else if inExamples {
                        #expect(line.hasPrefix("  jetbridge-"), "\(tool) \(command) --help breaks an example: \(line)")
                    }
                }
            }
        }
    }

    /// The header of Tests/postgres/start-throwaway.sh said `swift test --filter PostgresStoreTests`, which matches
    /// no suite ("0 tests in 0 suites passed"). Its filter must match a suite of every file that uses PostgreSQL.
    @Test func theThrowawayServersFilterMatchesThePostgreSQLSuites() throws {
        let script = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("Tests/postgres/start-throwaway.sh"), encoding: .utf8)
        let match = try #require(
            script.firstMatch(of: /swift test[^\n]*--filter '?([^'\s]+)'?/), "no filter in the header")
        let filter = try Regex(String(match.output.1))
        let tests = Self.packageRoot.appendingPathComponent("Tests")
        let files = try #require(FileManager.default.enumerator(atPath: tests.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        var checked = 0
        for file in files {
            let text = try String(contentsOf: tests.appendingPathComponent(file), encoding: .utf8)
            // Spelt in two parts so that this file does not count itself.
            guard text.contains("TestPost" + "gres.") || text.contains("JETBRIDGE_TEST_" + "POSTGRES\"]"),
                !file.hasSuffix("PostgresSupport.swift"), !file.hasSuffix("SharedStoreSupport.swift")
            else { continue }
            let suites = text.matches(of: /\n(?:final class|struct) ([A-Za-z]+Tests)\b/).map { String($0.output.1) }
            #expect(
                suites.contains { $0.contains(filter) }, "--filter \(match.output.1) runs nothing of \(file) \(suites)")
            checked += 1
        }
        #expect(checked >= 3)
    }

    /// AGENT.md showed an older `keys generate` output than the tool prints.
    @Test func agentDocsShowWhatKeysGeneratePrints() throws {
        let doc = try String(contentsOf: Self.packageRoot.appendingPathComponent("docs/AGENT.md"), encoding: .utf8)
        let steps = try Transcript.steps(in: doc, from: "## keys generate", to: "## sync")
        let step = try #require(steps.first)
        #expect(step.command == ["jetbridge-agent keys generate"])
        let sandbox = try AgentSandbox()
        let shown = "/srv/jetbridge"
        try sandbox.write(#"{"device": "cart-1"}"#, to: ".jetbridge/agent/agent.json")
        let run = try sandbox.agentWithoutHome(["keys", "generate"])
        #expect(run.status == 0, "\(run)")
        let printed = Transcript.normalize(run.stdout.replacingOccurrences(of: sandbox.directory.path, with: shown))
        #expect(printed == Transcript.normalize(step.output.joined(separator: "\n") + "\n"), "\(printed)")
    }

    /// The demos installed libzmq's and SQLite's headers only when zmq.h was missing: a machine with zmq.h and no
    /// sqlite3.h got nothing and failed to build. Each header is checked on its own.
    @Test(arguments: [
        ([], "libzmq3-dev libsqlite3-dev"), (["zmq.h"], "libsqlite3-dev"), (["sqlite3.h"], "libzmq3-dev"),
        (["zmq.h", "sqlite3.h"], ""),
    ])
    func theDemosInstallEachMissingHeadersPackage(present: [String], missing: String) throws {
        let sandbox = try AgentSandbox()
        let include = sandbox.directory.appendingPathComponent("include")
        try FileManager.default.createDirectory(at: include, withIntermediateDirectories: true)
        for header in present { try sandbox.write("", to: "include/\(header)") }
        let run = try AgentSandbox.run(
            URL(fileURLWithPath: "/bin/bash"),
            ["-c", "source deploy/capture-functions.sh && missing_build_packages \(include.path)"],
            in: Self.packageRoot)
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == missing, "\(run)")
    }
}
