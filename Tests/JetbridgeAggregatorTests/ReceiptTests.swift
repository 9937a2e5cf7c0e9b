import Foundation
import JetbridgeAggregator
import JetbridgeModel
import Testing

@Suite("Receipts: atomic files, dirty marks, rebuilds")
struct ReceiptTests {
    func contents(_ directory: URL) throws -> [String: Data] {
        var result: [String: Data] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
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
        #expect(summary.written == before.count / 2)
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
        #expect(names == ["ZA101_2026-11-21_18C.txt", "ZA101_2026-11-21_18C.json"])
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
        var receipts = [Receipt.example]
        receipts += try Receipt.all(orders: orders(randomRecords(seed: 11, count: 400)))
        // Text JSON must escape, slashes it must not, non-ASCII, dates with fractions, an order with no lines.
        let odd = Receipt.Entry(
            id: uuid(7), revision: 3, createdAt: Date(timeIntervalSince1970: 1_795_200_000.987), device: "cart/1",
            lines: [
                Receipt.Line(
                    name: "Tea \"Earl\" Grey\\ ½ / é\t\n\r\u{8}\u{C}\u{1}\u{1F}", count: 1, unitPrice: 5, price: 5),
                Receipt.Line(name: "", count: 0, unitPrice: 0, price: 0),
            ], subtotal: -5)
        let empty = Receipt.Entry(
            id: uuid(8), revision: 1, createdAt: Date(timeIntervalSince1970: -1.5), device: "d", lines: [],
            subtotal: 0)
        receipts.append(
            Receipt(flight: flightB, seat: try Seat("1A"), currency: "EUR", orders: [odd, empty], total: 0))
        receipts.append(Receipt(flight: flightA, seat: try Seat("2B"), currency: "", orders: [], total: Int.min))
        // Dates across leap days, year ends and centuries, with and without fractions, as the encoder writes them.
        var generator = SplitMix(state: 5)
        let dates =
            (0..<2_000).map { _ in
                Date(
                    timeIntervalSince1970: Double(generator.next() % 8_000_000_000) + Double(generator.next() % 1000)
                        / 1000)
            }
            + [0, 951_782_400, 951_868_799.999, 4_107_542_400, 253_402_300_799.5].map {
                Date(timeIntervalSince1970: $0)
            }
        receipts.append(
            Receipt(
                flight: flightA, seat: try Seat("3C"), currency: "USD",
                orders: dates.enumerated().map {
                    Receipt.Entry(
                        id: uuid($0.offset), revision: 1, createdAt: $0.element, device: "d", lines: [], subtotal: 0)
                }, total: 0))
        for receipt in receipts {
            let written = try ReceiptWriter.json(receipt)
            let reference = try ReceiptWriter.encoderJSON(receipt)
            #expect(
                written == reference,
                "\(String(decoding: written, as: UTF8.self)) vs \(String(decoding: reference, as: UTF8.self))")
        }
    }
}
