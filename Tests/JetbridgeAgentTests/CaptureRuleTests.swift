import FileQueue
import Foundation
import JetbridgeProtocol
import JetbridgeModel
import JetbridgeTestKit
import Logging
import Testing

import SystemSupport
@testable import JetbridgeAgent

/// Issue 16, items 2, 4 and 5 at capture: the agent refuses what the ground would refuse, with the same rule, and
/// stores nothing.
@Suite("Capture refuses what the ground refuses")
struct CaptureRuleTests {
    let directory: URL

    init() throws {
        directory = try TemporaryDirectory.create(prefix: "jetbridge-capture")
    }

    func service(menu: Inventory = .example, at seconds: Double = 1_795_250_000) throws -> CaptureService {
        let home = AgentHome(url: directory.appendingPathComponent("home"))
        let file = directory.appendingPathComponent("menu.plist")
        let encoder = PropertyListEncoder()
        try encoder.encode(menu).write(to: file)
        let configuration = AgentConfiguration(
            home: home, file: nil, device: "cart-1", flight: .example, queueDirectory: home.defaultQueueDirectory,
            queueMaxBytes: nil, inventory: .file(file),
            ground: .init(data: "tcp://127.0.0.1:1", acks: "tcp://127.0.0.1:2", serverPublicKey: nil),
            sync: .init(batchRecords: 10, batchBytes: 1 << 20, window: 1, ackTimeoutSeconds: 1))
        return CaptureService(
            configuration: configuration, logger: Logger(label: "test"),
            now: { Date(timeIntervalSince1970: seconds) })
    }

    func queued() throws -> Int {
        let queue = directory.appendingPathComponent("home/queue")
        guard FileManager.default.fileExists(atPath: queue.path) else { return 0 }
        return try FileQueue.check(directory: queue).status.records
    }

    @Test(arguments: [0.0, 946_684_799, 4_102_444_800, 15_927_000_000_000])
    func aClockOutsideTheWindowRecordsNothing(seconds: Double) throws {
        let capture = try service(at: seconds)
        #expect {
            _ = try capture.recordOrder(seat: "17B", lines: [("Peanuts", 1)])
        } throws: { error in
            (error as? AgentError)?.code == .dataError && "\(error)".contains("createdAt: the time")
        }
        #expect {
            _ = try capture.recordScan(payload: #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 4}"#, at: .origin)
        } throws: { error in
            (error as? AgentError)?.code == .dataError && "\(error)".contains("scannedAt")
        }
        #expect(try queued() == 0)
    }

    /// docs/PROTOCOL.md, "Record ids": the device mints version-7 ids from each record's capture time.
    @Test func recordsGetTimeOrderedIdsAtTheirCaptureTime() throws {
        let capture = try service(at: 1_795_250_000.25)
        let order = try capture.recordOrder(seat: "17B", lines: [("Peanuts", 1)])
        #expect(order.id.timeOrderedMilliseconds == 1_795_250_000_250)
        _ = try capture.recordScan(
            payload: #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 4}"#, at: .origin)
        // A bulk scan of 5,000 tags (more than one buffer of random bits: 4,096 ids).
        let tags = directory.appendingPathComponent("tags.txt")
        try (0..<5_000).map { n in
            #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": \#(n % 30)}"#
        }.joined(separator: "\n").write(to: tags, atomically: true, encoding: .utf8)
        let fd = open(tags.path, O_RDONLY)
        defer { close(fd) }
        let summary = try capture.recordScans(fd: fd, name: tags.path, at: .origin) { Issue.record("\($0)") }
        #expect(summary.scanned == 5_000)
        let queue = try FileQueue(directory: directory.appendingPathComponent("home/queue"))
        let records = try queue.read(from: 1, maxRecords: 10_000, maxBytes: 1 << 30).map {
            try RecordCoding.decode($0.payload)
        }
        #expect(records.count == 5_002)
        #expect(records.map(\.id)[0] == order.id)
        #expect(records.allSatisfy { $0.id.timeOrderedMilliseconds == 1_795_250_000_250 })
        #expect(Set(records.map(\.id)).count == records.count)
    }

    /// A pipe for a feed of tags: its read and write ends.
    static func feedPipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        return (ends[0], ends[1])
    }

    /// `count` tag lines of a feed, each with a new tag id and its line end; weights 0…29 lb.
    static func tagLines(_ count: Int) -> [String] {
        (0..<count).map { n in #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": \#(n % 30)}"# + "\n" }
    }

    /// A live scanner feed (`scanner | jetbridge-agent scan`): the scans read are in the queue, durable, as soon as
    /// the feed goes quiet, not once 4,096 have piled up or the feed ends. Before, hours of scans were in memory only.
    @Test func scansFromALiveFeedAreQueuedWhenTheFeedGoesQuiet() async throws {
        let capture = try service()
        let (readEnd, writeEnd) = try Self.feedPipe()
        let lines = Self.tagLines(3)
        let done = Task.detached { try capture.recordScans(fd: readEnd, name: "standard input", at: .origin) { _ in } }
        _ = lines.joined().withCString { write(writeEnd, $0, strlen($0)) }
        // The feed stays open: the three scans must reach the queue while it waits for the next.
        do {
            try await waitUntil("the scans are queued while the feed is open", timeout: .seconds(10)) {
                try self.queued() == 3
            }
        } catch {
            close(writeEnd)  // lets the capture end
            throw error
        }
        close(writeEnd)
        let summary = try await done.value
        close(readEnd)
        #expect(summary.scanned == 3)
        #expect(try queued() == 3)
    }

    /// A feed stopped by a signal (``Interruption``, set off here by hand) stores every line it read, more than one
    /// group commit of them, and says which line to feed again from: the one after the last whole line, also when a
    /// half line was read. A regular file is checked for the signal before each read.
    @Test func aFeedStoppedBySignalStoresWhatItReadAndNamesTheLineToGoOnFrom() async throws {
        let capture = try service()
        let (readEnd, writeEnd) = try Self.feedPipe()
        let text = Self.tagLines(5_000).joined() + #"{"id": "F432"#
        let interruption = try Interruption(catching: [])
        defer { interruption.restore() }
        // The reader and the writer block: threads of their own, not the tests' few cooperative ones.
        let outcome = Locked<Result<ScanSummary, AgentError>?>(nil)
        Thread {
            let result = Result { () throws(AgentError) in
                try capture.recordScans(fd: readEnd, name: "standard input", at: .origin, interruption: interruption) { _ in }
            }
            outcome.withLock { $0 = result }
        }.start()
        Thread { _ = text.withCString { write(writeEnd, $0, strlen($0)) } }.start()
        try await waitUntil("the whole lines are queued", timeout: .seconds(30)) { try self.queued() == 5_000 }
        interruption.trigger(SIGINT)
        try await waitUntil("the feed stops", timeout: .seconds(30)) { outcome.withLock { $0 } != nil }
        close(writeEnd)
        close(readEnd)
        var error: AgentError?
        if case .failure(let failure) = outcome.withLock({ $0 }) { error = failure }
        #expect(error?.code == .tryAgain)
        #expect(
            error?.message
                == "standard input: stopped by SIGINT after line 5000: the 5000 scans read before it were stored: re-feed from line 5001")
        #expect(try queued() == 5_000)

        let tags = directory.appendingPathComponent("tags.txt")
        try Data(text.utf8).write(to: tags)
        let fd = open(tags.path, O_RDONLY)
        defer { close(fd) }
        let stopped = #expect(throws: AgentError.self) {
            _ = try capture.recordScans(fd: fd, name: tags.path, at: .origin, interruption: interruption) { _ in }
        }
        #expect(stopped?.message.hasSuffix("after line 0: the 0 scans read before it were stored: re-feed from line 1") == true)
    }

    /// An amendment is priced from the menu as it is now; the ground keeps one currency per flight, so a menu whose
    /// currency changed since the order was taken is refused, and nothing is recorded. Before, the amendment went out
    /// in the new currency, the ground refused it, and sync set it aside with the ledger a revision on.
    @Test func anAmendmentWithAMenuInAnotherCurrencyIsRefused() throws {
        let order = try service().recordOrder(seat: "17B", lines: [("Peanuts", 1)])
        let euros = Inventory(currency: "EUR", items: Inventory.example.items)
        let error = #expect(throws: AgentError.self) {
            _ = try self.service(menu: euros).amendOrder(id: order.id.uuidString, lines: [("Chips", 1)], seat: nil)
        }
        #expect(error?.code == .dataError)
        #expect(error?.message.contains("taken in USD and the menu is now in EUR") == true, "\(String(describing: error))")
        #expect(try queued() == 1)
        // The same currency amends as before.
        #expect(try service().amendOrder(id: order.id.uuidString, lines: [("Chips", 1)], seat: nil).revision == 2)
    }

    @Test func aMenuWithAHiddenOrReorderingNameOrAnOverflowingPriceIsRefused() throws {
        for item in [Item(name: "Pea\u{202E}nuts", unitPrice: 1), Item(name: "Pea\u{200B}nuts", unitPrice: 1),
            Item(name: "Jet", unitPrice: 1 << 62)]
        {
            let capture = try service(menu: Inventory(currency: "USD", items: [.example, item]))
            #expect {
                _ = try capture.recordOrder(seat: "17B", lines: [("Peanuts", 1)])
            } throws: { error in
                (error as? AgentError)?.code == .dataError && "\(error)".contains("items[1]")
            }
        }
        #expect(try queued() == 0)
        #expect(try service().recordOrder(seat: "17B", lines: [("Peanuts", 1)]).revision == 1)
    }
}
