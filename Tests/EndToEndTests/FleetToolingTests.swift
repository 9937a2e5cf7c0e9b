import Foundation
import Testing

/// What fleet tooling reads from a device: `sync --json`'s summary object and `status --json`'s last sync, after a
/// real sync through a real aggregator.
@Suite("Fleet tooling: sync --json and status --json")
struct FleetToolingTests {
    @Test func syncEndsWithOneSummaryObjectAndStatusShowsTheLastSyncsOutcomeDurationAndRate() async throws {
        _ = try await onThreads(1) { _ in try Self.run() }
    }

    static func run() throws {
        let fleet = try PipelineTests.Fleet()
        defer { try? FileManager.default.removeItem(at: fleet.sandbox.directory) }
        try fleet.enroll("cart-1")
        try fleet.capture("cart-1", orders: 3, bags: 2, sharedBag: UUID())
        let captured = try fleet.records("cart-1").count

        let before = try fleet.agent("cart-1", ["status", "--json"])
        try check(before.status == 0, "\(before)")
        let never = try JSONSerialization.jsonObject(with: Data(before.stdout.utf8)) as? [String: Any] ?? [:]
        try check(never["lastSyncOutcome"] is NSNull, "no sync yet: \(before.stdout)")

        let serve = try fleet.serve()
        defer { serve.kill9() }
        let sync = try fleet.sync("cart-1", ["--json"])
        let status = sync.wait(atMost: 60)
        try check(status == 0, "sync: \(sync.output)")
        let last = sync.output.split(separator: "\n").last.map(String.init) ?? ""
        let summary = try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any] ?? [:]
        try check(summary["outcome"] as? String == "drained", "\(last)")
        try check(summary["exitCode"] as? Int == 0, "\(last)")
        try check(summary["acknowledged"] as? Int == captured, "\(captured) records: \(last)")
        try check(summary["new"] as? Int == captured && summary["duplicates"] as? Int == 0, "\(last)")
        try check(summary["recordsSent"] as? Int ?? 0 >= captured, "\(last)")
        try check(summary["remaining"] as? Int == 0, "\(last)")
        try check((summary["durationSeconds"] as? Double ?? 0) > 0, "\(last)")
        try check(summary["recordsPerSecond"] is Double || summary["recordsPerSecond"] is Int, "\(last)")
        try check(summary.keys.contains("problem"), "every key is present: \(last)")
        try check(!sync.output.contains("sync drained: sent"), "no prose line with --json: \(sync.output)")

        let after = try fleet.agent("cart-1", ["status", "--json"])
        try check(after.status == 0, "\(after)")
        let object = try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any] ?? [:]
        try check(object["lastSyncOutcome"] as? String == "drained", "\(after.stdout)")
        try check(object["lastSyncAcknowledged"] as? Int == captured, "\(after.stdout)")
        let duration = object["lastSyncDurationSeconds"] as? Double ?? 0
        let rate = object["lastSyncRecordsPerSecond"] as? Double ?? -1
        try check(duration > 0 && rate >= 0, "\(after.stdout)")
        try check(abs(rate - Double(captured) / duration) <= max(1, rate * 0.05), "rate = acknowledged / duration")
        let text = try fleet.agent("cart-1", ["status"])
        try check(text.stdout.contains("last finished   drained"), "\(text.stdout)")
    }
}
