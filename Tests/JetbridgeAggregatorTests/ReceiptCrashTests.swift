import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import JetbridgeTestKit
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A real `serve` killed with SIGKILL while its receipts thread writes a group of receipt files (issue 29 item 1: a
/// group's files are flushed together, then renamed): every receipt file is then its old complete bytes or its new
/// ones, never torn; the next `serve` removes the killed writer's temporary files and completes the receipts, and
/// `receipts rebuild` finds every byte already in place.
@Suite("Receipts: serve killed with SIGKILL in the middle of a group of files")
struct ReceiptCrashTests {
    /// 6 flights × 990 seats (rows 1–99, letters A–K without I): 5,940 seats, 11,880 files, a dozen groups of 500
    /// (60 claims of 100 on PostgreSQL), so a refresh lasts long enough to be caught in a group.
    static let flights = (1...6).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }
    static let seats = (1...99).flatMap { row in
        ["A", "B", "C", "D", "E", "F", "G", "H", "J", "K"].map { "\(row)\($0)" }
    }

    /// One order per seat at `revision`; revision 2 changes every receipt's bytes (another count, another price).
    static func batches(revision: Int) -> [IncomingBatch] {
        var records: [Record] = []
        for (f, flight) in flights.enumerated() {
            for (s, seat) in seats.enumerated() {
                let n = f * seats.count + s
                records.append(
                    order(
                        n, revision: revision, flight: flight, seat: seat,
                        lines: [(revision == 1 ? peanuts : chips, revision + n % 3)], at: Double(n)))
            }
        }
        let perBatch = 1_000
        return stride(from: 0, to: records.count, by: perBatch).map { start in
            let first = UInt64((revision - 1) * records.count + start + 1)
            return batch("cart-1", first, Array(records[start..<min(start + perBatch, records.count)]))
        }
    }

    /// Every receipt's text and JSON bytes, by file name.
    static func files(of store: any StoreReader) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for receipt in try Receipt.all(orders: store.orders()) {
            files[receipt.fileStem + ".txt"] = Data(receipt.textBytes())
            files[receipt.fileStem + ".json"] = Data(receipt.jsonBytes())
        }
        return files
    }

    @Test func sqliteKilledMidGroupLeavesOldOrNewFilesThatARestartCompletes() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = fixture.directory.appendingPathComponent("a")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let store = try SQLiteStore(
            path: home.appendingPathComponent(SQLiteStore.fileName).path, logger: Logger(label: "test"))
        try await killMidGroup(home: home, storeArgument: "jetbridge.sqlite", store: store)
    }

    @Test(.enabled(if: TestPostgres.enabled)) func postgresKilledMidGroupLeavesOldOrNewFilesThatARestartCompletes()
        async throws
    {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let database = try TestPostgres.freshDatabase()
        defer { database.drop() }
        let home = fixture.directory.appendingPathComponent("a")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let store = try PostgresStore(url: database.url, logger: Logger(label: "test"))
        defer { try? store.close() }
        try await killMidGroup(home: home, storeArgument: database.url, store: store)
    }

    /// Old receipts written, every seat changed, then `serve` killed while a group's temporary files exist (up to
    /// five tries), checked, restarted until no seat is marked, and checked again.
    func killMidGroup(home: URL, storeArgument: String, store: any StoreWriter) async throws {
        let receipts = home.appendingPathComponent("receipts")
        let writer = ReceiptWriter(directory: receipts, logger: Logger(label: "test"))
        _ = try store.apply(Self.batches(revision: 1))
        try writer.refreshDirty(store)
        let old = try Self.files(of: store)
        _ = try store.apply(Self.batches(revision: 2))
        let new = try Self.files(of: store)
        #expect(old.count == 2 * Self.flights.count * Self.seats.count)
        #expect(Set(old.keys) == Set(new.keys) && old.keys.allSatisfy { old[$0] != new[$0] })
        #expect(try store.dirtyReceiptCount() == Self.flights.count * Self.seats.count)

        var caughtInGroup = false
        var killed: [Int32] = []
        for _ in 1...5 where !caughtInGroup {
            let serve = try Self.startServe(home: home, store: storeArgument)
            defer { if serve.isRunning { kill(serve.processIdentifier, SIGKILL) } }
            // Killed as soon as a temporary file shows: the group's files are being written, none renamed yet or
            // some of them.
            try await waitUntil("serve writes a temporary receipt file", timeout: .seconds(60), every: .milliseconds(1))
            {
                !Self.temporaryFiles(in: receipts).isEmpty || !serve.isRunning
            }
            kill(serve.processIdentifier, SIGKILL)
            serve.waitUntilExit()
            #expect(serve.terminationReason == .uncaughtSignal, "serve ended on its own")
            killed.append(serve.processIdentifier)

            // Old or new, never torn, never missing.
            let names = try FileManager.default.contentsOfDirectory(atPath: receipts.path)
            for name in names where !name.hasPrefix(".") {
                let bytes = try Data(contentsOf: receipts.appendingPathComponent(name))
                #expect(bytes == old[name] || bytes == new[name], "\(name) is neither its old nor its new receipt")
            }
            #expect(Set(names.filter { !$0.hasPrefix(".") }) == Set(old.keys))
            let leftovers = Self.temporaryFiles(in: receipts)
            #expect(leftovers.allSatisfy { name in killed.contains { name.contains("-\($0).") } }, "\(leftovers)")
            let marked = try store.dirtyReceiptCount()
            caughtInGroup = !leftovers.isEmpty && marked > 0
        }
        #expect(caughtInGroup, "serve was never killed in the middle of a group of receipt files")

        // A restart removes the killed writer's temporary files and completes the receipts.
        let serve = try await ServeProcess(store: storeArgument, in: home.deletingLastPathComponent(), name: "a")
        try await waitUntil("serve completes the receipts", timeout: .seconds(120), every: .milliseconds(50)) {
            try store.dirtyReceiptCount() == 0
        }
        try await serve.stop()
        #expect(serve.process.terminationStatus == 0, "\(serve.logText.suffix(2_000))")
        #expect(Self.temporaryFiles(in: receipts).isEmpty)
        #expect(serve.count("removed temporary receipt files a stopped writer left") == 1, "\(serve.logText)")
        let names = try FileManager.default.contentsOfDirectory(atPath: receipts.path)
        #expect(Set(names) == Set(new.keys))
        for name in names {
            #expect(try Data(contentsOf: receipts.appendingPathComponent(name)) == new[name], "\(name)")
        }

        // `receipts rebuild` reproduces them byte for byte: nothing to rewrite.
        let rebuild = try AggregatorCLITests.run(
            ["--home", home.path, "receipts", "rebuild", "--store", storeArgument], in: home.deletingLastPathComponent()
        )
        #expect(rebuild.status == 0, "\(rebuild.stderr)")
        #expect(
            rebuild.stdout.contains("\(Self.flights.count * Self.seats.count) receipts, 0 rewritten"),
            "\(rebuild.stdout)")
    }

    static func temporaryFiles(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".tmp") }
    }

    /// `serve` on `home`, insecure, on loopback ports the kernel chooses; started without waiting for anything, so
    /// the refresh at its start can be caught.
    static func startServe(home: URL, store: String) throws -> Process {
        let process = Process()
        process.executableURL = AggregatorCLITests.binary
        process.arguments = [
            "serve", "--home", home.path, "--store", store, "--insecure", "--data", "tcp://127.0.0.1:*", "--acks",
            "tcp://127.0.0.1:*",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: AggregatorHome.environmentVariable)
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }
}
