// Sync benchmark: N devices × M records (orders and bag scans) synced by N `jetbridge-agent sync --until-drained`
// processes to one `jetbridge-aggregator serve` over CURVE; then, in the same run, the same rows inserted into SQLite
// directly in ONE transaction (the floor set by the store). Checks the flight report against the model's totals.
//
//   swift build -c release --product jetbridge-aggregator
//   swift build -c release --product jetbridge-agent
//   swift build -c release --product sync-benchmark
//   .build/release/sync-benchmark [--devices 10] [--records 100000] [--batch-records N] [--window N]
//                                 [--tx-batches N] [--tx-records N] [--queue-batches N] [--tx-delay-ms N] [--keep]
//                                 [--debug-log]

import BenchmarkSupport
import FileQueue
import Foundation
import GRDBSQLite
import JetbridgeModel
import MessagePack

#if canImport(Glibc)
    import Glibc
#endif

// MARK: Options

var deviceCount = 10
var recordsPerDevice = 100_000
var batchRecords: Int?
var window: Int?
var transactionBatches: Int?
var transactionRecords: Int?
var queueBatches: Int?
var transactionDelay: Int?
var keep = false
/// Serve logs at debug level (one line per transaction, with its records and milliseconds); costs some CPU.
var debugLog = false
let usage =
    "usage: sync-benchmark [--devices N] [--records N] [--batch-records N] [--window N] [--tx-batches N] [--tx-records N] [--queue-batches N] [--tx-delay-ms N] [--keep] [--debug-log]"
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    if argument == "--keep" {
        keep = true
        continue
    }
    if argument == "--debug-log" {
        debugLog = true
        continue
    }
    guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else { fatalError(usage) }
    switch argument {
    case "--devices": deviceCount = value
    case "--records": recordsPerDevice = value
    case "--batch-records": batchRecords = value
    case "--window": window = value
    case "--tx-batches": transactionBatches = value
    case "--tx-records": transactionRecords = value
    case "--queue-batches": queueBatches = value
    case "--tx-delay-ms": transactionDelay = value
    default: fatalError("unknown option \(argument); \(usage)")
    }
}

// MARK: Helpers

/// Prints and flushes, so a log file shows each line as it happens.
func say(_ line: String = "") {
    print(line)
    fflush(nil)
}

func grouped(_ value: Int) -> String {
    let digits = String(value)
    var out = ""
    for (index, character) in digits.reversed().enumerated() {
        if index > 0 && index % 3 == 0 { out.append(",") }
        out.append(character)
    }
    return String(out.reversed())
}

/// Starts a process with stdout and stderr going to `log` (or /dev/null).
func spawn(_ executable: URL, _ arguments: [String], log: URL? = nil) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    let output = log?.path ?? "/dev/null"
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let spawned = posix_spawn(&pid, executable.path, &actions, nil, argv, environ)
    guard spawned == 0 else { fatalError("posix_spawn \(executable.path): \(spawned)") }
    return pid
}

func wait(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        guard errno == EINTR else { fatalError("waitpid: \(errno)") }
    }
    // WIFEXITED / WEXITSTATUS, spelled out (Glibc's macros are not imported).
    return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
}

/// Runs a process to completion; its output goes to `log`.
func run(_ executable: URL, _ arguments: [String], log: URL) -> Int32 {
    wait(spawn(executable, arguments, log: log))
}

func statusField(_ pid: pid_t, _ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return 0 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
}

func processCPU(_ pid: pid_t) -> Double {
    // utime and stime, fields 14 and 15 of /proc/<pid>/stat, in clock ticks.
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    guard let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// CPU seconds per thread name (the aggregator names its network, store and receipts threads), busiest first.
func threadTimes(_ pid: pid_t) -> [(String, Double)] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
    var times: [String: Double] = [:]
    for tid in tasks {
        let name = ((try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)) ?? "?")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
        times[name, default: 0] += (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    return times.sorted { $0.value > $1.value }
}

/// User plus system CPU seconds of the children waited for so far.
func childrenCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Polls the store (read-only, beside the running serve) until no seat is marked for a receipt rewrite.
/// - Returns: Seconds waited, or nil after `timeout` seconds.
func waitForReceipts(_ path: String, timeout: Double) -> Double? {
    let start = now()
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return nil }
    defer { sqlite3_close(db) }
    while now() - start < timeout {
        var statement: OpaquePointer?
        var marked = -1
        if sqlite3_prepare_v2(db, "SELECT count(*) FROM dirty_receipts", -1, &statement, nil) == SQLITE_OK,
            sqlite3_step(statement) == SQLITE_ROW
        {
            marked = Int(sqlite3_column_int64(statement, 0))
        }
        sqlite3_finalize(statement)
        if marked == 0 { return now() - start }
        usleep(100_000)
    }
    return nil
}

func trimmedText(_ url: URL) throws -> String {
    try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}

func tail(_ url: URL, lines: Int = 20) -> String {
    let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
    return text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
}

// MARK: Data

let executables = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let agentExecutable = executables.appendingPathComponent("jetbridge-agent")
let aggregatorExecutable = executables.appendingPathComponent("jetbridge-aggregator")
for executable in [agentExecutable, aggregatorExecutable]
where !FileManager.default.isExecutableFile(atPath: executable.path) {
    fatalError(
        "\(executable.path) not found; build it first: swift build -c release --product \(executable.lastPathComponent)"
    )
}

let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("sync-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
// Removed at the end (a top-level `defer` would not run: the benchmark ends with `exit`).
say("scratch: \(scratch.path) (\(ProcessInfo.processInfo.activeProcessorCount) cores)")

let devices = (1...deviceCount).map { "cart-\($0)" }
let flights = (1...max(1, deviceCount / 2)).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }

/// One device's records (`RecordMix`, shared with the record-decode benchmark).
func makeRecords(device: Int, count: Int) -> [Record] {
    RecordMix.records(
        count: count, seed: UInt64(device) &* 1_000_003, device: devices[device],
        flight: flights[device % flights.count])
}

// MARK: Homes, keys and queues

let ground = scratch.appendingPathComponent("ground")
let dataEndpoint = "ipc://" + scratch.appendingPathComponent("data.ipc").path
let acksEndpoint = "ipc://" + scratch.appendingPathComponent("acks.ipc").path
let setupLog = scratch.appendingPathComponent("setup.log")
try FileManager.default.createDirectory(at: ground, withIntermediateDirectories: true)
var aggregatorSettings: [String: Int] = [:]
if let transactionBatches { aggregatorSettings["transactionMaxBatches"] = transactionBatches }
if let transactionRecords { aggregatorSettings["transactionMaxRecords"] = transactionRecords }
if let queueBatches { aggregatorSettings["queueMaxBatches"] = queueBatches }
if let transactionDelay { aggregatorSettings["transactionDelayMilliseconds"] = transactionDelay }
if !aggregatorSettings.isEmpty {
    try JSONSerialization.data(withJSONObject: aggregatorSettings).write(
        to: ground.appendingPathComponent("aggregator.json"))
}
guard run(aggregatorExecutable, ["--home", ground.path, "keys", "generate"], log: setupLog) == 0 else {
    fatalError("aggregator keys generate failed:\n\(tail(setupLog))")
}
let serverKey = try trimmedText(ground.appendingPathComponent("keys/server.pub"))

let total = deviceCount * recordsPerDevice
say(
    "\n\(deviceCount) devices × \(grouped(recordsPerDevice)) records = \(grouped(total)) (3/8 orders, 5/8 bag scans), CURVE, ipc endpoints"
)
var generationSeconds = 0.0
var allRecords: [(record: Record, bytes: Data)] = []
allRecords.reserveCapacity(total)
let encoder = MessagePackEncoder()
for (index, device) in devices.enumerated() {
    let home = scratch.appendingPathComponent(device)
    try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
    var sync: [String: Any] = ["ackTimeoutSeconds": 10]
    if let batchRecords { sync["batchRecords"] = batchRecords }
    if let window { sync["window"] = window }
    let configuration: [String: Any] = [
        "device": device, "flight": flights[index % flights.count].rawValue,
        "ground": ["data": dataEndpoint, "acks": acksEndpoint, "serverPublicKey": serverKey], "sync": sync,
    ]
    try JSONSerialization.data(withJSONObject: configuration).write(to: home.appendingPathComponent("agent.json"))
    guard run(agentExecutable, ["--home", home.path, "keys", "generate"], log: setupLog) == 0 else {
        fatalError("agent keys generate failed:\n\(tail(setupLog))")
    }
    let publicKey = try trimmedText(home.appendingPathComponent("keys/device.pub"))
    guard
        run(
            aggregatorExecutable, ["devices", "allow", "--home", ground.path, "--", device, publicKey], log: setupLog)
            == 0
    else { fatalError("devices allow failed:\n\(tail(setupLog))") }

    // Generation: records made and encoded in memory, then appended with group commits (4,096 per fdatasync).
    let t0 = now()
    let records = makeRecords(device: index, count: recordsPerDevice)
    let payloads = try records.map { try encoder.encode($0) }
    let queue = try FileQueue(directory: home.appendingPathComponent("queue"))
    var offset = 0
    while offset < payloads.count {
        let end = min(offset + 4096, payloads.count)
        try queue.append(contentsOf: payloads[offset..<end])
        offset = end
    }
    generationSeconds += now() - t0
    for (record, bytes) in zip(records, payloads) { allRecords.append((record, bytes)) }
}
let queueBytes = allRecords.reduce(0) { $0 + $1.bytes.count }
say(
    String(
        format: "generation: %@ records (%@ bytes of MessagePack) encoded and appended in %.2f s (not timed below)",
        grouped(total), grouped(queueBytes), generationSeconds))

// MARK: Sync

// A throughput run is no flood: lift the per-device limits (docs/AGGREGATOR.md, Limits) above what it sends.
do {
    let file = ground.appendingPathComponent("devices.json")
    var list = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as! [String: Any]
    list["limits"] = ["*": ["recordsPerFlight": 1_000_000_000, "recordsPerSecond": 1_000_000_000]]
    try JSONSerialization.data(withJSONObject: list).write(to: file)
}

let serveLog = scratch.appendingPathComponent("serve.log")
let serve = spawn(
    aggregatorExecutable,
    ["--home", ground.path, "serve", "--data", dataEndpoint, "--acks", acksEndpoint]
        + (debugLog ? ["--log-level", "debug"] : []),
    log: serveLog)
let readyDeadline = now() + 30
while !(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("data.ipc").path)
    && FileManager.default.fileExists(atPath: scratch.appendingPathComponent("acks.ipc").path))
{
    guard now() < readyDeadline else { fatalError("serve did not bind in 30 s:\n\(tail(serveLog))") }
    usleep(10_000)
}
usleep(200_000)
let serveCPU0 = processCPU(serve)

let childrenCPU0 = childrenCPU()
let syncStart = now()
let syncs = devices.map { device in
    spawn(
        agentExecutable,
        ["--home", scratch.appendingPathComponent(device).path, "sync", "--until-drained", "--timeout", "3600"],
        log: scratch.appendingPathComponent("sync-\(device).log"))
}
// VmHWM is the kernel's own peak of the resident set: read before SIGTERM, it covers the whole sync.
var exits: [Int32] = []
for pid in syncs { exits.append(wait(pid)) }
let syncSeconds = now() - syncStart
let agentsCPU = childrenCPU() - childrenCPU0
let serveCPU = processCPU(serve) - serveCPU0
let serveThreadCPU = threadTimes(serve)
// Receipts may trail the acks (the receipts thread waits for the store to go idle): wait until no seat is marked,
// then read the threads again, so the whole cost of the receipts shows.
let catchUpSeconds = waitForReceipts(ground.appendingPathComponent("jetbridge.sqlite").path, timeout: 600)
let threadCPUCaughtUp = threadTimes(serve)
let peakKiB = statusField(serve, "VmHWM")
kill(serve, SIGTERM)
let serveExit = wait(serve)
let syncRate = Double(total) / syncSeconds
say(
    String(
        format:
            "sync: %@ records in %.2f s from the first sync start to the last exit; aggregator CPU %.1f s (%.2f µs/record)",
        grouped(total), syncSeconds, serveCPU, serveCPU / Double(total) * 1e6))
say(
    "aggregator CPU by thread (whole process life): "
        + serveThreadCPU.prefix(6).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(separator: ", "))
say(
    String(format: "receipts caught up %.1f s after the last exit; then: ", catchUpSeconds ?? .nan)
        + threadCPUCaughtUp.prefix(3).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(separator: ", "))
say(String(format: "agents' CPU: %.1f s in all (%.2f µs/record)", agentsCPU, agentsCPU / Double(total) * 1e6))
say("agents' exit codes: \(exits.map(String.init).joined(separator: " ")); serve exit after SIGTERM: \(serveExit)")
for (device, code) in zip(devices, exits) where code != 0 {
    say("--- \(device) exited \(code):\n\(tail(scratch.appendingPathComponent("sync-\(device).log")))")
}

// MARK: Correctness

var pass = exits.allSatisfy { $0 == 0 } && serveExit == 0
let reportFile = scratch.appendingPathComponent("report.json")
let reportStatus = run(
    aggregatorExecutable,
    ["--home", ground.path, "report", "flights", "--format", "json", "--output", reportFile.path],
    log: setupLog)
var orders: [Order] = []
var scans: [Scan] = []
for (record, _) in allRecords {
    switch record {
    case .order(let order): orders.append(order)
    case .scan(let scan): scans.append(scan)
    }
}
let expected = FlightReports(flights: try FlightReport.all(orders: orders, bags: BagState.bags(from: scans)))
if reportStatus == 0, let data = try? Data(contentsOf: reportFile),
    let reported = try? JSONDecoder().decode(FlightReports.self, from: data)
{
    if reported != expected {
        pass = false
        say("report differs from the generated totals:\n  expected \(expected)\n  reported \(reported)")
    }
} else {
    pass = false
    say("report flights failed (\(reportStatus)):\n\(tail(setupLog))")
}
// One .txt and one .json per seat with orders, once the receipts caught up.
let receiptSeats = Set(orders.map { "\($0.flight.rawValue) \($0.seat.rawValue)" }).count
let receiptFiles =
    ((try? FileManager.default.contentsOfDirectory(atPath: ground.appendingPathComponent("receipts").path)) ?? [])
    .filter { !$0.hasPrefix(".") }.count
if catchUpSeconds == nil || receiptFiles != 2 * receiptSeats {
    pass = false
    say("receipts: \(receiptFiles) files for \(receiptSeats) seats with orders (caught up: \(catchUpSeconds != nil))")
}
let expectedOrders = expected.flights.reduce(0) { $0 + $1.orders }
let expectedBags = expected.flights.reduce(0) { $0 + $1.bags.checked }
say(
    "correctness: report flights --format json vs the model's totals of what was generated (\(grouped(expectedOrders)) orders, \(grouped(expectedBags)) bags), 2 receipt files per seat: \(pass ? "PASS" : "FAIL")"
)
if !pass { say("--- serve log:\n\(tail(serveLog))") }

// MARK: Direct

/// The same rows into the store's tables in ONE transaction (`DirectInsert`, shared with the store benchmark), with
/// corrections replacing the earlier revision as the store's upsert does.
/// - Returns: Wall seconds and CPU seconds of this process.
func directInsert(_ allRecords: [(record: Record, bytes: Data)]) -> (seconds: Double, cpu: Double) {
    let direct = DirectInsert(path: scratch.appendingPathComponent("direct.sqlite").path, upsertingOrders: true)
    let t0 = now()
    let c0 = selfCPU()
    direct.begin()
    for (record, bytes) in allRecords { direct.insert(record, bytes: bytes) }
    direct.commit()
    return (now() - t0, selfCPU() - c0)
}

let (directSeconds, directCPU) = directInsert(allRecords)
let directRate = Double(total) / directSeconds
say(
    String(
        format: "direct: %@ rows in %.2f s (one transaction, sqlite3 C API); CPU %.1f s (%.2f µs/row)", grouped(total),
        directSeconds, directCPU, directCPU / Double(total) * 1e6))

say("")
say("                                    value      target")
say(
    String(
        format: "end to end (records/s)        %11.0f   ≥ 150,000  %@", syncRate,
        syncRate >= 150_000 ? "met" : "NOT met"))
say(String(format: "direct insert floor (rows/s)  %11.0f", directRate))
say(
    String(
        format: "ratio end to end / direct     %11.2f   ≥ 0.5      %@", syncRate / directRate,
        syncRate / directRate >= 0.5 ? "met" : "NOT met"))
say(
    String(
        format: "aggregator peak RSS (MB)      %11.1f   ≤ 256      %@", Double(peakKiB) / 1024,
        peakKiB <= 256 * 1024 ? "met" : "NOT met"))
say("correctness                   \(pass ? "       PASS" : "       FAIL")")
if keep { say("kept: \(scratch.path)") }
if !keep { try? FileManager.default.removeItem(at: scratch) }
exit(pass ? 0 : 1)
