import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import Testing

@Suite("Applying batches: dedupe, counts, atomicity, statistics")
struct ApplyTests {
    @Test func sameBatchTwiceCountsOnce() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let records = [order(1), order(2, seat: "18A"), scan(10, tag: 1), scan(11, tag: 1, point: .destination)]
        let first = try store.apply([batch("cart-1", 1, records)])
        #expect(first == [BatchOutcome(device: "cart-1", first: 1, last: 4, new: 4, duplicates: 0)])
        let again = try store.apply([batch("cart-1", 1, records)])
        #expect(again == [BatchOutcome(device: "cart-1", first: 1, last: 4, new: 0, duplicates: 4)])
        #expect(try store.orders().count == 2)
        let report = try store.flightReports().flights
        #expect(report.count == 1)
        #expect(report[0].orders == 2)
        #expect(report[0].revenue == 800)
        #expect(report[0].bags.checked == 1)
    }

    @Test func sameRecordInTwoBatchesOfOneTransactionAndAcrossTransactions() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let outcomes = try store.apply([
            batch("cart-1", 1, [order(1), scan(10, tag: 1)]),
            batch("cart-1", 2, [order(1), scan(10, tag: 1), order(2)]),
        ])
        #expect(outcomes.map(\.new) == [2, 1])
        #expect(outcomes.map(\.duplicates) == [0, 2])
        let later = try store.apply([batch("cart-2", 1, [scan(10, tag: 1), order(3)])])
        #expect(later.map(\.new) == [1])
        #expect(later.map(\.duplicates) == [1])
        #expect(try store.orders().count == 3)
        #expect(try store.bags().count == 1)
    }

    @Test func highestRevisionWinsWhateverTheArrivalOrder() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let outcomes = try store.apply([
            batch("cart-1", 1, [order(1, revision: 1, lines: [(peanuts, 1)])]),
            batch("cart-1", 2, [order(1, revision: 3, lines: [(chips, 3)])]),
            batch("cart-1", 3, [order(1, revision: 2, lines: [(popcorn, 2)])]),  // late and lower: a duplicate
            batch("cart-1", 4, [order(1, revision: 3, lines: [(popcorn, 9)])]),  // equal: the stored one stays
        ])
        #expect(outcomes.map(\.new) == [1, 1, 0, 0])
        #expect(outcomes.map(\.duplicates) == [0, 0, 1, 1])
        let stored = try store.orders()
        #expect(stored.count == 1)
        #expect(stored[0].revision == 3)
        #expect(stored[0].lineItems == [LineItem(item: chips, count: 3)])
        #expect(try store.flightReports().flights[0].revenue == 900)
    }

    /// `apply` inserts each transaction's rows sorted by id: the outcomes and what is stored must still be what the
    /// records give one at a time in arrival order (repeated ids, revisions up and down, seats moving, rescans).
    @Test func oneTransactionAgreesWithArrivalOrderOneRecordAtATime() throws {
        let grouped = try Fixture()
        let single = try Fixture()
        defer {
            grouped.remove()
            single.remove()
        }
        let records = randomRecords(seed: 11, count: 900)
        let batches = stride(from: 0, to: records.count, by: 37).map { start in
            batch("cart-1", UInt64(start + 1), Array(records[start..<min(start + 37, records.count)]))
        }
        let groupedStore = try grouped.open()
        let outcomes = try groupedStore.apply(batches)
        let singleStore = try single.open()
        var expected: [(new: Int, duplicates: Int)] = []
        for start in stride(from: 0, to: records.count, by: 37) {
            var sum = (new: 0, duplicates: 0)
            for (offset, record) in records[start..<min(start + 37, records.count)].enumerated() {
                let outcome = try singleStore.apply([batch("cart-1", UInt64(start + offset + 1), [record])])[0]
                sum = (sum.new + outcome.new, sum.duplicates + outcome.duplicates)
            }
            expected.append(sum)
        }
        #expect(outcomes.map(\.new) == expected.map(\.new))
        #expect(outcomes.map(\.duplicates) == expected.map(\.duplicates))
        #expect(expected.reduce(0) { $0 + $1.new } < records.count)  // the records do repeat ids
        let byID = { (orders: [Order]) in orders.sorted { $0.id.uuidString < $1.id.uuidString } }
        #expect(byID(try groupedStore.orders()) == byID(try singleStore.orders()))
        #expect(try groupedStore.bags() == singleStore.bags())
        #expect(try groupedStore.flightReports() == singleStore.flightReports())
    }

    @Test func oneBagScannedByThreeDevicesCountsOnce() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let byDevice = [
            scan(1, tag: 7, point: .origin, device: "ramp-1", at: 10),
            scan(2, tag: 7, point: .origin, device: "ramp-2", at: 20),
            scan(3, tag: 7, point: .destination, device: "belt-1", at: 100),
        ]
        _ = try store.apply([batch("ramp-1", 1, [byDevice[0]]), batch("ramp-2", 1, [byDevice[1]])])
        _ = try store.apply([batch("belt-1", 1, [byDevice[2]]), batch("ramp-1", 1, [byDevice[0]])])
        let bags = try store.bags()
        #expect(bags == BagState.bags(from: scans(byDevice)))
        #expect(bags.count == 1)
        #expect(bags[0].departedAt == date(10))
        #expect(bags[0].arrivedAt == date(100))
        let report = try store.flightReports().flights[0].bags
        #expect(report == FlightReport.Bags(checked: 1, departed: 1, arrived: 1, missing: 0, weight: 42, conflicts: 0))
    }

    @Test func aFailureMidApplyLeavesNothing() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        // Records arrive validated, so the failure is injected: the second batch's order for 3C fails after the
        // first batch's rows, statistics and receipt marks were written.
        try fixture.failOrders(seat: "3C")
        let error = #expect(throws: (any Error).self) {
            try store.apply([
                batch("cart-1", 1, [order(1), scan(10, tag: 1)]),
                batch("cart-2", 1, [order(2, seat: "3C"), order(3)]),
            ])
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("injected failure"))
        try fixture.healOrders()
        #expect(try store.orders().isEmpty)
        #expect(try store.bags().isEmpty)
        #expect(try store.deviceReport().devices.isEmpty)
        #expect(try store.dirtyReceiptCount() == 0)
        // The store is still usable and the same good records are new.
        let outcomes = try store.apply([batch("cart-1", 1, [order(1), scan(10, tag: 1)])])
        #expect(outcomes.map(\.new) == [2])
    }

    @Test func deviceStatisticsAddUp() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-1", 1, [order(1), order(2)])], at: date(100))
        _ = try store.apply(
            [batch("cart-1", 1, [order(1), order(2)]), batch("ramp-1", 1, [scan(10, tag: 1)])], at: date(200))
        try store.recordRejection(device: "cart-1", reason: "[1].seat: invalid seat", at: date(300))
        try store.recordRejection(device: "evil-1", reason: "crc mismatch", at: date(400))
        let devices = try store.deviceReport().devices
        #expect(devices.map(\.device) == ["cart-1", "evil-1", "ramp-1"])
        #expect(
            devices[0]
                == DeviceStatistics(
                    device: "cart-1", lastSync: date(200), batches: 2, records: 4, new: 2, duplicates: 2, rejects: 1,
                    lastRejectAt: date(300), lastRejectReason: "[1].seat: invalid seat"))
        #expect(devices[1].lastSync == nil)
        #expect(devices[1].batches == 0)
        #expect(devices[1].rejects == 1)
        #expect(devices[2].records == 1 && devices[2].new == 1 && devices[2].rejects == 0)
        // A device first seen through a rejection gets its sync time with its first stored batch.
        _ = try store.apply([batch("evil-1", 1, [order(5)])], at: date(500))
        #expect(try store.deviceReport().devices[1].lastSync == date(500))
    }

    @Test func reopeningKeepsEverything() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let records = randomRecords(seed: 7, count: 300)
        do {
            let store = try fixture.open()
            _ = try store.apply([batch("cart-1", 1, records)])
            try store.checkpoint()
            try store.close()
        }
        let store = try fixture.open()
        #expect(try store.apply([batch("cart-1", 1, records)]).map(\.new) == [0])
        #expect(
            try store.flightReports().flights
                == FlightReport.all(orders: orders(records), bags: BagState.bags(from: scans(records))))
    }

    @Test func aStoreWrittenBySchemaV1KeepsItsScansWithoutTheirBytes() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        // A store as the first release left it: migration v1 only, scans holding their MessagePack bytes.
        try DatabaseQueue(path: fixture.storePath).write { db in
            try db.execute(
                sql: """
                    CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                    INSERT INTO grdb_migrations VALUES ('v1');
                    CREATE TABLE scans (
                        id BLOB NOT NULL CHECK (length(id) = 16), flight TEXT NOT NULL,
                        tag BLOB NOT NULL CHECK (length(tag) = 16), point INTEGER NOT NULL CHECK (point IN (0, 1)),
                        scanned_at REAL NOT NULL, owner TEXT NOT NULL CHECK (length(owner) = 4),
                        weight REAL NOT NULL CHECK (weight >= 0), device TEXT NOT NULL, record BLOB NOT NULL);
                    CREATE UNIQUE INDEX scans_id ON scans(id);
                    CREATE TABLE orders (
                        id BLOB NOT NULL, revision INTEGER NOT NULL, flight TEXT NOT NULL, seat TEXT NOT NULL,
                        device TEXT NOT NULL, record BLOB NOT NULL);
                    CREATE UNIQUE INDEX orders_id ON orders(id);
                    CREATE INDEX orders_flight ON orders(flight);
                    CREATE TABLE devices (
                        device TEXT NOT NULL PRIMARY KEY, last_sync REAL, batches INTEGER NOT NULL DEFAULT 0,
                        records INTEGER NOT NULL DEFAULT 0, new_records INTEGER NOT NULL DEFAULT 0,
                        duplicates INTEGER NOT NULL DEFAULT 0, rejects INTEGER NOT NULL DEFAULT 0, last_reject_at REAL,
                        last_reject_reason TEXT) WITHOUT ROWID;
                    CREATE TABLE dirty_receipts (
                        flight TEXT NOT NULL, seat TEXT NOT NULL, generation INTEGER NOT NULL,
                        PRIMARY KEY (flight, seat)) WITHOUT ROWID;
                    """)
            guard case .scan(let old) = scan(10, tag: 1, weight: 23.5, at: 60) else { return }
            try db.execute(
                sql: "INSERT INTO scans VALUES (?, ?, ?, 0, ?, 'DZMU', ?, ?, x'00')",
                arguments: [
                    old.id, old.flight.rawValue, old.tag.id, old.scannedAt.timeIntervalSinceReferenceDate,
                    old.tag.weight, old.device,
                ])
        }
        let store = try fixture.open()
        let columns = try DatabaseQueue(path: fixture.storePath).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM pragma_table_info('scans')")
        }
        #expect(!columns.contains("record"))
        #expect(try store.bags() == BagState.bags(from: scans([scan(10, tag: 1, weight: 23.5, at: 60)])))
        // The old scan still deduplicates, and new scans go into the new shape.
        let outcomes = try store.apply([batch("ramp-1", 1, [scan(10, tag: 1), scan(11, tag: 1, point: .destination)])])
        #expect(outcomes.map(\.new) == [1])
        #expect(try store.bags().first?.arrivedAt == date(0))
    }
}
