// Encodes and decodes docs/PROTOCOL.md's orders with MessagePack and, on the same data in the same run, with Foundation's
// JSON coders. Build in release: swift build -c release --product messagepack-benchmark
import Foundation
import JetbridgeTestKit
import MessagePack

struct Item: Codable, Hashable {
    var name: String
    var unitPrice: Int
}

struct LineItem: Codable, Hashable {
    var item: Item
    var count: Int
}

struct Order: Codable, Hashable {
    var type: String
    var id: UUID
    var revision: Int
    var flight: String
    var seat: String
    var lineItems: [LineItem]
    var currency: String
    var createdAt: Date
    var device: String
}

extension SplitMix {
    /// A draw below `bound` (the test kit's generator; a fixed seed, so every run measures the same orders).
    mutating func next(below bound: Int) -> Int {
        Int(next() % UInt64(bound))
    }
}

func makeOrders(_ count: Int) -> [Order] {
    var random = SplitMix(state: 42)
    let menu = [
        Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300),
        Item(name: "Popcorn", unitPrice: 400),
    ]
    let start = Date(timeIntervalSince1970: 1_795_000_000)
    return (0..<count).map { n in
        var uuid = UUID().uuid
        withUnsafeMutableBytes(of: &uuid) { bytes in
            let a = random.next()
            let b = random.next()
            withUnsafeBytes(of: a) { bytes.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 8) }
            withUnsafeBytes(of: b) { (bytes.baseAddress! + 8).copyMemory(from: $0.baseAddress!, byteCount: 8) }
            bytes[6] = bytes[6] & 0x0f | 0x40
            bytes[8] = bytes[8] & 0x3f | 0x80
        }
        let lines = (0..<(1 + random.next(below: 4))).map { _ in
            LineItem(item: menu[random.next(below: menu.count)], count: 1 + random.next(below: 5))
        }
        let row = 1 + random.next(below: 40)
        let seat = "\(row)\(["A", "B", "C", "D", "E", "F"][random.next(below: 6)])"
        return Order(
            type: "order", id: UUID(uuid: uuid), revision: random.next(below: 3),
            flight: "ZA\(100 + n % 20)/2026-11-21",
            seat: seat, lineItems: lines, currency: "USD",
            createdAt: start + Double(n) * 0.25 + Double(random.next(below: 1000)) / 1000,
            device: "device-\(random.next(below: 10))")
    }
}

/// This thread's CPU time: on a machine shared with other builds, wall time mostly measures the neighbours.
func cpuSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

func wallSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

struct Timing {
    var cpu = Double.infinity
    var cpuWorst = 0.0
    var wall = Double.infinity
}

/// The best of `runs` timings of `body` (CPU and wall), and the slowest CPU time.
func measure(runs: Int, _ body: () throws -> Void) rethrows -> Timing {
    var timing = Timing()
    for _ in 0..<runs {
        let cpu = cpuSeconds()
        let wall = wallSeconds()
        try body()
        let cpuElapsed = cpuSeconds() - cpu
        timing.cpu = min(timing.cpu, cpuElapsed)
        timing.cpuWorst = max(timing.cpuWorst, cpuElapsed)
        timing.wall = min(timing.wall, wallSeconds() - wall)
    }
    return timing
}

let count = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 100_000
let runs = Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 5
let orders = makeOrders(count)

let mpEncoder = MessagePackEncoder()
let mpDecoder = MessagePackDecoder()
let jsonEncoder = JSONEncoder()
let jsonDecoder = JSONDecoder()

/// An optional third argument runs only the operations whose "operation codec" contains it (for profiling).
let only = CommandLine.arguments.dropFirst(3).first
let withJSON = only.map { !$0.contains("MessagePack") } ?? true

let mpArray = try mpEncoder.encode(orders)
let jsonArray = withJSON ? try jsonEncoder.encode(orders) : Data()
if only == nil {
    // Dates pass through nanosecond timestamps, so compare bytes after a round trip rather than the Doubles.
    let roundTripped = try mpEncoder.encode(try mpDecoder.decode([Order].self, from: mpArray))
    precondition(roundTripped == mpArray, "MessagePack round trip differs")
}
let mpSingles = try orders.map { try mpEncoder.encode($0) }
let jsonSingles = withJSON ? try orders.map { try jsonEncoder.encode($0) } : []
let mpSingleBytes = mpSingles.reduce(0) { $0 + $1.count }
let jsonSingleBytes = jsonSingles.reduce(0) { $0 + $1.count }

struct Row {
    var operation: String
    var codec: String
    var seconds: Timing
    var bytes: Int
}

var rows: [Row] = []
@MainActor func run(_ operation: String, _ codec: String, bytes: Int, _ body: () throws -> Void) rethrows {
    if let only, !"\(operation) \(codec)".contains(only) {
        rows.append(
            Row(operation: operation, codec: codec, seconds: Timing(cpu: 1, cpuWorst: 1, wall: 1), bytes: bytes))
        return
    }
    rows.append(Row(operation: operation, codec: codec, seconds: try measure(runs: runs, body), bytes: bytes))
}

var sink = 0
try run("encode array", "MessagePack", bytes: mpArray.count) { sink &+= try mpEncoder.encode(orders).count }
try run("encode array", "JSON", bytes: jsonArray.count) { sink &+= try jsonEncoder.encode(orders).count }
try run("encode each", "MessagePack", bytes: mpSingleBytes) {
    for order in orders { sink &+= try mpEncoder.encode(order).count }
}
try run("encode each", "JSON", bytes: jsonSingleBytes) {
    for order in orders { sink &+= try jsonEncoder.encode(order).count }
}
try run("decode array", "MessagePack", bytes: mpArray.count) {
    sink &+= try mpDecoder.decode([Order].self, from: mpArray).count
}
try run("decode array", "JSON", bytes: jsonArray.count) {
    sink &+= try jsonDecoder.decode([Order].self, from: jsonArray).count
}
try run("decode each", "MessagePack", bytes: mpSingleBytes) {
    for data in mpSingles { sink &+= try mpDecoder.decode(Order.self, from: data).revision }
}
try run("decode each", "JSON", bytes: jsonSingleBytes) {
    for data in jsonSingles { sink &+= try jsonDecoder.decode(Order.self, from: data).revision }
}

func pad(_ s: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - s.count))
    return right ? padding + s : s + padding
}

func format(_ value: Double, _ digits: Int) -> String {
    String(format: "%.\(digits)f", value)
}

print(
    "\(count) orders; best of \(runs) runs by thread CPU time (spread = slowest/fastest CPU time; wall = ratio by wall time)"
)
print(
    pad("operation", 14) + pad("codec", 13) + pad("orders/s", 12, right: true) + pad("MB/s", 9, right: true)
        + pad("B/order", 9, right: true) + pad("spread", 8, right: true) + pad("vs JSON", 9, right: true)
        + pad("wall", 8, right: true))
for (i, row) in rows.enumerated() {
    let ordersPerSecond = Double(count) / row.seconds.cpu
    let megabytes = Double(row.bytes) / 1e6 / row.seconds.cpu
    let isMessagePack = i % 2 == 0
    let ratio = isMessagePack ? rows[i + 1].seconds.cpu / row.seconds.cpu : 1
    let wallRatio = isMessagePack ? rows[i + 1].seconds.wall / row.seconds.wall : 1
    print(
        pad(row.operation, 14) + pad(row.codec, 13) + pad(format(ordersPerSecond, 0), 12, right: true)
            + pad(format(megabytes, 1), 9, right: true)
            + pad(format(Double(row.bytes) / Double(count), 1), 9, right: true)
            + pad(format(row.seconds.cpuWorst / row.seconds.cpu, 2), 8, right: true)
            + pad(isMessagePack ? format(ratio, 2) + "×" : "", 9, right: true)
            + pad(isMessagePack ? format(wallRatio, 2) + "×" : "", 8, right: true))
}
if sink == 42 { print("") }
