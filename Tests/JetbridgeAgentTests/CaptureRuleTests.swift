import FileQueue
import Foundation
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
