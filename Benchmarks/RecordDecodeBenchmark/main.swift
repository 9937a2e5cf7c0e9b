// Record decode benchmark: the sync benchmark's record mix, framed in batches of 1,000 as agents send them, through
// `IncomingBatch.decode` (RecordDecoder, one pass) and `IncomingBatch.referenceDecode` (Codable), in the same run.
// Prints µs per record of CPU time (this thread), best of the rounds, for each path.
//
//   swift build -c release --product record-decode-benchmark
//   .build/release/record-decode-benchmark [--records 100000] [--rounds 5] [--quick-only]

import BenchmarkSupport
import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack

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
    let usage = "usage: record-decode-benchmark [--records N] [--rounds N] [--quick-only]"
    guard ["--records", "--rounds"].contains(argument) else {
        exitWithUsage("unknown option \(argument)", usage: usage)
    }
    guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
        exitWithUsage("\(argument) takes a positive number", usage: usage)
    }
    switch argument {
    case "--records": recordCount = value
    case "--rounds": rounds = value
    default: preconditionFailure("every numeric option is listed above")
    }
}

// The sync benchmark's mix (`RecordMix`, as Benchmarks/SyncBenchmark makes it) for one device, with the seed the sync
// benchmark gives its second device.
let device = "cart-1"
let flight = try! FlightID("ZA101/2026-11-21")

let records = RecordMix.records(count: recordCount, seed: 1_000_003, device: device, flight: flight)
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
