// Store benchmark: 1,000,000 records (half orders, half scans, 10 devices × 100,000) through
// SQLiteStore.apply in batches of 1,000, 20 batches per transaction; then the same rows inserted with the sqlite3
// C API in ONE transaction (the floor the store is measured against). Only store calls are timed; generating records
// is not. After the apply, every device's summary of every flight (proof of delivery) is answered from the store, and
// its CPU printed as a share of the CPU the apply took.
//
// With `--postgres [URL]` (the URL, else JETBRIDGE_TEST_POSTGRES: a server where the benchmark may create and drop
// databases), the same groups also go through PostgresStore.apply, and the same rows are loaded into the same schema
// with `COPY … FROM STDIN` (postgres-nio's `copyFrom`, text format) in ONE transaction: PostgreSQL's floor. Groups are
// then 40 batches (the aggregator's `transactionMaxRecords` of 40,000) unless the third argument says otherwise.
//
//   swift build -c release --product store-benchmark && .build/release/store-benchmark [records] [directory or -]
//                                                       [batches per transaction, a multiple of 20] [--postgres [URL]]
//                                                       [--ids time|random]
//
// Record ids are time-ordered (version 7) at each record's time, as the agent mints them; `--ids random` gives
// random (version 4) ids, as a client following only the wire format may send.

import BenchmarkSupport
import Foundation
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import PostgresNIO

let storeBenchmarkUsage =
    "usage: store-benchmark [records] [directory or -] [batches per transaction, a multiple of 20] [--postgres [URL]] [--ids time|random]"
var arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) {
    print(storeBenchmarkUsage)
    exit(0)
}
let recordIDs: RecordIDs = {
    guard let flag = arguments.firstIndex(of: "--ids") else { return .time }
    arguments.remove(at: flag)
    guard flag < arguments.count, let scheme = RecordIDs(rawValue: arguments.remove(at: flag)) else {
        exitWithUsage("--ids takes time or random", usage: storeBenchmarkUsage)
    }
    return scheme
}()
var postgresURL: String?
if let flag = arguments.firstIndex(of: "--postgres") {
    arguments.remove(at: flag)
    if flag < arguments.count, arguments[flag].hasPrefix("postgres") {
        postgresURL = arguments.remove(at: flag)
    } else {
        postgresURL = ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"]
    }
    guard postgresURL != nil else {
        exitWithUsage(
            "--postgres needs a URL (postgres://user@host:port/database) or JETBRIDGE_TEST_POSTGRES",
            usage: storeBenchmarkUsage)
    }
}
/// Argument `index` of `arguments` as a positive count, `otherwise` when absent.
func count(_ arguments: [String], _ index: Int, _ name: String, otherwise: Int) -> Int {
    guard index < arguments.count else { return otherwise }
    guard let value = Int(arguments[index]), value > 0 else {
        exitWithUsage("\(name): not a positive number: \(arguments[index])", usage: storeBenchmarkUsage)
    }
    return value
}
let totalRecords = count(arguments, 0, "records", otherwise: 1_000_000)
let batchSize = 1_000
let batchesPerTransaction = 20
/// Batches the store is given per `apply` (one transaction); a multiple of `batchesPerTransaction`.
let storeBatchesPerTransaction = count(
    arguments, 2, "batches per transaction",
    otherwise: postgresURL == nil ? batchesPerTransaction : 2 * batchesPerTransaction)
if storeBatchesPerTransaction % batchesPerTransaction != 0 {
    exitWithUsage("batches per transaction: a multiple of 20, not \(storeBatchesPerTransaction)", usage: storeBenchmarkUsage)
}
let baseDirectory =
    arguments.count > 1 && arguments[1] != "-"
    ? URL(fileURLWithPath: arguments[1]) : FileManager.default.temporaryDirectory
let directory = baseDirectory.appendingPathComponent("store-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: directory) }

let flights = (1...20).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }
let seats = RecordMix.seats
let menu = RecordMix.menu
let owner = try! Owner(initial: "D", family: "ZMU")
let devices = (1...10).map { "cart-\($0)" }
let start = RecordMix.start
print("record ids: \(recordIDs == .time ? "time-ordered (version 7)" : "random (version 4)")")

let encoder = MessagePackEncoder()

/// A batch as the network layer hands it to the store: real MessagePack records framed and checked by
/// `IncomingBatch.decode` (not timed), so the store keeps the bytes it would keep in production.
func checkedBatch(device: String, first: UInt64, records: [Record]) -> IncomingBatch {
    let payloads = records.enumerated().map { (UInt64($0.offset) + first, try! encoder.encode($0.element)) }
    let frames = try! OutgoingBatch(device: device, records: payloads.map { (sequence: $0.0, payload: $0.1) }).frames()
    return try! IncomingBatch.decode(frames: frames, authenticatedDevice: device).get()
}

/// What each device holds acknowledged per flight once everything is stored, as it summarises it (proof of delivery),
/// by "device flight": added up from the batches the SQLite run makes (not timed).
var expected: [String: DeliverySummary] = [:]

@MainActor func expect(_ batches: [IncomingBatch]) {
    for batch in batches {
        for incoming in batch.records {
            expected["\(batch.header.device) \(incoming.record.flight.rawValue)", default: DeliverySummary()].add(incoming.record)
        }
    }
}

/// Every device's summary of every flight answered by `store` (each compared with what the device holds: the
/// `confirmed` path), then every one read from the rows (the path of a mismatch, and of every summary before the
/// digests were kept): the CPU of each (this process's, and `serverCPU`'s: PostgreSQL's backends), and the records
/// summarised.
@MainActor func confirmAll(
    _ store: some StoreReader, serverCPU: () -> Double = { 0 }
) throws -> (kept: Double, rows: Double, records: Int) {
    func cpu() -> Double { selfCPU() + serverCPU() }
    var summarised = 0
    var c0 = cpu()
    for device in devices {
        for flight in flights {
            let mine = expected["\(device) \(flight.rawValue)"] ?? DeliverySummary()
            let held = try store.deliverySummary(device: device, flight: flight.rawValue, expected: mine)
            precondition(held == mine, "\(device) \(flight): the store holds \(held), the device \(mine)")
            summarised += held.count
        }
    }
    let kept = cpu() - c0
    c0 = cpu()
    for device in devices {
        for flight in flights {
            _ = try store.deliverySummary(device: device, flight: flight.rawValue, expected: nil)
        }
    }
    return (kept, cpu() - c0, summarised)
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
                    id: recordIDs.make(at: start + Double(n), &rng), revision: 1, flight: flight,
                    seat: seats[Int(rng.next() % UInt64(seats.count))],
                    lineItems: [LineItem(item: menu[n % 3], count: 2), LineItem(item: menu[(n + 1) % 3], count: 1)],
                    currency: "USD", createdAt: start + Double(n), device: device)
                return .order(order)
            } else {
                let scan = Scan(
                    id: recordIDs.make(at: start + Double(n), &rng),
                    tag: LuggageTag(id: randomUUID(&rng), owner: owner, weight: 42.5),
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

/// `serve`'s default flight limits (docs/AGGREGATOR.md, Limits), checked on every group as `serve` checks them; no
/// device reaches them (20 flights, 5,000 records per device and flight at a million records).
let limits = StoreLimits(default: DeviceFlightLimits(recordsPerFlight: 100_000, flightsPerDay: 500))

let groups = totalRecords / (batchSize * batchesPerTransaction)
let records = groups * batchSize * batchesPerTransaction

// MARK: Store

var storeSeconds = 0.0
var storeCPU = 0.0
var confirmCPU = 0.0
var storeRSS = ""
do {
    let store = try SQLiteStore(
        path: directory.appendingPathComponent("store.sqlite").path, logger: Logger(label: "store-benchmark"))
    var rng = SplitMix(state: 42)
    var new = 0
    var batches: [IncomingBatch] = []
    for group in 0..<groups {
        batches += makeGroup(group, &rng)
        guard batches.count >= storeBatchesPerTransaction || group == groups - 1 else { continue }
        expect(batches)
        let t0 = now()
        let c0 = selfCPU()
        let outcomes = try store.apply(batches, at: Date(), limits: limits)
        storeSeconds += now() - t0
        storeCPU += selfCPU() - c0
        new += outcomes.reduce(0) { $0 + $1.new }
        batches = []
    }
    storeRSS = peakRSS()
    // Proof of delivery: every device asks about every flight it holds records of (docs/PROTOCOL.md); the store's
    // CPU to answer all of them, beside its CPU to store the records, and beside reading them from the rows.
    let s0 = now()
    let confirm = try confirmAll(store)
    let summarised = confirm.records
    confirmCPU = confirm.kept
    print(
        "confirm: \(devices.count * flights.count) summaries (10 devices × 20 flights) over \(summarised) records in "
            + "\(String(format: "%.2f", now() - s0)) s, CPU \(String(format: "%.3f", confirmCPU)) s = "
            + "\(String(format: "%.2f", confirmCPU / storeCPU * 100)) % of the CPU to store them "
            + "(\(String(format: "%.2f", storeCPU)) s); read from the rows: CPU \(String(format: "%.2f", confirm.rows)) s = "
            + "\(String(format: "%.1f", confirm.rows / storeCPU * 100)) %")
    precondition(summarised == records, "the summaries count \(summarised) of \(records) records")
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

// MARK: PostgreSQL

/// One PostgreSQL run's figures: wall seconds, this process's CPU, the server backend's CPU.
struct PostgresFigures {
    var seconds = 0.0
    var cpu = 0.0
    var serverCPU = 0.0
}
var postgresStore: PostgresFigures?
var postgresCopy: PostgresFigures?
if let postgresURL {
    let server = PostgresCopy(url: postgresURL)
    print(
        "postgres: server \(server.setting("server_version")), fsync \(server.setting("fsync")), "
            + "synchronous_commit \(server.setting("synchronous_commit"))")
    let storeDatabase = "store_benchmark_\(getpid())_store"
    let copyDatabase = "store_benchmark_\(getpid())_copy"
    defer {
        server.dropDatabase(storeDatabase)
        server.dropDatabase(copyDatabase)
    }
    do {
        let store = try PostgresStore(
            url: server.createDatabase(storeDatabase), logger: Logger(label: "store-benchmark"))
        let backends = server.backends(of: storeDatabase)
        let server0 = backends.reduce(0) { $0 + PostgresCopy.processCPU($1) }
        var figures = PostgresFigures()
        var rng = SplitMix(state: 42)
        var new = 0
        var batches: [IncomingBatch] = []
        for group in 0..<groups {
            batches += makeGroup(group, &rng)
            guard batches.count >= storeBatchesPerTransaction || group == groups - 1 else { continue }
            let t0 = now()
            let c0 = selfCPU()
            let outcomes = try store.apply(batches, at: Date(), limits: limits)
            figures.seconds += now() - t0
            figures.cpu += selfCPU() - c0
            new += outcomes.reduce(0) { $0 + $1.new }
            batches = []
        }
        figures.serverCPU = backends.reduce(0) { $0 + PostgresCopy.processCPU($1) } - server0
        // Proof of delivery on PostgreSQL: the client's and the server's CPU to answer every summary.
        let confirm = try confirmAll(store) { backends.reduce(0) { $0 + PostgresCopy.processCPU($1) } }
        let storeGround = figures.cpu + figures.serverCPU
        print(
            "postgres confirm: \(devices.count * flights.count) summaries over \(confirm.records) records, client and "
                + "server CPU \(String(format: "%.3f", confirm.kept)) s = "
                + "\(String(format: "%.2f", confirm.kept / storeGround * 100)) % of the CPU to store them "
                + "(\(String(format: "%.2f", storeGround)) s); read from the rows: "
                + "\(String(format: "%.2f", confirm.rows)) s = \(String(format: "%.1f", confirm.rows / storeGround * 100)) %")
        try store.close()
        precondition(new == records, "expected \(records) new records in PostgreSQL, got \(new)")
        print(
            "postgres store: \(records) records in \(String(format: "%.2f", figures.seconds)) s "
                + "(server backend CPU \(String(format: "%.2f", figures.serverCPU)) s)")
        postgresStore = figures
    }
    do {
        // The same schema: the store's own migrations, applied by opening it once.
        let url = server.createDatabase(copyDatabase)
        try PostgresStore(url: url, logger: Logger(label: "store-benchmark")).close()
        let connection = server.connect(database: copyDatabase)
        defer { try? connection.close().wait() }
        let backends = server.backends(of: copyDatabase)
        let server0 = backends.reduce(0) { $0 + PostgresCopy.processCPU($1) }
        var figures = PostgresFigures()
        var rng = SplitMix(state: 42)
        var t0 = now()
        server.run(connection, "BEGIN")
        figures.seconds += now() - t0
        for group in 0..<groups {
            let batches = makeGroup(group, &rng)
            t0 = now()
            let c0 = selfCPU()
            // Formatting the rows is timed, as binding is in the store and in SQLite's floor.
            var rows = PostgresCopyRows(capacity: batchSize * batchesPerTransaction / 2)
            for batch in batches {
                for incoming in batch.records { rows.append(incoming.record, bytes: incoming.bytes) }
            }
            server.copy(rows, over: connection)
            figures.seconds += now() - t0
            figures.cpu += selfCPU() - c0
        }
        t0 = now()
        let c0 = selfCPU()
        server.run(connection, "COMMIT")
        figures.seconds += now() - t0
        figures.cpu += selfCPU() - c0
        figures.serverCPU = backends.reduce(0) { $0 + PostgresCopy.processCPU($1) } - server0
        let count = server.integer(connection, "SELECT (SELECT count(*) FROM orders) + (SELECT count(*) FROM scans)")
        precondition(count == records, "expected \(records) rows copied, got \(count)")
        print(
            "postgres copy:  \(records) records in \(String(format: "%.2f", figures.seconds)) s (one transaction; "
                + "server backend CPU \(String(format: "%.2f", figures.serverCPU)) s)")
        postgresCopy = figures
    }
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
if let postgresStore, let postgresCopy {
    let storeRate = Double(records) / postgresStore.seconds
    let copyRate = Double(records) / postgresCopy.seconds
    print("")
    print("                         records/s   CPU µs/record   server µs/record   ratio to COPY")
    print(
        String(
            format: "postgres (%d batches/tx) %9.0f   %13.2f   %16.2f   %13.2f", storeBatchesPerTransaction, storeRate,
            postgresStore.cpu / Double(records) * 1e6, postgresStore.serverCPU / Double(records) * 1e6,
            storeRate / copyRate))
    print(
        String(
            format: "COPY (one tx)            %9.0f   %13.2f   %16.2f   %13.2f", copyRate,
            postgresCopy.cpu / Double(records) * 1e6, postgresCopy.serverCPU / Double(records) * 1e6, 1.0))
    print(
        String(
            format: "sqlite store (same run)  %9.0f   %13.2f                  –   %13.2f",
            Double(records) / storeSeconds,
            storeCPU / Double(records) * 1e6, Double(records) / storeSeconds / copyRate))
}
