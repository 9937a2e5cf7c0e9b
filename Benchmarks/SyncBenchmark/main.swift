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

func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
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

/// User plus system CPU seconds of this process.
func selfCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
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

/// SplitMix64, so every run generates the same kind of data.
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
let seats = (1...30).flatMap { row in ["A", "B", "C", "D", "E", "F"].map { try! Seat("\(row)\($0)") } }
let menu = [
    Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300), Item(name: "Popcorn", unitPrice: 400),
]
let families = ["ZMU", "DOE", "LEE", "KIM", "ROY"]
let start = Date(timeIntervalSince1970: 1_795_250_000)

/// One device's records: blocks of 8 — 3 orders (every 50th a correction of an earlier order, revision 2), 3 origin
/// scans of new bags, 2 destination scans (so a third of the bags go missing).
func makeRecords(device: Int, count: Int) -> [Record] {
    var rng = SplitMix(state: UInt64(device) &* 1_000_003)
    let name = devices[device]
    let flight = flights[device % flights.count]
    var records: [Record] = []
    records.reserveCapacity(count)
    var orders: [Order] = []
    var bags: [LuggageTag] = []
    var n = 0
    while records.count < count {
        let slot = n % 8
        let time = start + Double(n)
        switch slot {
        case 0, 1, 2:
            if orders.count % 50 == 49 {
                // Index 42 mod 50: a first revision, never corrected before.
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
                    currency: "USD", createdAt: time, device: name)
                orders.append(order)
                records.append(.order(order))
            }
        case 3, 4, 5:
            // Weights in halves: their sums are exact in binary, whatever the order of addition.
            let tag = LuggageTag(
                id: randomUUID(&rng),
                owner: try! Owner(
                    initial: String(UnicodeScalar(UInt8(65 + rng.next() % 26))),
                    family: families[Int(rng.next() % UInt64(families.count))]),
                weight: Double(rng.next() % 60) / 2 + 5)
            bags.append(tag)
            records.append(
                .scan(
                    Scan(id: randomUUID(&rng), tag: tag, point: .origin, scannedAt: time, flight: flight, device: name))
            )
        default:
            let tag = bags[bags.count - 1 - (slot - 6) * 2]
            records.append(
                .scan(
                    Scan(
                        id: randomUUID(&rng), tag: tag, point: .destination, scannedAt: time + 36_000, flight: flight,
                        device: name)))
        }
        n += 1
    }
    return records
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
let threadCPU = threadTimes(serve)
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
        + threadCPU.prefix(6).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(separator: ", "))
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

func check(_ code: Int32, _ db: OpaquePointer?, _ what: String) {
    guard code == SQLITE_OK || code == SQLITE_DONE || code == SQLITE_ROW else {
        fatalError("\(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}

/// The same rows with the sqlite3 C API into the store's tables and indexes (StoreBenchmark's direct baseline), in ONE
/// transaction, with the store's pragmas: no upserts, statistics or receipt marks. Like the store, it keeps the bytes
/// of orders only (a scan is all columns).
/// - Returns: Wall seconds and CPU seconds of this process.
func directInsert(_ allRecords: [(record: Record, bytes: Data)]) -> (seconds: Double, cpu: Double) {
    var db: OpaquePointer?
    check(sqlite3_open(scratch.appendingPathComponent("direct.sqlite").path, &db), db, "open")
    func exec(_ sql: String) { check(sqlite3_exec(db, sql, nil, nil, nil), db, sql) }
    exec(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 100000"
    )
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
    // Corrections replace the earlier revision, as the store's upsert does.
    check(
        sqlite3_prepare_v2(
            db,
            "INSERT INTO orders VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET revision = excluded.revision, record = excluded.record WHERE excluded.revision > orders.revision",
            -1, &insertOrder, nil), db, "prepare")
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
    let t0 = now()
    let c0 = selfCPU()
    exec("BEGIN IMMEDIATE")
    for (record, bytes) in allRecords {
        switch record {
        case .order(let order):
            bind(insertOrder, 1, order.id)
            sqlite3_bind_int64(insertOrder, 2, Int64(order.revision))
            bind(insertOrder, 3, order.flight.rawValue)
            bind(insertOrder, 4, order.seat.rawValue)
            bind(insertOrder, 5, order.device)
            bind(insertOrder, 6, bytes)
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
    exec("COMMIT")
    let seconds = now() - t0
    let cpu = selfCPU() - c0
    sqlite3_finalize(insertOrder)
    sqlite3_finalize(insertScan)
    sqlite3_close(db)
    return (seconds, cpu)
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
