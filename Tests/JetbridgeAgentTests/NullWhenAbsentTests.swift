import Foundation
import SystemSupport
import Testing

@testable import JetbridgeAgent

/// `status --json` and `sync --json` write every key, an absent value as `null` (docs/AGENT.md): scripts tell
/// "never synced" from a misspelt key.
@Suite struct NullWhenAbsentTests {
    static let summary = SyncSummary(
        outcome: "failed", result: "failed", exitCode: 69, recordsSent: 0, batchesSent: 0, resends: 0,
        acknowledged: 0, new: 0, duplicates: 0, setAside: 0, durationSeconds: 0, recordsPerSecond: 0,
        acknowledgedThrough: 0, remaining: nil, problem: nil, aggregators: [])

    @Test func aSummaryWritesEveryKeyWithNullForWhatIsAbsent() throws {
        let data = try JSONEncoder().encode(Self.summary)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(Set(object.keys) == Set(SyncSummary.CodingKeys.allCases.map(\.stringValue)))
        #expect(object["remaining"] is NSNull)
        #expect(object["problem"] is NSNull)
    }

    @Test func aPresentValueIsWrittenAsItselfAndReadsBack() throws {
        var summary = Self.summary
        summary.remaining = 12
        summary.problem = "cannot reach tcp://ground:5560"
        let data = try JSONEncoder().encode(summary)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["remaining"] as? Int == 12)
        #expect(try JSONDecoder().decode(SyncSummary.self, from: data) == summary)
        #expect(try JSONDecoder().decode(SyncSummary.self, from: JSONEncoder().encode(Self.summary)) == Self.summary)
    }

    @Test func aMissingKeyReadsAsAbsent() throws {
        let data = try JSONEncoder().encode(Self.summary)
        var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        object.removeValue(forKey: "problem")
        let read = try JSONDecoder().decode(SyncSummary.self, from: JSONSerialization.data(withJSONObject: object))
        #expect(read.problem == nil)
    }
}
