// Record decode benchmark: the sync benchmark's record mix, framed in batches of 1,000 as agents send them, through
// `IncomingBatch.decode` (RecordDecoder, one pass) and `IncomingBatch.referenceDecode` (Codable), in the same run.
// Prints µs per record of CPU time (this thread), best of the rounds, for each path.
//
//   swift build -c release --product record-decode-benchmark
//   .build/release/record-decode-benchmark [--records 100000] [--rounds 5] [--quick-only]

import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack

#if canImport(Glibc)
    import Glibc
#endif

var recordCount = 100_000
var rounds = 5
/// `--quick-only` measures only the new path (for profilers).
var quickOnly = false
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--quick-only" {
        quickOnly = true
        continue
    }
    guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
        fatalError("usage: record-decode-benchmark [--records N] [--rounds N]")
    }
    switch argument {
    case "--records": recordCount = value
    case "--rounds": rounds = value
    default: fatalError("unknown option \(argument)")
    }
}

/// CPU time of this thread, in seconds.
func threadCPU() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

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
    var bytes = (rng.next(), rng.next())
    return withUnsafeMutableBytes(of: &bytes) { raw in
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        return UUID(uuid: raw.load(as: uuid_t.self))
    }
}

// The sync benchmark's mix (Benchmarks/SyncBenchmark/main.swift, makeRecords), for one device: blocks of 8 — 3 orders
// (every 50th a revision-2 correction), 3 origin scans, 2 destination scans.
let device = "cart-1"
let flight = try! FlightID("ZA101/2026-11-21")
let seats = (1...30).flatMap { row in ["A", "B", "C", "D", "E", "F"].map { try! Seat("\(row)\($0)") } }
let menu = [
    Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300), Item(name: "Popcorn", unitPrice: 400),
]
let families = ["ZMU", "DOE", "LEE", "KIM", "ROY"]
let start = Date(timeIntervalSince1970: 1_795_250_000)

func makeRecords(count: Int) -> [Record] {
    var rng = SplitMix(state: 1_000_003)
    var records: [Record] = []
    var orders: [Order] = []
    var bags: [LuggageTag] = []
    var n = 0
    while records.count < count {
        let slot = n % 8
        let time = start + Double(n)
        switch slot {
        case 0, 1, 2:
            if orders.count % 50 == 49 {
                var corrected = orders[orders.count - 7]
                corrected.revision = 2
                corrected.lineItems = [LineItem(item: menu[Int(rng.next() % 3)], count: 1)]
                orders.append(corrected)
                records.append(.order(corrected))
            } else {
                let first = Int(rng.next() % 3)
                let order = Order(
                    id: randomUUID(&rng), revision: 1, flight: flight,
                    seat: seats[Int(rng.next() % UInt64(seats.count))],
                    lineItems: [
                        LineItem(item: menu[first], count: Int(rng.next() % 3) + 1),
                        LineItem(item: menu[(first + 1) % 3], count: 1),
                    ],
                    currency: "USD", createdAt: time, device: device)
                orders.append(order)
                records.append(.order(order))
            }
        case 3, 4, 5:
            let tag = LuggageTag(
                id: randomUUID(&rng),
                owner: try! Owner(
                    initial: String(UnicodeScalar(UInt8(65 + rng.next() % 26))),
                    family: families[Int(rng.next() % UInt64(families.count))]),
                weight: Double(rng.next() % 60) / 2 + 5)
            bags.append(tag)
            records.append(
                .scan(
                    Scan(
                        id: randomUUID(&rng), tag: tag, point: .origin, scannedAt: time, flight: flight, device: device)
                ))
        default:
            let tag = bags[bags.count - 1 - (slot - 6) * 2]
            records.append(
                .scan(
                    Scan(
                        id: randomUUID(&rng), tag: tag, point: .destination, scannedAt: time + 36_000, flight: flight,
                        device: device)))
        }
        n += 1
    }
    return records
}

let records = makeRecords(count: recordCount)
let encoder = MessagePackEncoder()
let payloads = records.map { try! encoder.encode($0) }
let batchSize = 1_000
let messages: [[Data]] = stride(from: 0, to: payloads.count, by: batchSize).map { first in
    let slice = payloads[first..<min(first + batchSize, payloads.count)]
    let batch = OutgoingBatch(
        device: device, records: slice.enumerated().map { (UInt64(first + $0.offset + 1), $0.element) })
    return try! batch.frames()
}
let bytes = payloads.reduce(0) { $0 + $1.count }
print(
    "\(records.count) records (\(bytes / records.count) B each) in \(messages.count) batches of \(batchSize), "
        + "\(rounds) rounds, CPU µs/record (best round):")

// Same outcome both ways, or the comparison means nothing.
for frames in messages.prefix(10) {
    let quick = try! IncomingBatch.decode(frames: frames, authenticatedDevice: device).get()
    let reference = try! IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: device).get()
    precondition(quick.records.map(\.record) == reference.records.map(\.record))
    precondition(quick.records.map(\.bytes) == reference.records.map(\.bytes))
}

@MainActor func measure(_ name: String, _ decode: ([Data]) -> Result<IncomingBatch, BatchRejection>) -> Double {
    var best = Double.infinity
    for _ in 0..<rounds {
        var kept = 0
        let before = threadCPU()
        for frames in messages {
            guard case .success(let batch) = decode(frames) else { fatalError("\(name) refused a batch") }
            kept &+= batch.records.count
        }
        let perRecord = (threadCPU() - before) / Double(kept) * 1e6
        best = min(best, perRecord)
    }
    print("  \(name): \(String(format: "%.2f", best)) µs/record")
    return best
}

let codable =
    quickOnly
    ? .nan
    : measure("Codable (referenceDecode)") {
        IncomingBatch.referenceDecode(frames: $0, authenticatedDevice: device)
    }
let quick = measure("RecordDecoder (decode)   ") { IncomingBatch.decode(frames: $0, authenticatedDevice: device) }
print("  speed-up: \(String(format: "%.1f", codable / quick))×")
