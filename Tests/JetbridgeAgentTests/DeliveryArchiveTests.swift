import FileQueue
import Foundation
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import SystemSupport
import Testing

@testable import JetbridgeAgent

/// The archive of acknowledged records (`delivered/`, docs/AGENT.md "Proof of delivery"): one file per flight of
/// length- and checksum-framed records, read back up to the first frame a crash cut short.
@Suite("The archive of acknowledged records")
struct DeliveryArchiveTests {
    static let flights = ["ZA101/2026-11-21", "ZA102/2026-11-21", "ZA103/2026-11-21"]

    static func scan(flight: String) throws -> Data {
        try RecordCoding.encode(
            .scan(
                Scan(
                    id: UUID(), tag: LuggageTag(id: UUID(), owner: try Owner(initial: "D", family: "ZMU"), weight: 42),
                    point: .origin, scannedAt: Date(timeIntervalSince1970: 1_795_255_300), flight: try FlightID(flight),
                    device: "cart-1")))
    }

    static func order(_ id: UUID, revision: Int, flight: String) throws -> Data {
        try RecordCoding.encode(
            .order(
                Order(
                    id: id, revision: revision, flight: try FlightID(flight), seat: try Seat("12C"),
                    lineItems: [LineItem.example], currency: "EUR",
                    createdAt: Date(timeIntervalSince1970: 1_795_255_300), device: "cart-1")))
    }

    @Test func recordsOfInterleavedFlightsGoToTheirFlightsFilesInArrivalOrder() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        // A, B, A, C, B, A in one append, then B and C in a second one.
        let pattern = [0, 1, 0, 2, 1, 0]
        let first = try pattern.map { try Self.scan(flight: Self.flights[$0]) }
        try archive.append(first)
        let second = try [1, 2].map { try Self.scan(flight: Self.flights[$0]) }
        try archive.append(second)
        #expect(archive.flights() == Self.flights)
        for (index, flight) in Self.flights.enumerated() {
            let expected =
                zip(pattern, first).filter { $0.0 == index }.map(\.1)
                + zip([1, 2], second).filter { $0.0 == index }.map(\.1)
            #expect(try archive.payloads(flight: flight) == expected, "\(flight)")
        }
    }

    /// A flight's file that is there and cannot be read (a directory in its place here: the tests may run as root,
    /// which reads any file) is an error naming it, not a flight that holds nothing. Read as empty, the flight was
    /// summarised as holding no records, and the ground's `mismatch` sent the device looking for records it held.
    /// A flight with no file holds nothing.
    @Test func aFlightFileThatCannotBeReadIsAnErrorNotAnEmptyFlight() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        try archive.append([try Self.scan(flight: Self.flights[0])])
        #expect(try archive.payloads(flight: Self.flights[1]).isEmpty)
        let unreadable = archive.file(for: Self.flights[1])
        try FileManager.default.createDirectory(at: unreadable, withIntermediateDirectories: false)
        #expect(archive.flights() == Array(Self.flights.prefix(2)))
        for read in [{ _ = try archive.holdings() }, { _ = try archive.heldRecords() }] {
            do {
                try read()
                Issue.record("a flight file that cannot be read was read as empty")
            } catch let error as AgentError {
                #expect(error.message.contains("cannot read \(unreadable.path)"), "\(error.message)")
                #expect(error.message.contains(Self.flights[1]), "\(error.message)")
            }
        }
    }

    /// Records a sync sent again after a `mismatch` are passed as `held`: only a payload equal to the one held for
    /// its id is left out, so a new revision of a held order (other bytes, same id) and new records are written.
    @Test func recordsHeldAlreadyAreNotWrittenAgainButOtherRevisionsOfThemAre() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = Self.flights[0]
        let id = UUID()
        let first = try Self.order(id, revision: 1, flight: flight)
        let scan = try Self.scan(flight: flight)
        try archive.append([first, scan])
        let held = try #require(try archive.holdings()[flight])
        #expect(held.payloads.count == 2)
        var resent: [UUID: Data] = [:]
        var stream = RecordCoding.Stream()
        for payload in held.payloads { resent[try stream.identity(payload).id] = payload }
        // The resent copies come back acknowledged with a second revision of the order and a new scan.
        let second = try Self.order(id, revision: 2, flight: flight)
        let newScan = try Self.scan(flight: flight)
        var tails = DeliveryArchive.TailChecks()
        try archive.append(held.payloads + [second, newScan], tails: &tails, held: resent)
        #expect(try archive.payloads(flight: flight) == [first, scan, second, newScan])
        // Nothing new at all: nothing written, and no flight reported as appended to.
        let appended = try archive.append(held.payloads, tails: &tails, held: resent)
        #expect(appended.isEmpty)
        #expect(try archive.payloads(flight: flight) == [first, scan, second, newScan])
    }

    @Test func aFrameCutShortOrFailingItsChecksumEndsWhatIsReadBack() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = Self.flights[0]
        let records = try (0..<5).map { _ in try Self.scan(flight: flight) }
        try archive.append(records)
        let file = archive.file(for: flight)
        let whole = try Data(contentsOf: file)
        // The last frame cut short by a crash: the four before it are read.
        try whole.dropLast(3).write(to: file)
        #expect(try archive.payloads(flight: flight) == Array(records.prefix(4)))
        // A flipped byte in the third record's payload: its checksum fails, and the two before it are read.
        var damaged = whole
        let third = 2 * (8 + records[0].count) + 8 + 5
        damaged[damaged.startIndex + third] ^= 0xFF
        try damaged.write(to: file)
        #expect(try archive.payloads(flight: flight) == Array(records.prefix(2)))
        // An empty file holds nothing.
        try Data().write(to: file)
        #expect(try archive.payloads(flight: flight).isEmpty)
    }

    /// A crash in the middle of an append, before its `fsync`, leaves part of a frame at the end of the file. The next
    /// sync's first append to that flight cuts it off, so what it appends is read back (before, reading stopped at the
    /// torn frame, and the flight could never be confirmed).
    @Test func aTornEndIsCutBeforeASyncsFirstAppendToItsFlight() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = Self.flights[0]
        let records = try (0..<5).map { _ in try Self.scan(flight: flight) }
        try archive.append(records)
        let file = archive.file(for: flight)
        try Data(contentsOf: file).dropLast(3).write(to: file)
        let frame = Int64(8 + records[0].count)
        var tails = DeliveryArchive.TailChecks()
        let later = try (0..<2).map { _ in try Self.scan(flight: flight) }
        try archive.append(later, tails: &tails)
        let cut = tails.takeCuts()
        #expect(tails.cut.isEmpty && tails.checked == [flight])
        #expect(cut.map(\.flight) == [flight])
        #expect(cut.map(\.bytes) == [frame - 3])
        #expect(try archive.payloads(flight: flight) == Array(records.prefix(4)) + later)
        #expect(archive.bytes(flight: flight) == 6 * frame)
        // The bytes cut are kept beside the file, and read as no flight.
        let torn = try FileManager.default.contentsOfDirectory(atPath: archive.directory.path).filter {
            $0.contains(".records.torn-")
        }
        #expect(torn.count == 1)
        let kept = try Data(contentsOf: archive.directory.appendingPathComponent(try #require(torn.first)))
        #expect(Int64(kept.count) == frame - 3)
        #expect(archive.flights() == [flight])
        // A file with nothing torn is left as it is.
        var again = DeliveryArchive.TailChecks()
        try archive.append([try Self.scan(flight: flight)], tails: &again)
        #expect(again.cut.isEmpty)
        #expect(try archive.payloads(flight: flight).count == 7)
    }

    /// A flight confirmed while its file ends in a torn write (no append to it in that sync: the ground set the
    /// resent records aside) has the torn end cut before the size is recorded. Before, the file's size was recorded,
    /// the torn end lay inside what the ground confirmed, no later append cut it, and every frame appended after it
    /// was invisible: the flight could never be confirmed again.
    @Test func aTornEndIsCutBeforeAConfirmationRecordsTheSize() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = Self.flights[0]
        let records = try (0..<5).map { _ in try Self.scan(flight: flight) }
        try archive.append(records)
        let file = archive.file(for: flight)
        let frame = Int64(8 + records[0].count)
        try Data(contentsOf: file).dropLast(3).write(to: file)
        let holding = try #require(try archive.holdings()[flight])
        #expect(holding.wholeBytes == 4 * frame)
        #expect(holding.payloads.count == 4)

        var tails = DeliveryArchive.TailChecks()
        let size = try archive.sizeToConfirm(flight: flight, wholeBytes: holding.wholeBytes, tails: &tails)
        #expect(size == 4 * frame)
        #expect(archive.bytes(flight: flight) == 4 * frame)
        #expect(tails.takeCuts().map(\.bytes) == [frame - 3])
        try archive.confirm(flight: flight, summary: holding.summary, bytes: size)
        // What a later sync appends is read back, and the file holds nothing past what was confirmed but that.
        let later = try Self.scan(flight: flight)
        #expect(try archive.append([later]).isEmpty)
        #expect(try archive.payloads(flight: flight) == Array(records.prefix(4)) + [later])
        #expect(archive.unconfirmedBytes() == frame)
        // A whole file is confirmed at its size, with nothing cut.
        let whole = try #require(try archive.holdings()[flight]?.wholeBytes)
        #expect(try archive.sizeToConfirm(flight: flight, wholeBytes: whole, tails: &tails) == 5 * frame)
        #expect(tails.cut.isEmpty)
        // A file appended to since the summary was read (another sync on this home), then torn: its size is not
        // known, and nothing is cut.
        try archive.append([try Self.scan(flight: flight)])
        let handle = try FileHandle(forWritingTo: file)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(repeating: 7, count: 5))
        try handle.close()
        #expect(try archive.sizeToConfirm(flight: flight, wholeBytes: whole, tails: &tails) == nil)
        #expect(tails.cut.isEmpty)
        #expect(archive.bytes(flight: flight) == 6 * frame + 5)
    }

    /// A frame that fails inside what the ground confirmed is damage to stored data, not a torn write: nothing is cut
    /// (by an append or by a confirmation), and the frames after it stay in the file.
    @Test func aFrameFailingInsideWhatTheGroundConfirmedIsNotCut() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let flight = Self.flights[0]
        let records = try (0..<5).map { _ in try Self.scan(flight: flight) }
        try archive.append(records)
        let file = archive.file(for: flight)
        let size = archive.bytes(flight: flight)
        try archive.confirm(flight: flight, summary: DeliverySummary(), bytes: size)
        var damaged = try Data(contentsOf: file)
        damaged[damaged.startIndex + 2 * (8 + records[0].count) + 8 + 5] ^= 0xFF
        try damaged.write(to: file)
        // Nor when the flight is confirmed again: the file's size is recorded, as before.
        let holding = try #require(try archive.holdings()[flight])
        var tails = DeliveryArchive.TailChecks()
        #expect(try archive.sizeToConfirm(flight: flight, wholeBytes: holding.wholeBytes, tails: &tails) == size)
        #expect(tails.cut.isEmpty)
        #expect(try archive.append([try Self.scan(flight: flight)]).isEmpty)
        #expect(archive.bytes(flight: flight) == size + Int64(8 + records[0].count))
        #expect(try archive.payloads(flight: flight) == Array(records.prefix(2)))
    }

    /// A `confirmed.json` that does not decode is moved aside before anything saves over it (before, it read as
    /// empty and the next confirmation replaced it unseen); one that decodes, or none, is left alone.
    @Test func aConfirmationsFileThatDoesNotDecodeIsKeptAside() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        #expect(try archive.setAsideDamagedConfirmations() == nil)
        try archive.confirm(flight: Self.flights[0], summary: DeliverySummary(), bytes: 0)
        #expect(try archive.setAsideDamagedConfirmations() == nil)
        #expect(archive.confirmations().count == 1)

        try Data("{not json".utf8).write(to: archive.confirmationsFile)
        let moved = try #require(try archive.setAsideDamagedConfirmations(now: Date(timeIntervalSince1970: 1_800_000_000)))
        #expect(moved.file.lastPathComponent == "confirmed.json.damaged-1800000000")
        #expect(try Data(contentsOf: moved.file) == Data("{not json".utf8))
        #expect(!FileManager.default.fileExists(atPath: archive.confirmationsFile.path))
        #expect(archive.flights().isEmpty)
        try archive.confirm(flight: Self.flights[1], summary: DeliverySummary(), bytes: 0)
        #expect(Array(archive.confirmations().keys) == [Self.flights[1]])
        #expect(try Data(contentsOf: moved.file) == Data("{not json".utf8))

        // One that is there and cannot be read (here a directory in its place; for another user, no permission)
        // ends the sync with its name, rather than reading as empty and being saved over.
        try FileManager.default.removeItem(at: archive.confirmationsFile)
        try FileManager.default.createDirectory(at: archive.confirmationsFile, withIntermediateDirectories: false)
        let error = #expect(throws: AgentError.self) { try archive.setAsideDamagedConfirmations() }
        #expect(error?.message.contains("cannot read \(archive.confirmationsFile.path)") == true, "\(String(describing: error))")
    }

    @Test func heldRecordsKeepEachOrdersHighestRevisionAndEachScanOnce() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let archive = DeliveryArchive(home: AgentHome(url: fixture.url))
        let id = UUID()
        let scan = try Self.scan(flight: Self.flights[0])
        // Revision 2 moves the order to flight B; revision 1 is appended again after it, as a resend may.
        try archive.append([try Self.order(id, revision: 1, flight: Self.flights[0]), scan])
        try archive.append([try Self.order(id, revision: 2, flight: Self.flights[1]), scan])
        try archive.append([try Self.order(id, revision: 1, flight: Self.flights[0])])
        let held = try archive.heldRecords()
        #expect(held.orders.count == 1)
        #expect(held.orders[id]?.revision == 2)
        #expect(held.orders[id]?.flight == Self.flights[1])
        #expect(held.scans.count == 1)
        let holdings = try archive.holdings()
        #expect(holdings[Self.flights[0]]?.summary.count == 1)  // the scan alone
        #expect(holdings[Self.flights[1]]?.summary.count == 1)  // the order at revision 2
    }

    /// A device home under `directory` with the example menu, for `status` (its ground is never reached).
    static func statusConfiguration(in directory: URL) throws -> (AgentHome, AgentConfiguration) {
        let home = AgentHome(url: directory.appendingPathComponent("home"))
        let menu = directory.appendingPathComponent("menu.plist")
        try PropertyListEncoder().encode(Inventory.example).write(to: menu)
        let configuration = AgentConfiguration(
            home: home, file: nil, device: "cart-1", flight: .example, queueDirectory: home.defaultQueueDirectory,
            queueMaxBytes: nil, inventory: .file(menu),
            ground: .init(data: "tcp://127.0.0.1:1", acks: "tcp://127.0.0.1:2", serverPublicKey: nil),
            sync: .init(batchRecords: 10, batchBytes: 1 << 20, window: 1, ackTimeoutSeconds: 1))
        return (home, configuration)
    }

    /// A scan whose type, id and flight read well and whose tag is not a map: the ground refuses it whole.
    struct RefusableScan: Encodable {
        var type = "scan"
        var id = UUID()
        var tag = 7
        var point = "origin"
        var scannedAt = Date(timeIntervalSince1970: 1_795_255_300)
        var flight: String
        var device = "cart-1"
    }

    @Test func statusCountsARecordStillInTheQueueAsNotAcknowledgedEvenIfTheGroundWouldRefuseIt() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (home, configuration) = try Self.statusConfiguration(in: fixture.url)
        let flight = FlightID.example.rawValue
        let refusable = try MessagePackEncoder().encode(RefusableScan(flight: flight))
        #expect(throws: (any Error).self) { try RecordCoding.decode(refusable) }
        try home.prepare(queueDirectory: home.defaultQueueDirectory)
        try FileQueue(directory: home.defaultQueueDirectory).append(contentsOf: [
            try Self.scan(flight: flight), refusable,
        ])
        let status = try CaptureService(configuration: configuration, logger: Logger(label: "test")).status()
        #expect(status.flights.map(\.flight) == [flight])
        #expect(status.flights.first?.unacknowledged == 2)
        #expect(status.verdict.contains("2 not acknowledged yet"), "\(status.verdict)")
    }

    /// An order amended into another flight leaves its first flight's file holding nothing the ground counts under
    /// that flight. Before, `status` read `NOT SAFE TO HAND BACK: <flight> delivered and confirmed` for it until
    /// retention released the file: a verdict that contradicted itself and kept a delivered device from being handed
    /// back.
    @Test func aFlightWhoseOrdersAllMovedToAnotherFlightWaitsForNothing() throws {
        let fixture = try TemporaryDirectory()
        defer { fixture.remove() }
        let (home, configuration) = try Self.statusConfiguration(in: fixture.url)
        let archive = DeliveryArchive(home: home)
        let id = UUID()
        try archive.append([try Self.order(id, revision: 1, flight: Self.flights[0])])
        try archive.append([try Self.order(id, revision: 2, flight: Self.flights[1])])
        let service = CaptureService(configuration: configuration, logger: Logger(label: "test"))

        // The order's new flight is not confirmed yet: that flight, and only it, is open.
        let waiting = try service.status()
        #expect(waiting.verdict.hasPrefix("NOT SAFE TO HAND BACK: \(Self.flights[1]) "), "\(waiting.verdict)")
        #expect(!waiting.verdict.contains(Self.flights[0]), "\(waiting.verdict)")
        let emptied = try #require(waiting.flights.first { $0.flight == Self.flights[0] })
        #expect(emptied.confirmed && emptied.captured == 0)
        #expect(emptied.verdict == "nothing left to deliver: its orders were amended into other flights")

        let held = try #require(try archive.holdings()[Self.flights[1]])
        try archive.confirm(flight: Self.flights[1], summary: held.summary, bytes: archive.bytes(flight: Self.flights[1]))
        let status = try service.status()
        #expect(status.verdict == "all delivered and confirmed: safe to hand back", "\(status.verdict)")
    }
}
