// Store benchmark: 1,000,000 records (half orders, half scans, random UUIDs) through AggregatorStore.apply in batches
// of 1,000, 20 batches per transaction; then the same rows inserted with the sqlite3 C API in ONE transaction (the
// floor the store is measured against). Only store calls are timed; generating records is not.
//
//   swift build -c release --product store-benchmark && .build/release/store-benchmark [records] [directory]
//                                                       [batches per transaction, a multiple of 20]

import BenchmarkSupport
import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
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

let flights = (1...20).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }
let seats = RecordMix.seats
let menu = RecordMix.menu
let owner = try! Owner(initial: "D", family: "ZMU")
let devices = (1...10).map { "cart-\($0)" }
let start = RecordMix.start

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
        let c0 = selfCPU()
        let outcomes = try store.apply(batches)
        storeSeconds += now() - t0
        storeCPU += selfCPU() - c0
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

// `DirectInsert` (shared with the sync benchmark): plain inserts, as these records hold no corrections.
var directSeconds = 0.0
var directCPU = 0.0
do {
    let direct = DirectInsert(path: directory.appendingPathComponent("direct.sqlite").path, upsertingOrders: false)
    var rng = SplitMix(state: 42)
    var t0 = now()
    direct.begin()
    directSeconds += now() - t0
    for group in 0..<groups {
        let batches = makeGroup(group, &rng)
        t0 = now()
        let c0 = selfCPU()
        for batch in batches {
            for incoming in batch.records { direct.insert(incoming.record, bytes: incoming.bytes) }
        }
        directSeconds += now() - t0
        directCPU += selfCPU() - c0
    }
    t0 = now()
    let c0 = selfCPU()
    direct.commit()
    directSeconds += now() - t0
    directCPU += selfCPU() - c0
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
