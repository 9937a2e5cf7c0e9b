import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `--log-format json` for a log shipper: every line on standard error, of every tool, is one JSON object.
@Suite("JSON logs: every line on standard error")
struct JSONLogTests {
    /// Every line on standard error is one JSON object with `--log-format json`: the insecure banners and the final
    /// `Error:` line were plain text, and metadata numbers were strings (`"allowedDevices":"0"`).
    @Test func withLogFormatJSONEveryStandardErrorLineIsJSON() async throws {
        let sandbox = try AgentSandbox()
        let json = ["--log-format", "json"]
        let ground = sandbox.directory.appendingPathComponent("ground").path
        let nobody = "ipc://\(sandbox.directory.path)/nobody"
        #expect(try sandbox.agent(["scan", "--at", "origin", "--tag", Tags.json()]).status == 0)
        var runs: [(String, AgentSandbox.Run)] = []
        runs.append(("bad seat", try sandbox.agent(json + ["order", "--seat", "17I", "--item", "Chips"])))
        runs.append(("unknown option", try sandbox.agent(json + ["order", "--seat", "17B", "--bogus"])))
        runs.append(("mistyped command", try sandbox.agent(json + ["stauts"])))
        runs.append(
            (
                "rejected lines",
                try sandbox.agent(json + ["scan", "--at", "origin"], stdin: Data("{}\nnot json\n".utf8))
            )
        )
        runs.append(
            (
                "insecure sync that times out",
                try sandbox.agent(
                    json + [
                        "sync", "--insecure", "--to", nobody + "-data", "--acks", nobody + "-acks", "--timeout", "1",
                    ])
            ))
        runs.append(("serve without keys", try sandbox.aggregator(["--home", ground] + json + ["serve"])))
        runs.append(("report without store", try sandbox.aggregator(["--home", ground, "report", "flights"] + json)))
        runs.append(("mistyped ground command", try sandbox.aggregator(json + ["reprot"])))
        runs.append(
            (
                "queue tool error",
                try sandbox.queueTool(
                    ["ack", "--through", "1", "nowhere"], environment: ["JETBRIDGE_LOG_FORMAT": "json"])
            ))

        // An insecure serve: the boxed banner, then its log lines, until SIGTERM.
        let serve = try PipelineTests.Background(
            AgentSandbox.executable("jetbridge-aggregator"),
            ["--home", ground, "serve", "--insecure", "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"]
                + json,
            in: sandbox.directory, name: "serve")
        defer { serve.kill9() }
        try await waitUntil("serve logs that it serves") {
            (try? String(contentsOf: serve.log, encoding: .utf8))?.contains("aggregator serving") == true
                || !serve.process.isRunning
        }
        kill(serve.process.processIdentifier, SIGTERM)
        let status = serve.wait(atMost: 30)
        let serveLog = try String(contentsOf: serve.log, encoding: .utf8)
        runs.append(("insecure serve", .init(status: status, stdout: "", stderr: serveLog)))

        for (name, run) in runs {
            #expect(run.status != 0 || name == "insecure serve", "\(name): \(run)")
            let lines = run.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            #expect(!lines.isEmpty, "\(name): nothing on standard error")
            for line in lines {
                let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                #expect(object != nil, "\(name): not a JSON object: \(line)")
                #expect(
                    object.map { Set($0.keys) == ["time", "level", "label", "message", "metadata"] } ?? false,
                    "\(name): \(line)")
            }
        }
        // The banner is a warning that says what it warns about; numbers are JSON numbers.
        let debug = try sandbox.agent(
            ["--log-level", "debug"] + json + ["scan", "--at", "origin"], stdin: Data((Tags.json() + "\n").utf8))
        let recorded = try #require(debug.stderr.split(separator: "\n").first { $0.contains(#""scans recorded""#) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(recorded.utf8)) as? [String: Any])
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["scanned"] is NSNumber && !(metadata["scanned"] is String), "\(recorded)")
        #expect(recorded.contains(#""scanned":1"#), "\(recorded)")
        let serving = try #require(serveLog.split(separator: "\n").first { $0.contains(#""aggregator serving""#) })
        let servingObject = try #require(try JSONSerialization.jsonObject(with: Data(serving.utf8)) as? [String: Any])
        let servingMetadata = try #require(servingObject["metadata"] as? [String: Any])
        #expect(servingMetadata["allowedDevices"] is NSNumber && serving.contains(#""allowedDevices":0"#), "\(serving)")
        #expect(serveLog.contains(#""refusedHandshakes":0"#), "\(serveLog)")
        #expect(serveLog.contains(#""level":"warning""#) && serveLog.contains("INSECURE MODE"), "\(serveLog)")
        let insecureSync = try #require(runs.first { $0.0 == "insecure sync that times out" }?.1)
        #expect(insecureSync.stderr.contains("--insecure"), "\(insecureSync)")
        let finalError = try #require(insecureSync.stderr.split(separator: "\n").last)
        #expect(finalError.contains(#""level":"error""#) && finalError.contains("sync timed out"), "\(finalError)")
    }
}
