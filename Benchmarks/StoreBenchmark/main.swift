// Store benchmark: 1,000,000 records (half orders, half scans, random UUIDs) through AggregatorStore.apply in batches
// of 1,000, 20 batches per transaction; then the same rows inserted with the sqlite3 C API in ONE transaction (the
// floor the store is measured against). Only store calls are timed; generating records is not.
//
//   swift build -c release --product store-benchmark && .build/release/store-benchmark [records] [directory]
//                                                       [batches per transaction, a multiple of 20]

import Foundation
import GRDBSQLite
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import Logging
import MessagePack

let totalRecords = CommandLine.arguments.count > 1 ? Int(CommandLine.arguments[1])! : 1_000_000
let batchSize = 1_000
let batchesPerTransaction = 20
/// Batches the store is given per `apply` (one transaction); a multiple of `batchesPerTransaction`.
let storeBatchesPerTransaction =
    CommandLine.arguments.count > 3 ? Int(CommandLine.arguments[3])! : batchesPerTransaction
precondition(storeBatchesPerTransaction % batchesPerTransaction == 0, "batches per transaction: a multiple of 20")
let baseDirectory =
    CommandLine.arguments.count > 2
    ? URL(fileURLWithPath: CommandLine.arguments[2]) : FileManager.default.temporaryDirectory
let directory = baseDirectory.appendingPathComponent("store-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

/// SplitMix64: the same seed gives the store and the direct run the same rows.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func randomUUID(_ rng: inout SplitMix) -> UUID {
    let a = rng.next()
    let b = rng.next()
    let bytes = (
        UInt8(truncatingIfNeeded: a), UInt8(truncatingIfNeeded: a >> 8), UInt8(truncatingIfNeeded: a >> 16),
        UInt8(truncatingIfNeeded: a >> 24), UInt8(truncatingIfNeeded: a >> 32), UInt8(truncatingIfNeeded: a >> 40),
        UInt8(truncatingIfNeeded: a >> 48) & 0x0F | 0x40, UInt8(truncatingIfNeeded: a >> 56),
        UInt8(truncatingIfNeeded: b) & 0x3F | 0x80, UInt8(truncatingIfNeeded: b >> 8),
        UInt8(truncatingIfNeeded: b >> 16),
        UInt8(truncatingIfNeeded: b >> 24), UInt8(truncatingIfNeeded: b >> 32), UInt8(truncatingIfNeeded: b >> 40),
        UInt8(truncatingIfNeeded: b >> 48), UInt8(truncatingIfNeeded: b >> 56)
    )
    return UUID(uuid: bytes)
}

let flights = (1...20).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }
let seats = (1...30).flatMap { row in ["A", "B", "C", "D", "E", "F"].map { try! Seat("\(row)\($0)") } }
let menu = [
    Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300), Item(name: "Popcorn", unitPrice: 400),
]
let owner = try! Owner(initial: "D", family: "ZMU")
let devices = (1...10).map { "cart-\($0)" }
let start = Date(timeIntervalSince1970: 1_795_250_000)

let encoder = MessagePackEncoder()

/// A batch as the network layer hands it to the store: real MessagePack records framed and checked by
/// `IncomingBatch.decode` (not timed), so the store keeps the bytes it would keep in production.
func checkedBatch(device: String, first: UInt64, records: [Record]) -> IncomingBatch {
    let payloads = records.enumerated().map { (UInt64($0.offset) + first, try! encoder.encode($0.element)) }
    let frames = try! OutgoingBatch(device: device, records: payloads.map { (sequence: $0.0, payload: $0.1) }).frames()
    return try! IncomingBatch.decode(frames: frames, authenticatedDevice: device).get()
}

/// One transaction's worth of batches; record `i` overall is an order when even, a scan when odd.
func makeGroup(_ group: Int, _ rng: inout SplitMix) -> [IncomingBatch] {
    (0..<batchesPerTransaction).map { b in
        let batchIndex = group * batchesPerTransaction + b
        let device = devices[batchIndex % devices.count]
        let records = (0..<batchSize).map { i -> Record in
            let n = batchIndex * batchSize + i
            let flight = flights[Int(rng.next() % UInt64(flights.count))]
            if n % 2 == 0 {
                let order = Order(
                    id: randomUUID(&rng), revision: 1, flight: flight,
                    seat: seats[Int(rng.next() % UInt64(seats.count))],
                    lineItems: [LineItem(item: menu[n % 3], count: 2), LineItem(item: menu[(n + 1) % 3], count: 1)],
                    currency: "USD", createdAt: start + Double(n), device: device)
                return .order(order)
            } else {
                let scan = Scan(
                    id: randomUUID(&rng), tag: LuggageTag(id: randomUUID(&rng), owner: owner, weight: 42.5),
                    point: n % 4 == 1 ? .origin : .destination, scannedAt: start + Double(n), flight: flight,
                    device: device)
                return .scan(scan)
            }
        }
        return checkedBatch(device: device, first: UInt64(batchIndex * batchSize + 1), records: records)
    }
}

func peakRSS() -> String {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? "VmHWM: ?"
    return line.dropFirst(6).trimmingCharacters(in: .whitespaces)
}

/// User plus system CPU seconds of this process: on a machine shared with other builds, CPU time per record says
/// more than wall time.
func cpu() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

let groups = totalRecords / (batchSize * batchesPerTransaction)
let records = groups * batchSize * batchesPerTransaction

// MARK: Store

var storeSeconds = 0.0
var storeCPU = 0.0
var storeRSS = ""
do {
    let store = try AggregatorStore(
        path: directory.appendingPathComponent("store.sqlite").path, logger: Logger(label: "store-benchmark"))
    var rng = SplitMix(state: 42)
    var new = 0
    var batches: [IncomingBatch] = []
    for group in 0..<groups {
        batches += makeGroup(group, &rng)
        guard batches.count >= storeBatchesPerTransaction || group == groups - 1 else { continue }
        let t0 = now()
        let c0 = cpu()
        let outcomes = try store.apply(batches)
        storeSeconds += now() - t0
        storeCPU += cpu() - c0
        new += outcomes.reduce(0) { $0 + $1.new }
        batches = []
    }
    storeRSS = peakRSS()
    var t0 = now()
    try store.checkpoint()
    let checkpointSeconds = now() - t0
    t0 = now()
    let bags = try store.bags().count
    print(
        "bags:   \(bags) bags merged from \(records / 2) scans through BagState in \(String(format: "%.2f", now() - t0)) s"
    )
    try store.close()
    precondition(new == records, "expected \(records) new records, got \(new)")
    print(
        "store:  \(records) records in \(String(format: "%.2f", storeSeconds)) s (checkpoint afterwards: \(String(format: "%.2f", checkpointSeconds)) s, not counted)"
    )
}

// MARK: Direct

func check(_ code: Int32, _ db: OpaquePointer?, _ what: String) {
    guard code == SQLITE_OK || code == SQLITE_DONE || code == SQLITE_ROW else {
        fatalError("\(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}

var directSeconds = 0.0
var directCPU = 0.0
do {
    var db: OpaquePointer?
    check(sqlite3_open(directory.appendingPathComponent("direct.sqlite").path, &db), db, "open")
    func exec(_ sql: String) { check(sqlite3_exec(db, sql, nil, nil, nil), db, sql) }
    exec(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 100000"
    )
    // The store's tables and indexes (orders keep their bytes, scans are columns only), without its constraints'
    // upserts, statistics and receipt marks.
    exec(
        """
        CREATE TABLE orders (id BLOB NOT NULL, revision INTEGER NOT NULL, flight TEXT NOT NULL, seat TEXT NOT NULL,
            device TEXT NOT NULL, record BLOB NOT NULL);
        CREATE UNIQUE INDEX orders_id ON orders(id);
        CREATE INDEX orders_flight ON orders(flight);
        CREATE TABLE scans (id BLOB NOT NULL, flight TEXT NOT NULL, tag BLOB NOT NULL, point INTEGER NOT NULL,
            scanned_at REAL NOT NULL, owner TEXT NOT NULL, weight REAL NOT NULL, device TEXT NOT NULL);
        CREATE UNIQUE INDEX scans_id ON scans(id);
        """)
    var insertOrder: OpaquePointer?
    var insertScan: OpaquePointer?
    check(sqlite3_prepare_v2(db, "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?)", -1, &insertOrder, nil), db, "prepare")
    check(
        sqlite3_prepare_v2(db, "INSERT INTO scans VALUES (?, ?, ?, ?, ?, ?, ?, ?)", -1, &insertScan, nil), db,
        "prepare")
    let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
    func bind(_ statement: OpaquePointer?, _ index: Int32, _ uuid: UUID) {
        var bytes = uuid.uuid
        withUnsafeBytes(of: &bytes) { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, 16, transient) }
    }
    func bind(_ statement: OpaquePointer?, _ index: Int32, _ text: String) {
        _ = sqlite3_bind_text(statement, index, text, -1, transient)
    }
    func bind(_ statement: OpaquePointer?, _ index: Int32, _ data: Data) {
        data.withUnsafeBytes { _ = sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count), transient) }
    }
    func step(_ statement: OpaquePointer?) {
        check(sqlite3_step(statement), db, "step")
        sqlite3_reset(statement)
    }
    var rng = SplitMix(state: 42)
    var t0 = now()
    exec("BEGIN IMMEDIATE")
    directSeconds += now() - t0
    for group in 0..<groups {
        let batches = makeGroup(group, &rng)
        t0 = now()
        let c0 = cpu()
        for batch in batches {
            for incoming in batch.records {
                switch incoming.record {
                case .order(let order):
                    bind(insertOrder, 1, order.id)
                    sqlite3_bind_int64(insertOrder, 2, Int64(order.revision))
                    bind(insertOrder, 3, order.flight.rawValue)
                    bind(insertOrder, 4, order.seat.rawValue)
                    bind(insertOrder, 5, order.device)
                    bind(insertOrder, 6, incoming.bytes)
                    step(insertOrder)
                case .scan(let scan):
                    bind(insertScan, 1, scan.id)
                    bind(insertScan, 2, scan.flight.rawValue)
                    bind(insertScan, 3, scan.tag.id)
                    sqlite3_bind_int64(insertScan, 4, scan.point == .origin ? 0 : 1)
                    sqlite3_bind_double(insertScan, 5, scan.scannedAt.timeIntervalSinceReferenceDate)
                    bind(insertScan, 6, scan.tag.owner.initial + scan.tag.owner.family)
                    sqlite3_bind_double(insertScan, 7, scan.tag.weight)
                    bind(insertScan, 8, scan.device)
                    step(insertScan)
                }
            }
        }
        directSeconds += now() - t0
        directCPU += cpu() - c0
    }
    t0 = now()
    let c0 = cpu()
    exec("COMMIT")
    directSeconds += now() - t0
    directCPU += cpu() - c0
    sqlite3_finalize(insertOrder)
    sqlite3_finalize(insertScan)
    sqlite3_close(db)
    print("direct: \(records) records in \(String(format: "%.2f", directSeconds)) s (one transaction)")
}

let storeRate = Double(records) / storeSeconds
let directRate = Double(records) / directSeconds
print("")
print("                      records/s   CPU µs/record")
print(
    String(
        format: "store (%d batches/tx) %9.0f   %13.2f", storeBatchesPerTransaction, storeRate,
        storeCPU / Double(records) * 1e6))
print(String(format: "direct (one tx)       %9.0f   %13.2f", directRate, directCPU / Double(records) * 1e6))
print(String(format: "ratio store/direct    %9.2f   %13.2f", storeRate / directRate, directCPU / storeCPU))
print("peak RSS after applying: \(storeRSS); after the bag merge and the direct run: \(peakRSS())")
