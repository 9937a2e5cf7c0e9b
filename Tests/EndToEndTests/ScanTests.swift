import FileQueue
import Foundation
import JetbridgeModel
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("scan: one tag, a file, standard input")
struct ScanTests {
    @Test("scan --tag stores one scan record with the tag, point, flight and device")
    func oneTag() throws {
        let sandbox = try AgentSandbox()
        let tagID = UUID()
        let run = try sandbox.agent([
            "scan", "--at", "destination", "--tag", Tags.json(id: tagID, initial: "d", family: "zmu", weight: "12.5"),
        ])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "scanned 1 tag at destination\n")
        let records = try sandbox.decodedRecords()
        guard case .scan(let scan) = try #require(records.first), records.count == 1 else {
            Issue.record("expected one scan, got \(records)")
            return
        }
        #expect(scan.tag.id == tagID)
        #expect(scan.tag.owner == (try Owner(initial: "D", family: "ZMU")))
        #expect(scan.tag.weight == 12.5)
        #expect(scan.point == .destination)
        #expect(scan.flight.rawValue == "ZA101/2026-11-21")
        #expect(scan.device == (try sandbox.status()["device"] as? String))
        try scan.validate()
    }

    /// A tag payload and the reason expected, shown in test results by name (some payloads are huge).
    struct BadTag: CustomTestStringConvertible, Sendable {
        var name: String
        var payload: String
        var message: String
        var testDescription: String { name }

        init(_ name: String, _ payload: String, _ message: String) {
            self.name = name
            self.payload = payload
            self.message = message
        }
    }

    static let hostile: [BadTag] = [
        BadTag(
            "truncated JSON", #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 42.0"#,
            "not valid JSON"),
        BadTag("short id", #"{"id": "F432BDB8", "owner": ["D", "ZMU"], "weight": 1}"#, "id"),
        BadTag(
            "two-letter initial",
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["DX", "ZMU"], "weight": 1}"#, "owner"),
        BadTag(
            "owner of one part", #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D"], "weight": 1}"#,
            "owner"),
        BadTag("negative weight", Tags.json(weight: "-1"), "weight -1.0 is invalid"),
        BadTag("NaN weight", Tags.json(weight: "NaN"), "not valid JSON"),
        BadTag("infinite weight", Tags.json(weight: "1e999"), "out of range"),
        BadTag("weight as a string", Tags.json(weight: "\"42\""), "weight"),
        BadTag(
            "no weight", #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"]}"#,
            "'weight' is missing"),
        BadTag(
            "duplicate key",
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "id": "F432BDB8-D84F-4461-8362-AFF89F6C493F", "owner": ["D", "ZMU"], "weight": 1}"#,
            "duplicate"),
        BadTag(
            "2,000 nested arrays", String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000),
            "nested deeper than"),
        BadTag(
            "100 nested objects", String(repeating: #"{"a":"#, count: 100) + "1" + String(repeating: "}", count: 100),
            "nested deeper than"),
        // One argument can hold at most 128 KiB on Linux; the 1 MB line goes through standard input below.
        BadTag("100 KB payload", String(repeating: "x", count: 100_000), "100000 bytes; a tag is at most 4096 bytes"),
        BadTag("control bytes", "\u{1}\u{2}", "not valid JSON"),
        BadTag("empty", "", "empty"),
    ]

    @Test("a bad or hostile tag exits 65 with the reason and stores nothing", arguments: hostile)
    func badTag(tag: BadTag) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["scan", "--at", "origin", "--tag", tag.payload])
        #expect(run.status == 65, "\(run.status) \(run.stderr.prefix(300))")
        #expect(run.stderr.contains(tag.message), "\(run.stderr.prefix(300))")
        #expect(run.stderr.utf8.count < 1000, "the message does not echo the hostile payload")
        #expect(try sandbox.records().isEmpty)
    }

    @Test("tags on standard input: good lines stored in order, bad lines reported by number, exit 65")
    func bulkWithBadLines() throws {
        let sandbox = try AgentSandbox()
        let ids = (0..<6).map { _ in UUID() }
        var lines = ids.map { Tags.json(id: $0) }
        lines.insert("", at: 2)  // line 3: empty, skipped
        lines.insert("not json", at: 4)  // line 5
        lines.insert(Tags.json(weight: "-3"), at: 6)  // line 7
        lines.insert("   ", at: 7)  // line 8: blank, skipped
        lines.append(String(repeating: "{", count: 1 << 20))  // line 11: 1 MB
        lines.append(Tags.json(id: ids[0]) + "\r")  // line 12: CRLF; the same bag scanned again is a new scan
        let run = try sandbox.agent(["scan", "--at", "origin"], stdin: Data(lines.joined(separator: "\n").utf8))
        #expect(run.status == 65, "\(run)")
        #expect(run.stdout == "scanned 7 tags at origin; 3 lines rejected\n", "\(run)")
        let errors = run.stderr.split(separator: "\n").map(String.init)
        #expect(errors.count == 3, "\(run)")
        #expect(errors[0].hasPrefix("line 5: "))
        #expect(errors[1].hasPrefix("line 7: ") && errors[1].contains("weight"))
        #expect(errors[2] == "line 11: tag payload is 1048576 bytes; a tag is at most 4096 bytes of JSON")
        let scans = try sandbox.decodedRecords().compactMap { record -> Scan? in
            if case .scan(let scan) = record { scan } else { nil }
        }
        #expect(scans.map(\.tag.id) == ids + [ids[0]])
        #expect(Set(scans.map(\.id)).count == 7, "every scan has its own id")
        #expect(scans.allSatisfy { $0.point == .origin })
        #expect(try sandbox.records().map(\.sequence) == Array(1...7))
    }

    @Test("a tag file of good lines exits 0; many lines go in group commits")
    func tagFile() throws {
        let sandbox = try AgentSandbox()
        let count = 10_000
        let file = try sandbox.write(
            (0..<count).map { _ in Tags.json() }.joined(separator: "\n") + "\n", to: "tags.txt")
        let run = try sandbox.agent(["scan", "--at", "destination", "--tag-file", file.path, "--json"])
        #expect(run.status == 0, "\(run)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(summary["scanned"] as? Int == count)
        #expect(summary["rejected"] as? Int == 0)
        #expect(summary["lastSequence"] as? Int == count)
        #expect(try sandbox.records().count == count)
        let text = try sandbox.agent(["scan", "--at", "origin", "--tag-file", file.path])
        #expect(text.stdout == "scanned 10,000 tags at origin\n")
    }

    @Test("empty input stores nothing and exits 0")
    func emptyInput() throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["scan", "--at", "origin"], stdin: Data("\n\n".utf8))
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout == "scanned 0 tags at origin\n")
        #expect(try sandbox.records().isEmpty)
    }

    @Test("a missing tag file exits 66 naming it")
    func missingTagFile() throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["scan", "--at", "origin", "--tag-file", "nowhere/tags.txt"])
        #expect(run.status == 66, "\(run)")
        #expect(run.stderr.contains("cannot read the tag file nowhere/tags.txt: No such file or directory"), "\(run)")
        #expect(try sandbox.records().isEmpty)
    }

    /// Any path that cannot be opened is 66, as AGENT.md says of a tag file that cannot be read (before, only a
    /// missing or forbidden one was; a loop of links, a file in the path's middle, were 1).
    @Test("a tag file behind a loop of links or under a file exits 66")
    func unopenableTagFile() throws {
        let sandbox = try AgentSandbox()
        let loop = sandbox.directory.appendingPathComponent("loop").path
        #expect(symlink(loop, loop) == 0)
        let file = sandbox.directory.appendingPathComponent("plain")
        try Data("x".utf8).write(to: file)
        for path in [loop, file.path + "/tags.txt"] {
            let run = try sandbox.agent(["scan", "--at", "origin", "--tag-file", path])
            #expect(run.status == 66, "\(run)")
            #expect(run.stderr.contains("cannot read the tag file \(path)"), "\(run)")
        }
        #expect(try sandbox.records().isEmpty)
    }
}

extension ScanTests {
    /// Ctrl-C (or SIGTERM) during a feed from standard input: the default action ended the process, losing the scans
    /// not yet written and saying nothing, so a re-feed from the start stored the rest a second time (each scan gets
    /// a new id). Now the feed stops between two lines, what was read is stored, and the message says where to go on.
    @Test(arguments: [SIGINT, SIGTERM])
    func aSignalDuringAFeedStoresWhatWasReadAndSaysFromWhichLineToGoOn(_ signal: Int32) async throws {
        let sandbox = try AgentSandbox()
        let (input, output, errors) = (Pipe(), Pipe(), Pipe())
        let process = try ChildProcess(
            try AgentSandbox.executable("jetbridge-agent"),
            ["--home", sandbox.home.path, "scan", "--at", "origin", "--tag-file", "-"], in: sandbox.directory,
            stdin: .pipe(input), stdout: .pipe(output), stderr: .pipe(errors))
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        let lines = [Tags.json(), "not a tag", Tags.json(), Tags.json()].joined(separator: "\n") + "\n"
        // And half of a fifth line, which is not stored: the feed stops before it ends.
        input.fileHandleForWriting.write(Data((lines + #"{"id": "F432"#).utf8))
        // The feed goes quiet: what was read is handed over and stored before the command waits for more.
        try await waitUntil("three scans are stored") { try sandbox.records().count == 3 }
        #expect(kill(process.processIdentifier, signal) == 0)
        let deadline = ContinuousClock.now + .seconds(20)
        while process.isRunning && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stdout = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationReason == .exit && process.terminationStatus == 75, "\(stdout) \(stderr)")
        let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
        #expect(
            stderr.contains(
                "standard input: stopped by \(name) after line 4: the 3 scans read before it were stored (1 line rejected): re-feed from line 5"
            ), "\(stderr)")
        #expect(try sandbox.records().count == 3)
    }
}

extension AgentSandbox {
    /// `status --json`, parsed.
    func status(_ arguments: [String] = []) throws -> [String: Any] {
        let run = try agent(arguments + ["status", "--json"])
        guard run.status == 0,
            let object = try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any]
        else {
            throw StatusFailed(run: run)
        }
        return object
    }

    struct StatusFailed: Error, CustomStringConvertible {
        var run: Run
        var description: String { "status --json failed: \(run)" }
    }
}
