import Foundation
import JetbridgeAggregator
import JetbridgeProtocol
import JetbridgeTestKit
import Testing

/// Debian's `promtool` (package `prometheus`): the tests that need it are skipped without it, except in CI
/// (`CI=true`), where they run and fail, as the PostgreSQL tests do.
enum Promtool {
    struct Missing: Error, CustomStringConvertible {
        let description = "CI=true but promtool is not installed: .ci/run must install Debian's `prometheus` package"
    }

    static let url: URL? = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        .split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent("promtool") }
        .first { FileManager.default.isExecutableFile(atPath: $0.path) }
    static let enabled = url != nil || ProcessInfo.processInfo.environment["CI"] == "true"

    /// Runs `promtool arguments` in `directory`: its exit status and everything it printed.
    static func run(_ arguments: [String], in directory: URL, stdin: String? = nil) throws -> (Int32, String) {
        guard let url else { throw Missing() }
        let finished = try ExecutableRun.run(url, arguments, in: directory, stdin: stdin.map { Data($0.utf8) })
        return (finished.status, finished.stdout + finished.stderr)
    }
}

/// `/metrics` in the ecosystem's formats, and the alert rules and dashboard under deploy/ checked against a real scrape
/// (issue 26 item 6).
@Suite("Monitoring: HELP and TYPE, build info, alert rules, dashboard (issue 26 item 6)")
struct MonitoringTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let prometheusDirectory = repository.appendingPathComponent("deploy/prometheus")

    /// One exposition, parsed: each family's type and help, and the sample names.
    struct Exposition {
        var text: String
        var types: [String: String] = [:]
        var help: [String: String] = [:]
        var samples: Set<String> = []

        init(_ text: String) {
            self.text = text
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ", maxSplits: 3).map(String.init)
                if line.hasPrefix("# TYPE "), words.count == 4 {
                    types[words[2]] = words[3]
                } else if line.hasPrefix("# HELP "), words.count == 4 {
                    help[words[2]] = words[3]
                } else if !line.hasPrefix("#") {
                    samples.insert(String(line.prefix { $0 != "{" && $0 != " " }))
                }
            }
        }

        /// Whether a query may name `name`: a family, or a histogram's `_bucket`, `_count` or `_sum`.
        func has(_ name: String) -> Bool {
            if types[name] != nil { return true }
            for suffix in ["_bucket", "_count", "_sum"] where name.hasSuffix(suffix) {
                if types[String(name.dropLast(suffix.count))] == "histogram" { return true }
            }
            return false
        }
    }

    /// A real `serve` with one device that synced a batch, scraped over HTTP.
    static func scrape() async throws -> Exposition {
        let fixture = try ServerFixture(devices: ["cart-1", "cart-2"]) { $0.metrics = "127.0.0.1:0" }
        let device = try await fixture.device("cart-1")
        try device.send(try outgoing("cart-1", 1, [order(1), order(2)]))
        let ack = try await device.ack()
        device.close()
        #expect(ack?.status == .stored)
        let (status, text) = try await MetricsTests.get(fixture.server, "/metrics")
        await fixture.stop()
        #expect(status == 200)
        return Exposition(text)
    }

    /// Metric names a PromQL text mentions (ours and the process metrics; `up` and functions are not ours).
    static func metricNames(in query: String) -> Set<String> {
        let regex = try! NSRegularExpression(pattern: "\\b((?:jetbridge|process)_[a-z_]+)\\b")
        let range = NSRange(query.startIndex..., in: query)
        return Set(
            regex.matches(in: query, range: range).compactMap {
                Range($0.range(at: 1), in: query).map { String(query[$0]) }
            })
    }

    /// Before: no family had a `# HELP` line and there was no build info; promtool's linter said so.
    @Test func everyFamilyHasHelpAndTheRightTypeAndBuildInfoIsThere() async throws {
        let exposition = try await Self.scrape()
        let expected = [
            "jetbridge_records_total": "counter", "jetbridge_batches_total": "counter",
            "jetbridge_handshakes_total": "counter", "jetbridge_device_last_batch_timestamp_seconds": "gauge",
            "jetbridge_store_commit_seconds": "histogram", "jetbridge_receipts_refresh_seconds": "histogram",
            "jetbridge_batch_queue_depth": "gauge", "jetbridge_acks_held": "gauge",
            "jetbridge_receipts_pending": "gauge",
            "jetbridge_ready": "gauge", "jetbridge_build_info": "gauge", "process_resident_memory_bytes": "gauge",
            "process_virtual_memory_bytes": "gauge", "process_cpu_seconds_total": "counter",
            "process_open_fds": "gauge",
            "process_max_fds": "gauge", "process_start_time_seconds": "gauge",
        ]
        for (name, type) in expected {
            #expect(exposition.types[name] == type, "\(name): \(exposition.types[name] ?? "absent")")
        }
        for name in exposition.types.keys {
            #expect(exposition.help[name].map { !$0.isEmpty } == true, "\(name) has no # HELP line")
            if name.hasSuffix("_total") { #expect(exposition.types[name] == "counter", "\(name)") }
        }
        for sample in exposition.samples {
            #expect(exposition.has(sample), "\(sample) has no # TYPE line")
        }
        let build = MetricsTests.sample(
            exposition.text, "jetbridge_build_info",
            [
                "version": JetbridgeVersion.release, "wire_protocol": String(WireProtocol.version),
                "queue_format": "1",
            ])
        #expect(build == 1, "\(exposition.text)")
        #expect(MetricsTests.sample(exposition.text, "jetbridge_ready") == 1)
    }

    @Test(.enabled(if: Promtool.enabled, "promtool (Debian's prometheus package) is not installed"))
    func promtoolFindsNothingToSayAboutTheExposition() async throws {
        let exposition = try await Self.scrape()
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let (status, output) = try Promtool.run(["check", "metrics"], in: directory.url, stdin: exposition.text)
        #expect(status == 0 && output.isEmpty, "promtool check metrics: \(output)")
    }

    /// deploy/prometheus/alerts.yml: valid rules, each alert unit-tested to fire and not to fire, and every metric it
    /// names is one a real serve exposes.
    @Test(.enabled(if: Promtool.enabled, "promtool (Debian's prometheus package) is not installed"))
    func alertRulesAreValidUnitTestedAndOnRealMetrics() async throws {
        let (checked, checkOutput) = try Promtool.run(["check", "rules", "alerts.yml"], in: Self.prometheusDirectory)
        #expect(checked == 0, "promtool check rules: \(checkOutput)")
        #expect(checkOutput.contains("SUCCESS"), "\(checkOutput)")
        let (tested, testOutput) = try Promtool.run(["test", "rules", "alerts.test.yml"], in: Self.prometheusDirectory)
        #expect(tested == 0, "promtool test rules: \(testOutput)")

        let rules = try String(
            contentsOf: Self.prometheusDirectory.appendingPathComponent("alerts.yml"), encoding: .utf8)
        let tests = try String(
            contentsOf: Self.prometheusDirectory.appendingPathComponent("alerts.test.yml"), encoding: .utf8)
        let alerts = rules.split(separator: "\n").compactMap { line -> String? in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            return trimmed.hasPrefix("- alert: ") ? String(trimmed.dropFirst(9)) : nil
        }
        #expect(
            Set(alerts) == [
                "JetbridgeCartSilent", "JetbridgeRecordsRefused", "JetbridgeStoreUnavailable", "JetbridgeDeviceLimited",
                "JetbridgeBagsMissingAfterArrival",
            ])
        for alert in alerts {
            // Each alert is tested at least once expecting it and once expecting nothing.
            let blocks = tests.components(separatedBy: "alertname: \(alert)\n").dropFirst()
            #expect(blocks.contains { $0.hasPrefix("        exp_alerts: []") }, "\(alert) is never tested not to fire")
            #expect(blocks.contains { $0.hasPrefix("        exp_alerts:\n") }, "\(alert) is never tested to fire")
        }
        let exposition = try await Self.scrape()
        let names = Self.metricNames(in: rules)
        #expect(!names.isEmpty)
        for name in names { #expect(exposition.has(name), "alerts.yml names \(name), which /metrics does not have") }
    }

    /// deploy/grafana/jetbridge.json: valid JSON, and every metric its queries name is one a real serve exposes.
    @Test func theDashboardQueriesOnlyMetricsThatExist() async throws {
        let url = Self.repository.appendingPathComponent("deploy/grafana/jetbridge.json")
        let dashboard = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any], "not a JSON object")
        #expect(dashboard["uid"] as? String == "jetbridge-aggregator")
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        var queries: [String] = []
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                if let expr = target["expr"] as? String { queries.append(expr) }
            }
        }
        let templating = (dashboard["templating"] as? [String: Any])?["list"] as? [[String: Any]] ?? []
        for variable in templating {
            if let definition = variable["definition"] as? String { queries.append(definition) }
        }
        #expect(queries.count >= 15, "\(queries.count) queries")
        let exposition = try await Self.scrape()
        var named: Set<String> = []
        for query in queries {
            let names = Self.metricNames(in: query)
            #expect(!names.isEmpty, "\(query) names no metric of ours")
            named.formUnion(names)
            for name in names { #expect(exposition.has(name), "the dashboard queries \(name) in \(query)") }
        }
        // Every family of ours is on the dashboard.
        for family in exposition.types.keys where family.hasPrefix("jetbridge_") {
            #expect(named.contains { $0 == family || $0.hasPrefix(family + "_") }, "no panel shows \(family)")
        }
    }
}
