import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import Testing

/// The summary and its answer (docs/PROTOCOL.md, "Proof of delivery"): the digest, the wire bytes of the worked
/// example (written into the page by Python's msgpack and a Python digest: a second implementation), and the checks
/// every summary passes on the ground.
@Suite("Proof of delivery: protocol")
struct ProofOfDeliveryProtocolTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let scanID = UUID(uuidString: "7C9E6679-7425-40DE-944B-E07FC1F90AE7")!

    static var exampleSummary: DeliverySummary {
        var summary = DeliverySummary()
        summary.add(order: exampleOrder.id, revision: 1)
        summary.add(scan: scanID)
        return summary
    }

    /// The page's text with runs of white space as one space, so a hex dump wrapped anywhere still matches.
    static func page() throws -> String {
        let text = try String(
            contentsOf: packageRoot.appendingPathComponent("docs/PROTOCOL.md"), encoding: .utf8)
        return text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    static func hex(_ data: Data) -> String { data.map { String(format: "%02x", $0) }.joined(separator: " ") }

    @Test func elementHashesAndDigestAreThePagesNumbers() throws {
        #expect(DeliverySummary.hash(Array("o:0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D:1".utf8)) == 0xd81b_ee1f_31df_639f)
        #expect(DeliverySummary.hash(Array("s:7C9E6679-7425-40DE-944B-E07FC1F90AE7".utf8)) == 0xbced_e07b_fe5c_4b56)
        let summary = Self.exampleSummary
        #expect(summary.count == 2)
        #expect(summary.digest == 0x9509_ce9b_303b_aef5)
        #expect(summary.digestBytes == Data([0x95, 0x09, 0xce, 0x9b, 0x30, 0x3b, 0xae, 0xf5]))
        let page = try Self.page()
        for text in ["d81bee1f31df639f", "bcede07bfe5c4b56", "9509ce9b303baef5", "fb0a80dafc685e3c"] {
            #expect(page.contains(text), "docs/PROTOCOL.md lacks \(text)")
        }
    }

    @Test func theDigestDoesNotDependOnOrderAndSeesEveryChange() {
        let ids = (0..<200).map { _ in UUID() }
        var forward = DeliverySummary()
        var backward = DeliverySummary()
        for (index, id) in ids.enumerated() { forward.add(order: id, revision: index % 3 + 1) }
        for (index, id) in ids.enumerated().reversed() { backward.add(order: id, revision: index % 3 + 1) }
        #expect(forward == backward)
        var revised = DeliverySummary()
        for (index, id) in ids.enumerated() { revised.add(order: id, revision: index == 7 ? 9 : index % 3 + 1) }
        #expect(revised.count == forward.count && revised.digest != forward.digest)
        // Lower-case ids hash as their canonical upper-case text.
        var lower = DeliverySummary()
        lower.add(scan: Self.scanID)
        #expect(lower.digest == DeliverySummary.hash(Array("s:7C9E6679-7425-40DE-944B-E07FC1F90AE7".utf8)))
    }

    @Test func theWorkedExamplesBytesAreWhatTheCodeWrites() throws {
        let page = try Self.page()
        let summary = FlightSummary(device: "cart-1", flight: "ZA101/2026-11-21", summary: Self.exampleSummary)
        let summaryBytes = try WireCoding.encode(summary)
        #expect(summaryBytes.count == 79)
        #expect(page.contains(Self.hex(summaryBytes)), "docs/PROTOCOL.md lacks the summary bytes \(Self.hex(summaryBytes))")

        let confirmed = SummaryAnswer.comparing(summary, with: Self.exampleSummary)
        #expect(confirmed.status == .confirmed)
        let confirmedBytes = try WireCoding.encode(confirmed)
        #expect(confirmedBytes.count == 103)
        #expect(page.contains(Self.hex(confirmedBytes)), "docs/PROTOCOL.md lacks \(Self.hex(confirmedBytes))")

        var lost = DeliverySummary()
        lost.add(order: exampleOrder.id, revision: 1)
        let mismatch = SummaryAnswer.comparing(summary, with: lost)
        #expect(mismatch.status == .mismatch && mismatch.count == 1)
        let mismatchBytes = try WireCoding.encode(mismatch)
        #expect(mismatchBytes.count == 102)
        #expect(page.contains(Self.hex(mismatchBytes)), "docs/PROTOCOL.md lacks \(Self.hex(mismatchBytes))")

        // And back: what the page shows decodes to the same values.
        guard case .success(let decoded) = FlightSummary.decode(summaryBytes) else {
            Issue.record("the example summary does not decode")
            return
        }
        #expect(decoded == summary && decoded.summary == Self.exampleSummary)
        #expect(AckChannelType.of(summaryBytes) == "summary")
        #expect(AckChannelType.of(confirmedBytes) == "summary-answer")
        #expect(AckChannelType.of(try WireCoding.encode(Ack.example)) == nil)
        #expect(try WireCoding.decode(SummaryAnswer.self, from: mismatchBytes).held == lost)
    }

    /// A map written key by key, for malformed summaries.
    static func map(_ pairs: [(String, MessagePackValue)]) throws -> Data {
        try MessagePackEncoder().encode(MessagePackValue.map(pairs.map { (.string($0.0), $0.1) }))
    }

    static func fields(
        v: MessagePackValue = .int(1), device: MessagePackValue = .string("cart-1"),
        flight: MessagePackValue = .string("ZA101/2026-11-21"), count: MessagePackValue = .int(2),
        digest: MessagePackValue = .binary(Data(repeating: 1, count: 8))
    ) -> [(String, MessagePackValue)] {
        [
            ("v", v), ("type", .string("summary")), ("device", device), ("flight", flight), ("count", count),
            ("digest", digest),
        ]
    }

    @Test(arguments: [
        ("missing count", fields().filter { $0.0 != "count" }, "count: missing"),
        ("count as text", fields(count: .string("2")), "count"),
        ("negative count", fields(count: .int(-1)), "count -1 is not 0…1000000000"),
        ("huge count", fields(count: .uint(UInt64.max)), "count"),
        ("short digest", fields(digest: .binary(Data([1, 2, 3]))), "digest has 3 bytes"),
        ("digest as text", fields(digest: .string("9509ce9b303baef5")), "digest"),
        ("bad flight", fields(flight: .string("ZA101/2026-02-30")), "flight"),
        ("bad device", fields(device: .string("../etc")), "device"),
        ("device as int", fields(device: .int(7)), "device"),
        ("version 2", fields(v: .int(2)), "v 2 is not a version"),
        // A later version that dropped a key of version 1: still unsupported-version, not rejected for the key.
        ("version 2 without a count", fields(v: .int(2)).filter { $0.0 != "count" }, "v 2 is not a version"),
    ])
    func everyMalformedSummaryIsRefusedWithWhatAndWhere(
        _ name: String, _ pairs: [(String, MessagePackValue)], _ expected: String
    ) throws {
        let frame = try Self.map(pairs)
        #expect(AckChannelType.of(frame) == "summary")
        switch FlightSummary.decode(frame) {
        case .success: Issue.record("\(name): accepted")
        case .failure(let rejection):
            #expect(rejection.reason.contains(expected), "\(name): \(rejection.reason)")
            #expect(rejection.reason.hasPrefix("summary: "))
            let answer = rejection.answer(owner: "cart-1")
            #expect(answer.status == (name.hasPrefix("version 2") ? .unsupportedVersion : .rejected))
            #expect(answer.device == "cart-1" && answer.count == nil)
        }
    }

    @Test func fuzzedSummariesNeverCrashTheDecoder() throws {
        var generator = SystemRandomNumberGenerator()
        let good = try WireCoding.encode(
            FlightSummary(device: "cart-1", flight: "ZA101/2026-11-21", summary: Self.exampleSummary))
        for _ in 0..<5_000 {
            var frame = good
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<frame.count, using: &generator)
                frame[index] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { frame = frame.prefix(Int.random(in: 0...frame.count, using: &generator)) }
            switch FlightSummary.decode(frame) {
            case .success(let summary): #expect(summary.digest.count == 8 && summary.count >= 0)
            case .failure(let rejection): #expect(!rejection.reason.isEmpty)
            }
        }
    }
}
