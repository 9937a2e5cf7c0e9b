import Foundation
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import SystemSupport
import Testing

@testable import JetbridgeAgent

/// Retention of what the ground acknowledged (docs/AGENT.md, "Retention"): confirmed flights go, oldest first, when
/// past their days or the cap; a flight the ground has not confirmed is never deleted, and capture stops instead.
@Suite("Retention of acknowledged records")
struct RetentionTests {
    static func scans(_ count: Int, flight: String) throws -> [Data] {
        try (0..<count).map { _ in
            try RecordCoding.encode(
                .scan(
                    Scan(
                        id: UUID(),
                        tag: LuggageTag(id: UUID(), owner: try Owner(initial: "D", family: "ZMU"), weight: 42),
                        point: .origin, scannedAt: Date(timeIntervalSince1970: 1_795_255_300),
                        flight: try FlightID(flight), device: "cart-1")))
        }
    }

    /// An archive with flights A (confirmed 3 days ago), B (confirmed 1 day ago) and C (never confirmed), 100 scans
    /// each.
    static func archive(in directory: URL) throws -> (DeliveryArchive, sizes: [String: Int64]) {
        let archive = DeliveryArchive(home: AgentHome(url: directory))
        let now = Date()
        for (flight, age) in [("ZA101/2026-11-21", 3.0), ("ZA102/2026-11-21", 1.0), ("ZA103/2026-11-21", -1)] {
            try archive.append(try scans(100, flight: flight))
            guard age >= 0 else { continue }
            let held = try #require(archive.holdings()[flight])
            try archive.confirm(
                flight: flight, summary: held.summary, bytes: archive.bytes(flight: flight),
                at: now.addingTimeInterval(-age * 86_400))
        }
        var sizes: [String: Int64] = [:]
        for flight in archive.flights() { sizes[flight] = archive.bytes(flight: flight) }
        return (archive, sizes)
    }

    @Test func underTheCapEverythingIsKeptAndPastItTheOldestConfirmedGoFirst() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, sizes) = try Self.archive(in: fixture.url)
        let total = sizes.values.reduce(0, +)
        // Under the cap and within the days: nothing goes.
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: total)) == [])
        #expect(archive.flights().count == 3)
        // One byte under the total: the oldest confirmed (A) goes, and that is enough.
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: total - 1)) == ["ZA101/2026-11-21"])
        #expect(archive.flights() == ["ZA102/2026-11-21", "ZA103/2026-11-21"])
        // A released flight still counts as held by the ground: its summary is kept.
        let released = try #require(archive.confirmations()["ZA101/2026-11-21"])
        #expect(released.releasedAt != nil && released.released?.count == 100)
    }

    @Test func unconfirmedRecordsAreNeverDeletedWhateverTheCap() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        let before = archive.payloads(flight: "ZA103/2026-11-21")
        // A cap of one byte: every confirmed flight goes, the unconfirmed one stays whole.
        let released = try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: 1))
        #expect(released == ["ZA101/2026-11-21", "ZA102/2026-11-21"])
        #expect(archive.flights() == ["ZA103/2026-11-21"])
        #expect(archive.payloads(flight: "ZA103/2026-11-21") == before && before.count == 100)
        // And capture stops: the unconfirmed records alone fill the cap.
        #expect(throws: AgentError.self) { try archive.checkRoom(AgentConfiguration.Retention(days: 7, maxBytes: 1)) }
        do {
            try archive.checkRoom(AgentConfiguration.Retention(days: 7, maxBytes: 1))
        } catch {
            #expect(error.code == .tryAgain)
            #expect(error.message.contains("retention.maxBytes 1"), "\(error.message)")
            #expect(error.message.contains("run `jetbridge-agent sync`"), "\(error.message)")
        }
        // Room enough for them: capture goes on.
        try archive.checkRoom(AgentConfiguration.Retention(days: 7, maxBytes: archive.bytes(flight: "ZA103/2026-11-21") + 1))
    }

    @Test func confirmedFlightsGoAfterTheirDaysEvenUnderTheCap() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 2, maxBytes: 1 << 30)) == ["ZA101/2026-11-21"])
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0.5, maxBytes: 1 << 30)) == ["ZA102/2026-11-21"])
        #expect(archive.flights() == ["ZA103/2026-11-21"])
    }

    @Test func aFlightWithRecordsAddedAfterItsConfirmationIsNotReleasedAndItsSummaryBuildsOnTheReleasedOne() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        let flight = "ZA101/2026-11-21"
        let confirmed = try #require(archive.holdings()[flight]?.summary)
        try archive.append(try Self.scans(5, flight: flight))
        // A holds 5 records the ground has not confirmed: not released even past its days.
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == ["ZA102/2026-11-21"])
        #expect(archive.flights().contains(flight))
        // Once confirmed and released, 5 more: the flight's summary is the released 105 plus them.
        let all = try #require(archive.holdings()[flight]?.summary)
        #expect(all.count == 105 && all != confirmed)
        try archive.confirm(flight: flight, summary: all, bytes: archive.bytes(flight: flight))
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == [flight])
        let later = try Self.scans(5, flight: flight)
        try archive.append(later)
        var expected = all
        for payload in later { expected.add(try RecordCoding.decode(payload)) }
        #expect(archive.holdings()[flight]?.summary == expected)
    }

    @Test func aFlightTheGroundNoLongerHoldsIsNoLongerConfirmedButItsReleasedPartStaysCounted() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        try archive.unconfirm(flight: "ZA102/2026-11-21")
        #expect(archive.confirmations()["ZA102/2026-11-21"] == nil)
        // A released flight with later records: the released summary stays, the confirmation of the rest goes.
        let flight = "ZA101/2026-11-21"
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 2, maxBytes: 1 << 30)) == [flight])
        try archive.append(try Self.scans(5, flight: flight))
        let held = try #require(archive.holdings()[flight]?.summary)
        try archive.confirm(flight: flight, summary: held, bytes: archive.bytes(flight: flight))
        // B (unconfirmed above) and C are not confirmed; A is.
        let others = archive.bytes(flight: "ZA102/2026-11-21") + archive.bytes(flight: "ZA103/2026-11-21")
        #expect(archive.unconfirmedBytes() == others)
        try archive.unconfirm(flight: flight)
        let after = try #require(archive.confirmations()[flight])
        #expect(after.summary != held && after.released?.count == 100 && after.bytes == nil)
        #expect(archive.holdings()[flight]?.summary == held, "the released 100 still count in the flight's summary")
        #expect(archive.unconfirmedBytes() == others + archive.bytes(flight: flight))
    }
}
