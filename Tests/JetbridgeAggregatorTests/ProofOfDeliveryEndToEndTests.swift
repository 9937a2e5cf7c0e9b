import Foundation
import GRDB
import JetbridgeTestKit
import Logging
import NIOCore
import PostgresNIO
import Testing

/// Proof of delivery with real processes (docs/AGENT.md, "Proof of delivery"): `jetbridge-aggregator serve` on SQLite
/// and on PostgreSQL, two `jetbridge-agent` devices; rows deleted behind the ground's back are found by the next sync,
/// sent again, and the totals are exact again.
@Suite("Proof of delivery: end to end")
struct ProofOfDeliveryEndToEndTests {
    static let flight = "ZA101/2026-11-21"

    /// An insecure agent home for `device`, sending to `serve`.
    struct Agent {
        let device: String
        let home: URL

        init(device: String, serve: ServeProcess, in parent: URL, extra: String = "", confirm: Bool = true) throws {
            self.device = device
            home = parent.appendingPathComponent("agent-\(device)")
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            let configuration = """
                {"device": "\(device)", "flight": "\(ProofOfDeliveryEndToEndTests.flight)",
                 "ground": {"data": "\(serve.dataEndpoint)", "acks": "\(serve.acksEndpoint)"},
                 "sync": {"batchRecords": 50, "window": 4, "ackTimeoutSeconds": 2, "confirmDelivery": \(confirm)}\(extra)}
                """
            try Data(configuration.utf8).write(to: home.appendingPathComponent("agent.json"))
        }

        func capture(scans: Int) async throws {
            let tags = (0..<scans).map { _ in
                #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": 42.0}"#
            }
            let run = try ExecutableRun(
                "jetbridge-agent", ["--home", home.path, "scan", "--at", "origin"], in: home,
                stdin: tags.joined(separator: "\n"))
            let status = await run.exit(within: .seconds(120))
            #expect(status == 0, "\(run.output)")
        }

        /// `sync --until-drained`: its exit status and output.
        func sync() async throws -> (Int32?, String) {
            let run = try ExecutableRun(
                "jetbridge-agent", ["--home", home.path, "sync", "--insecure", "--until-drained", "--timeout", "90"],
                in: home)
            let status = await run.exit(within: .seconds(120))
            return (status, run.output)
        }

        func status() async throws -> [String: Any] {
            let run = try ExecutableRun("jetbridge-agent", ["--home", home.path, "status", "--json"], in: home)
            let code = await run.exit(within: .seconds(60))
            #expect(code == 0, "\(run.output)")
            let line = run.output.split(separator: "\n").first { $0.hasPrefix("{") } ?? ""
            let start = run.output.firstIndex(of: "{") ?? run.output.startIndex
            _ = line
            return (try JSONSerialization.jsonObject(with: Data(run.output[start...].utf8)) as? [String: Any]) ?? [:]
        }

        func textStatus() async throws -> String {
            let run = try ExecutableRun("jetbridge-agent", ["--home", home.path, "status"], in: home)
            _ = await run.exit(within: .seconds(60))
            return run.output
        }
    }

    /// The store, as the test reaches it behind the ground's back.
    enum Store {
        case sqlite(String)
        case postgres(FreshDatabase)

        var argument: String {
            switch self {
            case .sqlite(let path): path
            case .postgres(let database): database.url
            }
        }

        /// Deletes `count` of `device`'s scans of the flight.
        func delete(_ count: Int, of device: String) throws {
            switch self {
            case .sqlite(let path):
                var configuration = Configuration()
                configuration.busyMode = .timeout(10)
                let queue = try DatabaseQueue(path: path, configuration: configuration)
                try queue.write { db in
                    try db.execute(
                        sql: "DELETE FROM scans WHERE rowid IN (SELECT rowid FROM scans WHERE device = ? LIMIT ?)",
                        arguments: [device, count])
                }
                try queue.close()
            case .postgres(let database):
                try TestPostgres.admin(
                    database.url,
                    "DELETE FROM scans WHERE id IN (SELECT id FROM scans WHERE device = '\(device)' LIMIT \(count))")
            }
        }

        func count(of device: String) throws -> Int {
            switch self {
            case .sqlite(let path):
                let queue = try DatabaseQueue(path: path)
                defer { try? queue.close() }
                return try queue.read { db in
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM scans WHERE device = ?", arguments: [device]) ?? -1
                }
            case .postgres(let database):
                let connection = try TestPostgres.connect(database.url)
                defer { try? connection.close().wait() }
                let rows = try connection.query(
                    "SELECT count(*) FROM scans WHERE device = \(device)", logger: .init(label: "test")
                ).wait()
                return try rows.first?.decode(Int.self) ?? -1
            }
        }
    }

    static func flightEntry(_ status: [String: Any]) -> [String: Any] {
        ((status["flights"] as? [[String: Any]]) ?? []).first { $0["flight"] as? String == flight } ?? [:]
    }

    @Test(arguments: ProofOfDeliveryServerTests.Engine.allCases)
    func aLossIsFoundResentAndConfirmedAndMoreCapturesConfirmAgain(
        _ engine: ProofOfDeliveryServerTests.Engine
    ) async throws {
        guard engine == .sqlite || TestPostgres.enabled else { return }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store: Store
        switch engine {
        case .sqlite: store = .sqlite(fixture.directory.appendingPathComponent("store.sqlite").path)
        case .postgres: store = .postgres(try TestPostgres.freshDatabase())
        }
        defer { if case .postgres(let database) = store { database.drop() } }
        let serve = try await ServeProcess(store: store.argument, in: fixture.directory, name: "ground")
        defer { serve.killNow() }

        let cart = try Agent(device: "cart-1", serve: serve, in: fixture.directory)
        let other = try Agent(device: "cart-2", serve: serve, in: fixture.directory)
        try await cart.capture(scans: 300)
        try await other.capture(scans: 100)
        for agent in [cart, other] {
            let (status, output) = try await agent.sync()
            #expect(status == 0, "\(output)")
            #expect(output.contains("flights confirmed 1 of 1"), "\(output)")
        }
        var status = try await cart.status()
        #expect(status["verdict"] as? String == "all delivered and confirmed: safe to hand back", "\(status)")
        var entry = Self.flightEntry(status)
        #expect(entry["captured"] as? Int == 300 && entry["acknowledged"] as? Int == 300)
        #expect(entry["confirmed"] as? Bool == true && entry["confirmedAt"] is String)
        let text = try await cart.textStatus()
        #expect(text.contains("verdict         all delivered and confirmed: safe to hand back"), "\(text)")

        // 1 % of cart-1's rows of the flight lost behind the ground's back.
        try store.delete(3, of: "cart-1")
        #expect(try store.count(of: "cart-1") == 297)
        let kept = cart.home.appendingPathComponent("delivered/ZA101_2026-11-21.records")
        let keptBytes = try #require(FileManager.default.attributesOfItem(atPath: kept.path)[.size] as? Int)
        let (again, output) = try await cart.sync()
        #expect(again == 0, "\(output)")
        #expect(output.contains("flights confirmed 1 of 1"), "\(output)")
        #expect(output.contains("(3 new, 297 duplicates)"), "\(output)")
        // The 300 records sent again were in delivered/ already: their acks did not write them there a second time.
        #expect(try FileManager.default.attributesOfItem(atPath: kept.path)[.size] as? Int == keptBytes)
        #expect(try store.count(of: "cart-1") == 300)
        #expect(try store.count(of: "cart-2") == 100)
        #expect(serve.logText.contains("a device's summary does not match the store"))
        entry = Self.flightEntry(try await cart.status())
        #expect(entry["confirmed"] as? Bool == true)

        // More captured for the same flight after the confirmation: not confirmed until the next sync confirms it.
        try await cart.capture(scans: 10)
        status = try await cart.status()
        entry = Self.flightEntry(status)
        #expect(entry["confirmed"] as? Bool == false && entry["unacknowledged"] as? Int == 10, "\(entry)")
        #expect((status["verdict"] as? String)?.hasPrefix("NOT SAFE TO HAND BACK") == true, "\(status)")
        let (third, thirdOutput) = try await cart.sync()
        #expect(third == 0, "\(thirdOutput)")
        entry = Self.flightEntry(try await cart.status())
        #expect(entry["confirmed"] as? Bool == true && entry["acknowledged"] as? Int == 310, "\(entry)")
        #expect(try store.count(of: "cart-1") == 310)
        try await serve.stop()
    }

    @Test func aFlightTheGroundDoesNotConfirmEndsTheSyncWith75() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(
            store: fixture.directory.appendingPathComponent("store.sqlite").path, in: fixture.directory, name: "ground")
        defer { serve.killNow() }
        let cart = try Agent(device: "cart-1", serve: serve, in: fixture.directory)
        try await cart.capture(scans: 5)
        let (status, output) = try await cart.sync()
        #expect(status == 0, "\(output)")
        // Everything acknowledged, but no confirmation on record and no ground to ask (stopped, or one that predates
        // proof of delivery and ignores summaries): sync gives up on the flight after its wait and says so.
        try await serve.stop()
        try FileManager.default.removeItem(at: cart.home.appendingPathComponent("delivered/confirmed.json"))
        let (code, text) = try await cart.sync()
        #expect(code == 75, "\(text)")
        #expect(text.contains("\(Self.flight) NOT CONFIRMED"), "\(text)")
        #expect(text.contains("the ground has not confirmed \(Self.flight)"), "\(text)")
        let entry = Self.flightEntry(try await cart.status())
        #expect(entry["confirmed"] as? Bool == false && entry["acknowledged"] as? Int == 5, "\(entry)")
    }

    @Test func pastTheCapUnconfirmedRecordsStopCaptureAndConfirmedOnesAreReleased() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(
            store: fixture.directory.appendingPathComponent("store.sqlite").path, in: fixture.directory, name: "ground")
        defer { serve.killNow() }
        // 40 scans take about 7 KB in delivered/: a cap of 4 KB.
        let cap = #", "retention": {"days": 7, "maxBytes": 4000}"#
        let cart = try Agent(device: "cart-1", serve: serve, in: fixture.directory, extra: cap)
        try await cart.capture(scans: 40)
        var (status, output) = try await cart.sync()
        #expect(status == 0, "\(output)")
        // Confirmed, and over the cap: released at the end of the sync; the flight stays confirmed.
        let kept = cart.home.appendingPathComponent("delivered/ZA101_2026-11-21.records")
        #expect(!FileManager.default.fileExists(atPath: kept.path))
        var entry = Self.flightEntry(try await cart.status())
        #expect(entry["confirmed"] as? Bool == true && entry["acknowledged"] as? Int == 40, "\(entry)")

        // 40 more, acknowledged by a sync that does not ask for confirmation: kept whole past the cap, and capture
        // stops.
        try await cart.capture(scans: 40)
        let unasked = try Agent(device: "cart-1", serve: serve, in: fixture.directory, extra: cap, confirm: false)
        (status, output) = try await unasked.sync()
        #expect(status == 0, "\(output)")
        #expect(FileManager.default.fileExists(atPath: kept.path), "unconfirmed records are never deleted")
        let refused = try ExecutableRun(
            "jetbridge-agent", ["--home", cart.home.path, "scan", "--at", "origin"], in: cart.home,
            stdin: #"{"id": "\#(UUID().uuidString)", "owner": ["D", "ZMU"], "weight": 42.0}"#)
        #expect(await refused.exit(within: .seconds(60)) == 75, "\(refused.output)")
        #expect(refused.output.contains("fill the retention cap"), "\(refused.output)")
        entry = Self.flightEntry(try await cart.status())
        #expect(entry["confirmed"] as? Bool == false && entry["acknowledged"] as? Int == 80, "\(entry)")

        // The next sync has them confirmed (the released 40 count on the ground's side too), then released: capture
        // goes on.
        let asking = try Agent(device: "cart-1", serve: serve, in: fixture.directory, extra: cap)
        (status, output) = try await asking.sync()
        #expect(status == 0, "\(output)")
        #expect(output.contains("flights confirmed 1 of 1"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: kept.path))
        try await asking.capture(scans: 1)
        entry = Self.flightEntry(try await asking.status())
        #expect(entry["unacknowledged"] as? Int == 1 && entry["acknowledged"] as? Int == 80, "\(entry)")
        try await serve.stop()
    }
}
