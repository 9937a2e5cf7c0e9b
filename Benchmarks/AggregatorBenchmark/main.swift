// aggregator-benchmark: post-landing bulk sync against a real `jetbridge-aggregator serve` process, CURVE on.
// D devices (threads with PUSH + DEALER, as the agent has) each send R records in batches of 1,000 with 8 batches
// in flight, resending what is unacked after 20 s. Prints records/s from first send to last ack, and the aggregator
// process's peak RSS (VmHWM) and CPU time. Generating and encoding records is not timed.
//
//   swift build -c release --product aggregator-benchmark --product jetbridge-aggregator
//   .build/release/aggregator-benchmark [devices] [records-per-device] [extra serve flags…]
//   AGGREGATOR_BENCHMARK_HOME=DIR keeps the aggregator's home afterwards.

import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import ZeroMQ

let arguments = CommandLine.arguments
let deviceCount = arguments.count > 1 ? Int(arguments[1])! : 10
let recordsPerDevice = arguments.count > 2 ? Int(arguments[2])! : 100_000
let extraFlags = Array(arguments.dropFirst(3))
let batchSize = 1_000
// AGGREGATOR_BENCHMARK_WINDOW sets batches in flight per device (default 8, as the agent); large values make a backlog.
let window = ProcessInfo.processInfo.environment["AGGREGATOR_BENCHMARK_WINDOW"].flatMap { Int($0) } ?? 8

// AGGREGATOR_BENCHMARK_HOME keeps the aggregator's home (store, receipts) afterwards, e.g. to try reports on it.
let keptHome = ProcessInfo.processInfo.environment["AGGREGATOR_BENCHMARK_HOME"]
let directory =
    keptHome.map { URL(fileURLWithPath: $0) }
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("aggregator-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { if keptHome == nil { try? FileManager.default.removeItem(at: directory) } }
let home = AggregatorHome(directory: directory)
let serverKey = try Z85.decode(ServerKeys.generate(in: home, force: false))
let devices = (1...deviceCount).map { "cart-\($0)" }
var deviceKeys: [String: CurveKeyPair] = [:]
var allowlist = DeviceAllowlist()
for device in devices {
    let keys = try CurveKeyPair.generate()
    deviceKeys[device] = keys
    try allowlist.allow(device: device, publicKey: keys.publicKeyZ85)
}
try allowlist.save(to: home.devicesFile)

// MARK: Records

/// Each device serves one flight per 400 records (200 orders over 180 seats, 200 bag scans), so receipts hold about
/// one order each, as after real flights; flight numbers run ZA1000… and dates roll over every 8,000 flights.
func flight(_ index: Int) -> FlightID {
    try! FlightID("ZA\(1_000 + index % 8_000)/2026-11-\(10 + index / 8_000)")
}
let seats = (1...30).flatMap { row in ["A", "B", "C", "D", "E", "F"].map { try! Seat("\(row)\($0)") } }
let menu = [
    Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300), Item(name: "Popcorn", unitPrice: 400),
]
let owner = try! Owner(initial: "D", family: "ZMU")
let start = Date(timeIntervalSince1970: 1_795_250_000)

func record(_ n: Int, device: String, deviceIndex: Int) -> Record {
    let flight = flight((deviceIndex * recordsPerDevice + n) / 400)
    if n % 2 == 0 {
        return .order(
            Order(
                id: UUID(), revision: 1, flight: flight, seat: seats[(n / 2) % seats.count],
                lineItems: [LineItem(item: menu[n % 3], count: 2), LineItem(item: menu[(n + 1) % 3], count: 1)],
                currency: "USD", createdAt: start + Double(n), device: device))
    }
    return .scan(
        Scan(
            id: UUID(), tag: LuggageTag(id: UUID(), owner: owner, weight: 42.5),
            point: n % 4 == 1 ? .origin : .destination, scannedAt: start + Double(n), flight: flight, device: device))
}

print("encoding \(deviceCount) × \(recordsPerDevice) records…")
let encoder = MessagePackEncoder()
let batchesByDevice: [[OutgoingBatch]] = devices.enumerated().map { deviceIndex, device in
    stride(from: 0, to: recordsPerDevice, by: batchSize).map { first in
        let records = (first..<min(first + batchSize, recordsPerDevice)).map { n in
            (sequence: UInt64(n + 1), payload: try! encoder.encode(record(n, device: device, deviceIndex: deviceIndex)))
        }
        return OutgoingBatch(device: device, records: records)
    }
}

// MARK: Aggregator process

let binary = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    .appendingPathComponent("jetbridge-aggregator")
let logFile = directory.appendingPathComponent("serve.log")
_ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
let server = Process()
server.executableURL = binary
server.arguments =
    ["--home", directory.path, "serve", "--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"] + extraFlags
server.standardError = try FileHandle(forWritingTo: logFile)
try server.run()
var log = ""
while !log.contains("aggregator serving") {
    guard server.isRunning else { fatalError("the aggregator exited: \(log)") }
    Thread.sleep(forTimeInterval: 0.05)
    log = try String(contentsOf: logFile, encoding: .utf8)
}
@MainActor func endpoint(_ name: String) -> String {
    let match = log.firstMatch(of: try! Regex("\(name)=(tcp://[0-9.]+:[0-9]+)"))!
    return String(match.output[1].substring!)
}
let dataEndpoint = endpoint("data")
let acksEndpoint = endpoint("acks")

@MainActor func processStatus(_ field: String) -> String {
    let status = (try? String(contentsOfFile: "/proc/\(server.processIdentifier)/status", encoding: .utf8)) ?? ""
    return status.split(separator: "\n").first { $0.hasPrefix(field) }.map {
        $0.dropFirst(field.count).trimmingCharacters(in: .whitespaces)
    } ?? "?"
}

@MainActor func processCPUSeconds() -> Double {
    let stat = (try? String(contentsOfFile: "/proc/\(server.processIdentifier)/stat", encoding: .utf8)) ?? ""
    let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds per thread name of the aggregator process (network, store, receipts, libzmq I/O, …).
@MainActor func threadCPUSeconds() -> [String: Double] {
    let tasks = "/proc/\(server.processIdentifier)/task"
    var result: [String: Double] = [:]
    for tid in (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? [] {
        let name = ((try? String(contentsOfFile: "\(tasks)/\(tid)/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let stat = (try? String(contentsOfFile: "\(tasks)/\(tid)/stat", encoding: .utf8)) ?? ""
        let fields = stat.split(separator: ")").last?.split(separator: " ") ?? []
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
        result[name, default: 0] += (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    return result
}

// MARK: Devices

final class Results: @unchecked Sendable {
    let lock = NSLock()
    var duplicates = 0
    var resends = 0
    var rejected = 0
}
let results = Results()
let context = try ZeroMQContext(ioThreads: 1)
let done = DispatchGroup()
let clockStart = ContinuousClock.now
let cpuStart = processCPUSeconds()

for (index, device) in devices.enumerated() {
    done.enter()
    let batches = batchesByDevice[index]
    let keys = deviceKeys[device]!
    let thread = Thread {
        defer { done.leave() }
        do {
            let push = try context.socket(.push)
            let dealer = try context.socket(.dealer)
            for socket in [push, dealer] {
                try socket.set(.linger, .seconds(1))
                try socket.makeCurveClient(keys: keys, serverPublicKey: serverKey)
            }
            try push.set(.sendHighWaterMark, window)
            try dealer.set(.routingID, Data(device.utf8))
            try dealer.connect(acksEndpoint)
            try push.connect(dataEndpoint)
            try dealer.send(WireCoding.encode(Hello(device: device)))
            var next = 0
            var inFlight: [UInt64: (index: Int, sentAt: ContinuousClock.Instant)] = [:]
            var acked = 0
            while acked < batches.count {
                while inFlight.count < window && next < batches.count {
                    try push.send(try batches[next].frames())
                    inFlight[batches[next].header.first] = (next, .now)
                    next += 1
                }
                if try poll([PollItem(dealer, .readable)], timeout: .milliseconds(100))[0].contains(.readable) {
                    while let frame = try dealer.receive(options: .dontWait) {
                        let ack = try WireCoding.decode(Ack.self, from: frame)
                        guard inFlight.removeValue(forKey: ack.first) != nil else { continue }
                        acked += 1
                        results.lock.lock()
                        results.duplicates += ack.duplicates ?? 0
                        if ack.status != .stored { results.rejected += 1 }
                        results.lock.unlock()
                    }
                }
                for (first, entry) in inFlight where ContinuousClock.now - entry.sentAt > .seconds(20) {
                    try dealer.send(WireCoding.encode(Hello(device: device)))
                    try push.send(try batches[entry.index].frames())
                    inFlight[first] = (entry.index, .now)
                    results.lock.lock()
                    results.resends += 1
                    results.lock.unlock()
                }
            }
            try push.close(linger: .seconds(1))
            try dealer.close(linger: .zero)
        } catch {
            print("\(device): \(error)")
        }
    }
    thread.start()
}
done.wait()
let elapsed = ContinuousClock.now - clockStart
let cpu = processCPUSeconds() - cpuStart
let peak = processStatus("VmHWM:")
let threads = threadCPUSeconds()
server.terminate()
server.waitUntilExit()
context.terminate()

let total = deviceCount * recordsPerDevice
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
print(
    "end to end: \(total) records from \(deviceCount) devices in \(String(format: "%.2f", seconds)) s = \(Int(Double(total) / seconds)) records/s"
)
print(
    "aggregator: peak RSS \(peak), CPU \(String(format: "%.1f", cpu)) s (\(String(format: "%.1f", cpu * 1e6 / Double(total))) µs/record)"
)
print(
    "acks: \(results.duplicates) duplicate records, \(results.resends) resends, \(results.rejected) not stored; exit \(server.terminationStatus)"
)
print(
    "aggregator threads (CPU s): "
        + threads.sorted { $0.value > $1.value }.filter { $0.value >= 0.05 }
        .map { "\($0.key) \(String(format: "%.1f", $0.value))" }.joined(separator: ", "))
print(
    (try? String(contentsOf: logFile, encoding: .utf8))?.split(separator: "\n").filter { $0.contains("statistics") }
        .last ?? "")
