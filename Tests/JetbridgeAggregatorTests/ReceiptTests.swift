import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeTestKit
import SystemSupport
import Testing

@Suite("Receipts: atomic files, dirty marks, rebuilds")
struct ReceiptTests {
    /// The receipts directory's files but its writers' locks (``ReceiptWriter/lockFile``, `rebuildIntentFile`).
    func contents(_ directory: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) where !name.hasPrefix(".receipts.") {
            result[name] = try Data(contentsOf: directory.appendingPathComponent(name))
        }
        return result
    }

    @Test func refreshWritesTextAndJSONForTouchedSeatsOnly() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        let records = [order(1, seat: "17B"), order(2, seat: "17B", at: 10), order(3, seat: "3A"), scan(10, tag: 1)]
        _ = try store.apply([batch("cart-1", 1, records)])
        #expect(try store.dirtyReceiptCount() == 2)
        #expect(try writer.refreshDirty(store) == 2)
        #expect(try store.dirtyReceiptCount() == 0)
        let files = try contents(fixture.receipts)
        #expect(
            Set(files.keys) == [
                "ZA101_2026-11-21_17B.txt", "ZA101_2026-11-21_17B.json", "ZA101_2026-11-21_3A.txt",
                "ZA101_2026-11-21_3A.json",
            ])
        let expected = try Receipt(flight: flightA, seat: Seat("17B"), orders: orders(records))
        #expect(files["ZA101_2026-11-21_17B.txt"] == Data(expected.text.utf8))
        #expect(files["ZA101_2026-11-21_17B.json"] == (try ReceiptWriter.json(expected)))
        // Duplicates mark nothing; nothing to refresh.
        _ = try store.apply([batch("cart-1", 1, records)])
        #expect(try writer.refreshDirty(store) == 0)
    }

    /// Two orders for one seat in two currencies are each valid, but their receipt cannot be totalled: that seat
    /// stays marked (and is logged), and every other seat still gets its receipt.
    @Test func aSeatWhoseReceiptCannotBeMadeDoesNotStopTheOthers() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        guard case .order(var euros) = order(3, seat: "17B", at: 5) else { return }
        euros.currency = "EUR"
        let records = [order(1, seat: "10A"), order(2, seat: "17B"), order(4, seat: "20C")]
        _ = try store.apply([batch("cart-1", 1, records)])
        // 17B's receipt as it was before its second currency came: removed, not left to show a stale total.
        #expect(try fixture.writer().refreshDirty(store) == 3)
        #expect(try contents(fixture.receipts).keys.contains("ZA101_2026-11-21_17B.txt"))
        // The ground now refuses a flight's second currency; a store from an earlier version may hold one.
        try DatabaseQueue(path: fixture.storePath).write { try $0.execute(sql: "DELETE FROM flights") }
        #expect(try store.apply([batch("cart-1", 4, [.order(euros)])])[0].rejection == nil)
        #expect(try store.dirtyReceiptCount() == 1)
        #expect(try fixture.writer().refreshDirty(store) == 0)
        #expect(try store.dirtyReceiptCount() == 1)
        let files = try contents(fixture.receipts)
        #expect(
            Set(files.keys) == [
                "ZA101_2026-11-21_10A.txt", "ZA101_2026-11-21_10A.json", "ZA101_2026-11-21_20C.txt",
                "ZA101_2026-11-21_20C.json",
            ])
        // The next refresh tries the seat again, and still does not throw.
        #expect(try fixture.writer().refreshDirty(store) == 0)
        #expect(try store.dirtyReceiptCount() == 1)
    }

    @Test func refreshCoversMoreSeatsThanOneChunkOverSeveralFlights() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let letters = ["A", "B", "C", "D", "E", "F"]
        let records = (0..<600).map { n in
            order(n, flight: n % 2 == 0 ? flightA : flightB, seat: "\(n / 12 + 1)\(letters[n / 2 % 6])", at: Double(n))
        }
        _ = try store.apply([batch("cart-1", 1, records)])
        #expect(try store.dirtyReceiptCount() == 600)
        #expect(try fixture.writer().refreshDirty(store) == 600)
        #expect(try store.dirtyReceiptCount() == 0)
        let expected = try Receipt.all(orders: orders(records))
        #expect(expected.count == 600)
        let files = try contents(fixture.receipts)
        #expect(files.count == 1_200)
        for receipt in expected {
            #expect(files[receipt.fileStem + ".txt"] == Data(receipt.text.utf8))
        }
        #expect(try store.receipts(flight: flightB) == expected.filter { $0.flight == flightB })
    }

    @Test func rebuildIsByteIdenticalAndRemovesOnlyStaleFilesItOwns() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        let records = randomRecords(seed: 5, count: 600)
        _ = try store.apply([batch("cart-1", 1, records)])
        try writer.refreshDirty(store)
        let before = try contents(fixture.receipts)
        #expect(before.count == 2 * (try Receipt.all(orders: orders(records))).count)

        let stale = fixture.receipts.appendingPathComponent("ZA999_2026-11-21_9K.txt")
        let leftover = fixture.receipts.appendingPathComponent(".ZA101_2026-11-21_1A.txt.\(UUID().uuidString).tmp")
        let foreign = fixture.receipts.appendingPathComponent("README.txt")
        for url in [stale, leftover, foreign] { try Data("x".utf8).write(to: url) }

        let summary = try writer.rebuildAll(store)
        // Issue 10, defect 7: nothing changed, so nothing is written.
        #expect(summary.receipts == before.count / 2)
        #expect(summary.written == 0 && summary.current == summary.receipts)
        #expect(summary.removed == 2)
        var after = try contents(fixture.receipts)
        #expect(after.removeValue(forKey: "README.txt") == Data("x".utf8))
        #expect(after == before)

        // From scratch, too.
        try FileManager.default.removeItem(at: fixture.receipts)
        try writer.rebuildAll(store)
        #expect(try contents(fixture.receipts) == before)
    }

    @Test func marksSurviveACrashBetweenCommitAndReceipts() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let records = [order(1, seat: "17B"), order(2, seat: "3A")]
        do {
            // Committed and acked, then the process died before writing receipts.
            let store = try fixture.open()
            _ = try store.apply([batch("cart-1", 1, records)])
            try store.close()
        }
        let store = try fixture.open()
        #expect(try store.dirtyReceiptCount() == 2)
        #expect(try fixture.writer().refreshDirty(store) == 2)
        let text = try String(
            contentsOf: fixture.receipts.appendingPathComponent("ZA101_2026-11-21_3A.txt"), encoding: .utf8)
        #expect(text == (try Receipt(flight: flightA, seat: Seat("3A"), orders: orders(records))).text)
    }

    @Test func aCorrectionThatMovesSeatRewritesBothSeats() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        _ = try store.apply([batch("cart-1", 1, [order(1, seat: "17B"), order(2, seat: "17B")])])
        try writer.refreshDirty(store)
        _ = try store.apply([
            batch("cart-1", 3, [order(1, revision: 2, seat: "18C"), order(2, revision: 2, seat: "18C")])
        ])
        #expect(try store.dirtyReceiptCount() == 2)
        try writer.refreshDirty(store)
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: fixture.receipts.path))
        #expect(names == ["ZA101_2026-11-21_18C.txt", "ZA101_2026-11-21_18C.json", ".receipts.lock"])
    }

    @Test func writingReplacesAtomicallyAndLeavesNoTemporaryFiles() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let writer = fixture.writer()
        let receipt = Receipt.example
        try writer.write(receipt)
        var changed = receipt
        changed.total += 1
        try writer.write(changed)
        let names = try FileManager.default.contentsOfDirectory(atPath: fixture.receipts.path).sorted()
        #expect(names == [receipt.fileStem + ".json", receipt.fileStem + ".txt"])
        let text = try String(
            contentsOf: fixture.receipts.appendingPathComponent(receipt.fileStem + ".txt"), encoding: .utf8)
        #expect(text == changed.text)
    }

    @Test func receiptJSONIsByteForByteWhatJSONEncoderWrites() throws {
        for receipt in try ReceiptReference.variedReceipts() {
            let written = try ReceiptWriter.json(receipt)
            let reference = try ReceiptWriter.encoderJSON(receipt)
            #expect(
                written == reference,
                "\(String(decoding: written, as: UTF8.self)) vs \(String(decoding: reference, as: UTF8.self))")
        }
    }

    @Test func receiptTextIsByteForByteWhatTheStringRendererWrote() throws {
        for receipt in try ReceiptReference.variedReceipts() {
            let reference = ReceiptReference.text(receipt)
            #expect(receipt.textBytes() == Array(reference.utf8), "\(receipt.text) vs \(reference)")
        }
        for amount in [0, 1, 9, 10, 99, 100, 1_000, -1, -10, -100, 123_456_789, Int.max, Int.min, Int.min + 1] {
            for currency in ["USD", "JPY", "KWD", "CLF", "XYZ"] {
                #expect(Money.format(amount, currency: currency) == ReceiptReference.money(amount, currency: currency))
            }
        }
    }

    @Test func receiptOrdersSortAsByTimeThenIDText() throws {
        // Few distinct times, so many orders tie on time and the id decides; ids random in every byte.
        var generator = JetbridgeTestKit.SplitMix(state: 3)
        let seat = try Seat("4D")
        let orders = (0..<2_000).map { n in
            var bytes = [UInt8](repeating: 0, count: 16)
            for index in bytes.indices { bytes[index] = UInt8(truncatingIfNeeded: generator.next()) }
            let id = bytes.withUnsafeBytes { UUID(uuid: $0.loadUnaligned(as: uuid_t.self)) }
            return Order(
                id: n % 10 == 0 ? uuid(n % 7) : id, revision: n % 3 + 1, flight: flightA, seat: seat,
                lineItems: [LineItem(item: peanuts, count: 1)], currency: "USD",
                createdAt: date(Double(generator.next() % 5)), device: "d")
        }
        let receipt = try Receipt(flight: flightA, seat: seat, orders: orders)
        #expect(receipt.orders.map(\.id) == ReceiptReference.sortedIDs(orders, flight: flightA, seat: seat))
    }

    @Test func rewritesOnlyFilesWhoseBytesChanged() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        _ = try store.apply([batch("cart-1", 1, randomRecords(seed: 8, count: 200))])
        try writer.rebuildAll(store)
        let before = try contents(fixture.receipts)
        func inode(_ name: String) throws -> UInt64 {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: fixture.receipts.appendingPathComponent(name).path)
            return (attributes[.systemFileNumber] as! NSNumber).uint64Value
        }
        let names = before.keys.sorted()
        let inodes = try names.map(inode)
        // Same size, one byte different; one byte longer; one byte shorter; gone.
        var flipped = before[names[0]]!
        flipped[flipped.count / 2] ^= 1
        try flipped.write(to: fixture.receipts.appendingPathComponent(names[0]))
        try (before[names[1]]! + Data("\n".utf8)).write(to: fixture.receipts.appendingPathComponent(names[1]))
        try before[names[2]]!.dropLast().write(to: fixture.receipts.appendingPathComponent(names[2]))
        try FileManager.default.removeItem(at: fixture.receipts.appendingPathComponent(names[3]))

        try writer.rebuildAll(store)
        #expect(try contents(fixture.receipts) == before)
        let after = try names.map(inode)
        // The removed file's new inode may reuse the old number, so only the three changed in place are compared.
        for index in names.indices where index != 3 {
            if index < 3 {
                #expect(after[index] != inodes[index], "\(names[index]) was not rewritten")
            } else {
                #expect(after[index] == inodes[index], "\(names[index]) was rewritten with the same bytes")
            }
        }
    }

    /// Whoever writes the receipts holds the directory's lock: a refresh for each group of seats, a rebuild for its
    /// whole run. A refresh that finds it held (a `receipts rebuild` running) writes nothing and clears no mark, so
    /// it writes what the rebuild read too early once the lock is free; a rebuild waits for a refresh's group.
    @Test func aRefreshWaitsForTheLockARebuildHoldsAndLosesNoMark() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        _ = try store.apply([batch("cart-1", 1, [order(1, seat: "17B"), order(2, seat: "3A")])])
        try FileManager.default.createDirectory(at: fixture.receipts, withIntermediateDirectories: true)
        // Another holder (a separate open file description: flock(2) conflicts within one process too).
        let rebuild = try FileLock(path: writer.lockFile.path, recordingPID: true)
        let started = ContinuousClock.now
        let busy = #expect(throws: ReceiptWriter.Busy.self) { try writer.refreshDirty(store) }
        #expect(ContinuousClock.now - started >= .seconds(1.9))
        #expect(busy?.holder == getpid() && busy?.description.contains(".receipts.lock") == true)
        #expect(try store.dirtyReceiptCount() == 2)
        #expect(try contents(fixture.receipts).isEmpty)
        rebuild.release()
        #expect(try writer.refreshDirty(store) == 2)
        #expect(try store.dirtyReceiptCount() == 0)
        #expect(try contents(fixture.receipts).count == 4)
        // The lock is let go after each group and each rebuild: another holder takes it at once.
        try writer.rebuildAll(store)
        _ = try FileLock(path: writer.lockFile.path)
        // A rebuild waiting for the lock (its intent held) stops a refresh before its next group, without waiting.
        _ = try store.apply([batch("cart-1", 2, [order(3, seat: "4C")])])
        let intent = try FileLock(path: writer.rebuildIntentFile.path)
        let before = ContinuousClock.now
        #expect(throws: ReceiptWriter.Busy.self) { try writer.refreshDirty(store) }
        #expect(ContinuousClock.now - before < .seconds(1))
        #expect(try store.dirtyReceiptCount() == 1)
        intent.release()
        #expect(try writer.refreshDirty(store) == 1)
    }

    /// Several aggregators sharing a receipts directory on PostgreSQL refresh at once (the store's claims give each
    /// seat one writer): another's refresh in the middle of a group, or stopped there (SIGSTOP, a paused VM), holds
    /// the lock shared and holds no one else's receipts back. When refreshes took turns, B wrote none of A's
    /// flight's receipts while A stayed stopped mid-group (a red `SharedStoreStallTests` run). A rebuild still waits
    /// for it: it takes the lock exclusive. SQLite has no claims: its refresh still takes the lock exclusive.
    @Test(
        .enabled(
            if: TestPostgres.enabled,
            "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")"))
    func refreshesShareTheLockOnPostgreSQLAndOnlyARebuildWaitsForThem() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let sqlite = try fixture.open()
        #expect(!sqlite.claimsReceiptSeats)
        let database = try await onOwnThread { try TestPostgres.freshDatabase() }
        defer { database.drop() }
        let store = try await onOwnThread { try PostgresStore(url: database.url, logger: quietLogger) }
        defer { try? store.close() }
        let writer = fixture.writer()
        _ = try await onOwnThread {
            try store.apply([batch("cart-1", 1, [order(1, seat: "17B"), order(2, seat: "3A")])], at: date(0))
        }
        try FileManager.default.createDirectory(at: fixture.receipts, withIntermediateDirectories: true)
        // Another aggregator's refresh, stopped in the middle of its group (a separate open file description).
        let stopped = try FileLock(path: writer.lockFile.path, recordingPID: true, exclusive: false)
        #expect(try await onOwnThread { try writer.refreshDirty(store) } == 2)
        #expect(try await onOwnThread { try store.dirtyReceiptCount() } == 0)
        #expect(try contents(fixture.receipts).count == 4)
        // A shared holder names no pid (several hold it at once), and the refresh cleared nothing of it.
        #expect(try Data(contentsOf: writer.lockFile).isEmpty)
        #expect(FileLock.holder(of: writer.lockFile.path) == nil)
        // A rebuild's exclusive lock waits for it, and so does a SQLite store's refresh.
        #expect(throws: FileLock.Failure.self) { try FileLock(path: writer.lockFile.path) }
        _ = try sqlite.apply([batch("cart-1", 1, [order(1, seat: "17B")])])
        #expect(throws: ReceiptWriter.Busy.self) { try writer.refreshDirty(sqlite) }
        stopped.release()
        try await onOwnThread { _ = try writer.rebuildAll(store) }
        #expect(try contents(fixture.receipts).count == 4)
    }

    /// A FIFO at a receipt's name: a plain open for reading waits for a writer, which never comes (the receipts
    /// thread hung, and the shutdown that waits for it). It reads as not holding the receipt, and is replaced.
    @Test func aFIFOAtAReceiptsNameIsReplacedWithoutWaiting() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-1", 1, [order(1, seat: "17B")])])
        try FileManager.default.createDirectory(at: fixture.receipts, withIntermediateDirectories: true)
        let fifo = fixture.receipts.appendingPathComponent("ZA101_2026-11-21_17B.txt")
        #expect(mkfifo(fifo.path, 0o644) == 0)
        #expect(try fixture.writer().refreshDirty(store) == 1)
        let text = try String(contentsOf: fifo, encoding: .utf8)
        #expect(text.contains("17B"))
    }

    /// A directory at one receipt's name: that seat fails alone and stays marked, and every other seat, before and
    /// after it, is written. Before, the group's rename failed on it at every refresh, and no receipt after it was
    /// written again.
    @Test func aSeatWhoseFileCannotBeReplacedFailsAloneAndStaysMarked() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let writer = fixture.writer()
        _ = try store.apply([batch("cart-1", 1, [order(1, seat: "10A"), order(2, seat: "17B"), order(3, seat: "20C")])])
        let blocked = fixture.receipts.appendingPathComponent("ZA101_2026-11-21_17B.json")
        try FileManager.default.createDirectory(at: blocked, withIntermediateDirectories: true)
        #expect(try writer.refreshDirty(store) == 2)
        #expect(try store.dirtyReceiptCount() == 1)
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: fixture.receipts.path))
        #expect(names.isSuperset(of: ["ZA101_2026-11-21_10A.txt", "ZA101_2026-11-21_20C.json"]), "\(names)")
        // Neither file of the failed seat was written: never one new and the other old.
        #expect(!names.contains("ZA101_2026-11-21_17B.txt"))
        // A rebuild names it and writes the rest.
        let summary = try writer.rebuildAll(store)
        #expect(summary.failed.map(\.seat.rawValue) == ["17B"])
        #expect(summary.failed.first?.reason.contains("is a directory") == true)
        #expect(summary.receipts == 2 && summary.removed == 0)
        #expect(FileManager.default.fileExists(atPath: blocked.path))
        // Moved away: the next refresh writes it.
        try FileManager.default.removeItem(at: blocked)
        #expect(try writer.refreshDirty(store) == 1)
        #expect(try store.dirtyReceiptCount() == 0)
    }
}
