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
            let held = try #require(try archive.holdings()[flight])
            try archive.confirm(
                flight: flight, summary: held.summary, bytes: archive.bytes(flight: flight),
                at: now.addingTimeInterval(-age * 86_400))
        }
        var sizes: [String: Int64] = [:]
        for flight in archive.flights() { sizes[flight] = archive.bytes(flight: flight) }
        return (archive, sizes)
    }

    /// Every sync asks the ground about every flight the device holds; the same answer again is not a new
    /// confirmation, so a device that syncs every day still lets its records go `retention.days` after the first.
    @Test func theSameSummaryConfirmedAgainKeepsItsFirstConfirmationTime() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        let flight = "ZA103/2026-11-21"  // not confirmed by the set-up
        let summary = try #require(try archive.holdings()[flight]?.summary)
        // Whole seconds: the confirmations file keeps ISO 8601 times.
        let today = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let first = today.addingTimeInterval(-3 * 86_400)
        try archive.confirm(flight: flight, summary: summary, bytes: archive.bytes(flight: flight), at: first)
        for day in [2.0, 1.0, 0.0] {
            try archive.confirm(
                flight: flight, summary: summary, bytes: archive.bytes(flight: flight),
                at: today.addingTimeInterval(-day * 86_400))
        }
        #expect(archive.confirmations()[flight]?.confirmedAt == first)
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 2, maxBytes: 1 << 30)).contains(flight))
        // More records, confirmed: a new summary, whose days start then.
        let other = "ZA102/2026-11-21"
        try archive.append(try Self.scans(5, flight: other))
        let grown = try #require(try archive.holdings()[other]?.summary)
        try archive.confirm(flight: other, summary: grown, bytes: archive.bytes(flight: other), at: today)
        #expect(archive.confirmations()[other]?.confirmedAt == today)
    }

    /// Capture's cap counts only what the ground has not confirmed: records added to a large confirmed flight count
    /// their own bytes, not the whole file.
    @Test func theCapCountsOnlyTheRecordsAddedSinceAConfirmation() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, sizes) = try Self.archive(in: fixture.url)
        let unconfirmedFlight = "ZA103/2026-11-21"
        #expect(archive.unconfirmedBytes() == sizes[unconfirmedFlight])
        let flight = "ZA101/2026-11-21"
        try archive.append(try Self.scans(5, flight: flight))
        let added = archive.bytes(flight: flight) - (sizes[flight] ?? 0)
        #expect(added > 0 && added < (sizes[flight] ?? 0) / 10)
        #expect(archive.unconfirmedBytes() == (sizes[unconfirmedFlight] ?? 0) + added)
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
        let before = try archive.payloads(flight: "ZA103/2026-11-21")
        // A cap of one byte: every confirmed flight goes, the unconfirmed one stays whole.
        let released = try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: 1))
        #expect(released == ["ZA101/2026-11-21", "ZA102/2026-11-21"])
        #expect(archive.flights() == ["ZA103/2026-11-21"])
        #expect(try archive.payloads(flight: "ZA103/2026-11-21") == before && before.count == 100)
        // And capture stops: the unconfirmed records alone fill the cap.
        #expect(throws: AgentError.self) { try archive.checkRoom(AgentConfiguration.Retention(days: 7, maxBytes: 1)) }
        do {
            try archive.checkRoom(AgentConfiguration.Retention(days: 7, maxBytes: 1))
        } catch {
            #expect(error.code == .tryAgain)
            #expect(error.message.contains("retention.maxBytes 1"), "\(error.message)")
            // The command names the home it was given, so it can be pasted as it is.
            #expect(
                error.message.contains("run `jetbridge-agent --home \(fixture.url.path) sync`"), "\(error.message)")
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
        let confirmed = try #require(try archive.holdings()[flight]?.summary)
        try archive.append(try Self.scans(5, flight: flight))
        // A holds 5 records the ground has not confirmed: not released even past its days.
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == ["ZA102/2026-11-21"])
        #expect(archive.flights().contains(flight))
        // Once confirmed and released, 5 more: the flight's summary is the released 105 plus them.
        let all = try #require(try archive.holdings()[flight]?.summary)
        #expect(all.count == 105 && all != confirmed)
        try archive.confirm(flight: flight, summary: all, bytes: archive.bytes(flight: flight))
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == [flight])
        let later = try Self.scans(5, flight: flight)
        try archive.append(later)
        var expected = all
        for payload in later { expected.add(try RecordCoding.decode(payload)) }
        #expect(try archive.holdings()[flight]?.summary == expected)
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
        let held = try #require(try archive.holdings()[flight]?.summary)
        try archive.confirm(flight: flight, summary: held, bytes: archive.bytes(flight: flight))
        // B (unconfirmed above) and C are not confirmed; A is.
        let others = archive.bytes(flight: "ZA102/2026-11-21") + archive.bytes(flight: "ZA103/2026-11-21")
        #expect(archive.unconfirmedBytes() == others)
        try archive.unconfirm(flight: flight)
        let after = try #require(archive.confirmations()[flight])
        #expect(after.summary != held && after.released?.count == 100 && after.bytes == nil)
        #expect(try archive.holdings()[flight]?.summary == held, "the released 100 still count in the flight's summary")
        #expect(archive.unconfirmedBytes() == others + archive.bytes(flight: flight))
    }

    /// An order of `flight`, at `revision`, from cart-1.
    static func order(_ id: UUID, revision: Int, flight: String) throws -> Data {
        var order = Order.example
        order.id = id
        order.revision = revision
        order.flight = try FlightID(flight)
        order.device = "cart-1"
        return try RecordCoding.encode(.order(order))
    }

    /// What the ground holds for one device and flight: each order at its newest revision under that revision's
    /// flight, each scan once.
    static func groundSummary(_ records: [Data], flight: String) throws -> DeliverySummary {
        var newest: [UUID: (Int, String)] = [:]
        var summary = DeliverySummary()
        for payload in records {
            switch try RecordCoding.decode(payload) {
            case .order(let order):
                if (newest[order.id]?.0 ?? 0) < order.revision { newest[order.id] = (order.revision, order.flight.rawValue) }
            case .scan(let scan):
                if scan.flight.rawValue == flight { summary.add(scan: scan.id) }
            }
        }
        for (id, (revision, orderFlight)) in newest where orderFlight == flight { summary.add(order: id, revision: revision) }
        return summary
    }

    @Test(arguments: ["ZA101/2026-11-21", "ZA102/2026-11-21"])
    func anOrderAmendedAfterItsFlightWasReleasedIsCountedOnceAtItsNewRevision(amendedInto: String) throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = "ZA101/2026-11-21"
        let ids = [UUID(), UUID(), UUID()]
        var sent = try ids.map { try Self.order($0, revision: 1, flight: flight) }
        try archive.append(sent)
        let first = try #require(try archive.holdings()[flight]?.summary)
        #expect(first == (try Self.groundSummary(sent, flight: flight)))
        try archive.confirm(flight: flight, summary: first, bytes: archive.bytes(flight: flight))
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == [flight])

        // The first order amended after the release (in the same flight, or moved to another), and a scan of the
        // flight so that it has a file again: the device's summaries must be the ground's.
        let amended = try Self.order(ids[0], revision: 2, flight: amendedInto)
        let scan = try Self.scans(1, flight: flight)
        try archive.append([amended] + scan)
        sent += [amended] + scan
        for summarised in Set([flight, amendedInto]) {
            #expect(
                try archive.holdings()[summarised]?.summary == (try Self.groundSummary(sent, flight: summarised)),
                "\(summarised): counted the amended order twice")
        }

        // Confirmed and released again, and amended once more: still the ground's summary.
        for confirmed in Set([flight, amendedInto]) {
            let held = try #require(try archive.holdings()[confirmed]?.summary)
            try archive.confirm(flight: confirmed, summary: held, bytes: archive.bytes(flight: confirmed))
        }
        #expect(Set(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30))) == Set([flight, amendedInto]))
        let third = try Self.order(ids[0], revision: 3, flight: flight)
        try archive.append([third])
        sent.append(third)
        #expect(try archive.holdings()[flight]?.summary == (try Self.groundSummary(sent, flight: flight)))
    }

    /// An order released by retention at revision 2, then its revision 1 acknowledged again (a set-aside older
    /// revision resent with `set-aside resend`: the ground answers it `stored` as a duplicate, and sync appends it to
    /// the flight's file). The ground holds the order once, at revision 2; so must the summary. Before, it counted
    /// the order twice, every ask was answered `mismatch`, and the flight was never confirmed again.
    @Test func anOlderRevisionAcknowledgedAgainAfterItsOrderWasReleasedIsNotCountedTwice() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = "ZA101/2026-11-21"
        let id = UUID()
        var sent = [try Self.order(id, revision: 2, flight: flight)] + (try Self.scans(2, flight: flight))
        try archive.append(sent)
        let held = try #require(try archive.holdings()[flight]?.summary)
        try archive.confirm(flight: flight, summary: held, bytes: archive.bytes(flight: flight))
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 0, maxBytes: 1 << 30)) == [flight])

        let older = try Self.order(id, revision: 1, flight: flight)
        try archive.append([older])
        sent.append(older)
        let summary = try #require(try archive.holdings()[flight]?.summary)
        #expect(summary == (try Self.groundSummary(sent, flight: flight)))
        #expect(summary.count == 3 && summary == held)
        // The same revision acknowledged again is not a second record either.
        try archive.append([try Self.order(id, revision: 2, flight: flight)])
        #expect(try archive.holdings()[flight]?.summary == held)
    }

    /// A crash inside a release: the marks saved as pending, then (or not yet) the flight's file renamed aside. Each
    /// state reads whole: not released while the file is in place, released once it was renamed; records acknowledged
    /// after the crash build on the confirmed summary either way, and the next retention pass tidies up.
    @Test(arguments: [false, true])
    func aReleaseACrashInterruptedIsUndoneOrFinishedAsItsFileSays(renamed: Bool) throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        let flight = "ZA101/2026-11-21"
        let confirmed = try #require(try archive.holdings()[flight]?.summary)
        // What applyRetention writes first (the marks, pending) and, when `renamed`, does next.
        var stored = archive.confirmations()
        let confirmation = try #require(stored[flight])
        stored[flight]?.releasing = .init(
            at: Date(), count: confirmation.count, digest: confirmation.digest, orders: nil)
        try archive.save(stored)
        if renamed { try Files.rename(archive.file(for: flight), to: archive.asideFile(for: flight)) }

        let read = try #require(archive.confirmations()[flight])
        #expect(read.releasing == nil)
        #expect((read.releasedAt != nil) == renamed)
        #expect(read.released == (renamed ? confirmed : nil))
        #expect(archive.flights().contains(flight) == !renamed)
        // As after a release that finished: a flight with no file left is not summarised; while its file is in place,
        // its summary is the confirmed one.
        #expect(try archive.holdings()[flight]?.summary == (renamed ? nil : confirmed))

        // Records of the flight acknowledged after the crash build on it.
        try archive.append(try Self.scans(5, flight: flight))
        #expect(try archive.holdings()[flight]?.summary.count == 105)

        // The next pass saves the settled marks and removes the renamed file; nothing more is released (the flight
        // now holds records the ground has not confirmed).
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: .max)) == [])
        #expect(!FileManager.default.fileExists(atPath: archive.asideFile(for: flight).path))
        let data = try Data(contentsOf: archive.confirmationsFile)
        let saved = try #require(try SyncState.decoder.decode([String: DeliveryArchive.Confirmation].self, from: data)[flight])
        #expect(saved.releasing == nil)
        #expect((saved.releasedAt != nil) == renamed)
        #expect(try archive.holdings()[flight]?.summary.count == 105)
        #expect(try archive.payloads(flight: flight).count == (renamed ? 5 : 105))
    }

    /// A device whose clock was reset (to 2000, which capture accepts) confirms a flight at that time; once the
    /// clock is put right, the flight must not count as weeks old: its days start again. Before, the first sync after
    /// the fix released it at once. A time more than a day ahead of now starts again too.
    @Test(arguments: [-26.0 * 365, 30])
    func aConfirmationTimeNoClockCouldHaveReadTrulyStartsItsDaysAgain(offsetDays days: Double) throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = "ZA101/2026-11-21"
        try archive.append(try Self.scans(3, flight: flight))
        let now = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let held = try #require(try archive.holdings()[flight]?.summary)
        try archive.confirm(
            flight: flight, summary: held, bytes: archive.bytes(flight: flight), at: now.addingTimeInterval(days * 86_400))
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: 1 << 30), now: now) == [])
        #expect(archive.confirmations()[flight]?.confirmedAt == now)
        #expect(archive.flights() == [flight])
        // Its days then run from now as for any flight.
        let later = now.addingTimeInterval(8 * 86_400)
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 7, maxBytes: 1 << 30), now: later) == [flight])
    }

    @Test func aReleaseLeavesNoFileAsideAndNoPendingMarks() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (archive, _) = try Self.archive(in: fixture.url)
        #expect(try archive.applyRetention(AgentConfiguration.Retention(days: 2, maxBytes: .max)) == ["ZA101/2026-11-21"])
        let names = try FileManager.default.contentsOfDirectory(atPath: archive.directory.path)
        #expect(!names.contains { $0.hasSuffix(".releasing") }, "\(names)")
        let data = try Data(contentsOf: archive.confirmationsFile)
        let saved = try SyncState.decoder.decode([String: DeliveryArchive.Confirmation].self, from: data)
        #expect(saved.values.allSatisfy { $0.releasing == nil })
        #expect(saved["ZA101/2026-11-21"]?.released?.count == 100)
    }
}
