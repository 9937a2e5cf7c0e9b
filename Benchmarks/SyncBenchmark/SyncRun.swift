import BenchmarkSupport
import Foundation
import GRDBSQLite
import JetbridgeModel
import NIOCore
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

/// The store one run's aggregators write to.
enum RunStore {
    /// Each aggregator's own SQLite file under its home (the default).
    case sqlite
    /// One PostgreSQL database shared by every aggregator of the run; `postmaster` when the server is on this machine
    /// (for its CPU).
    case postgres(server: PostgresCopy, database: String, postmaster: pid_t?)
}

/// What one run measured.
struct RunFigures {
    var seconds = 0.0
    var records = 0
    var rate: Double { Double(records) / seconds }
    var aggregatorCPU: [Double] = []
    /// The agents' CPU seconds, all of them together.
    var agentsCPU = 0.0
    var peakKiB: [Int] = []
    /// PostgreSQL's CPU seconds from the first sync start to the last exit, and to the receipts' catching up.
    var serverCPU: (sync: Double, caughtUp: Double)?
    /// Seconds from the last exit until no seat was marked for a receipt rewrite; nil when it did not happen in 600 s.
    var receiptsCatchUp: Double?
    /// The receipts' floor from the same run (SQLite mode): `receipts rebuild` of the synced store into an empty
    /// directory, every receipt rendered and written once, in seconds.
    var receiptsRebuild: Double?
    /// The first aggregator's `jb-network` thread's CPU seconds (whole process life, read when the last sync
    /// exited): the ingress path (receiving, decoding, checking batches; acks out), which issue 29 bounds per record.
    var networkCPU: Double?
    /// The first aggregator's `jb-store` thread's CPU seconds, read with ``networkCPU``: `apply`, which issue 29
    /// bounds against the direct floor's CPU per row.
    var storeCPU: Double?
    var pass = false
}

/// One run of the whole pipeline as deployed: aggregators (one on SQLite; or several sharing a PostgreSQL database)
/// set up with their own homes and keys, every device allowed on each, the devices' queues filled, then every
/// `jetbridge-agent sync --until-drained` started at once and timed to the last exit; then the totals checked.
struct SyncRun {
    let options: Options
    let workload: Workload
    let directory: URL
    let store: RunStore
    /// Aggregator names (`ground` alone for one: the paths of the SQLite mode as they always were).
    let names: [String]
    let agentExecutable: URL
    let aggregatorExecutable: URL

    struct Aggregator {
        let name: String
        let home: URL
        let dataPath: String
        let acksPath: String
        var serverKey = ""
        var data: String { "ipc://" + dataPath }
        var acks: String { "ipc://" + acksPath }
    }

    private var several: Bool { names.count > 1 }

    /// The `--store` arguments of `serve` and `report`.
    private var storeArguments: [String] {
        if case .postgres(let server, let database, _) = store { return ["--store", server.url(database: database)] }
        return []
    }

    /// Runs it, printing as it goes.
    /// - Parameter makingSeconds: Seconds spent making the records, added to the generation figure.
    func perform(makingSeconds: Double) throws -> RunFigures {
        var figures = RunFigures()
        let total = workload.total
        figures.records = total
        let setupLog = directory.appendingPathComponent("setup.log")
        var aggregators = names.map { name in
            Aggregator(
                name: name, home: directory.appendingPathComponent(name),
                dataPath: directory.appendingPathComponent(several ? "data-\(name).ipc" : "data.ipc").path,
                acksPath: directory.appendingPathComponent(several ? "acks-\(name).ipc" : "acks.ipc").path)
        }
        let settings = options.aggregatorSettings
        for index in aggregators.indices {
            let home = aggregators[index].home
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            if !settings.isEmpty {
                try JSONSerialization.data(withJSONObject: settings).write(
                    to: home.appendingPathComponent("aggregator.json"))
            }
            guard run(aggregatorExecutable, ["--home", home.path, "keys", "generate"], log: setupLog) == 0 else {
                fatalError("aggregator keys generate failed:\n\(tail(setupLog))")
            }
            aggregators[index].serverKey = try trimmedText(home.appendingPathComponent("keys/server.pub"))
        }

        let ending =
            several ? "CURVE, ipc endpoints, \(names.count) aggregators on one database" : "CURVE, ipc endpoints"
        say(
            "\n\(options.deviceCount) devices × \(grouped(options.recordsPerDevice)) records = \(grouped(total)) (3/8 orders, 5/8 bag scans), \(ending)"
        )
        var generationSeconds = makingSeconds
        let grounds = aggregators.map { ["data": $0.data, "acks": $0.acks, "serverPublicKey": $0.serverKey] }
        for (index, device) in workload.devices.enumerated() {
            let home = directory.appendingPathComponent(device)
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            var sync: [String: Any] = ["ackTimeoutSeconds": 10]
            if let batchRecords = options.batchRecords { sync["batchRecords"] = batchRecords }
            if let window = options.window { sync["window"] = window }
            // Several aggregators: `ground` is a list (docs/AGENT.md, "Several aggregators").
            let configuration: [String: Any] = [
                "device": device, "flight": workload.flights[index % workload.flights.count].rawValue,
                "ground": several ? grounds as Any : grounds[0] as Any, "sync": sync,
            ]
            try JSONSerialization.data(withJSONObject: configuration).write(
                to: home.appendingPathComponent("agent.json"))
            guard run(agentExecutable, ["--home", home.path, "keys", "generate"], log: setupLog) == 0 else {
                fatalError("agent keys generate failed:\n\(tail(setupLog))")
            }
            let publicKey = try trimmedText(home.appendingPathComponent("keys/device.pub"))
            for aggregator in aggregators {
                guard
                    run(
                        aggregatorExecutable,
                        ["devices", "allow", "--home", aggregator.home.path, "--", device, publicKey],
                        log: setupLog) == 0
                else { fatalError("devices allow failed:\n\(tail(setupLog))") }
            }
            generationSeconds += try workload.fillQueue(device: index, at: home.appendingPathComponent("queue"))
        }
        say(
            String(
                format:
                    "generation: %@ records (%@ bytes of MessagePack) encoded and appended in %.2f s (not timed below)",
                grouped(total), grouped(workload.queueBytes), generationSeconds))

        // MARK: Sync

        // A throughput run is no flood: lift the per-device limits (docs/AGGREGATOR.md, Limits) above what it sends.
        for aggregator in aggregators {
            let file = aggregator.home.appendingPathComponent("devices.json")
            var list = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as! [String: Any]
            list["limits"] = [
                "*": [
                    "recordsPerFlight": 1_000_000_000, "recordsPerSecond": 1_000_000_000,
                    "flightsPerDay": 1_000_000_000, "bytesPerSecond": 1_000_000_000_000,
                ]
            ]
            try JSONSerialization.data(withJSONObject: list).write(to: file)
        }

        let serveLogs = aggregators.map {
            directory.appendingPathComponent(several ? "serve-\($0.name).log" : "serve.log")
        }
        let serves = zip(aggregators, serveLogs).map { aggregator, log in
            spawn(
                aggregatorExecutable,
                ["--home", aggregator.home.path, "serve", "--data", aggregator.data, "--acks", aggregator.acks]
                    + storeArguments + (options.debugLog ? ["--log-level", "debug"] : []),
                log: log)
        }
        let readyDeadline = now() + 30
        for (aggregator, log) in zip(aggregators, serveLogs) {
            while !(FileManager.default.fileExists(atPath: aggregator.dataPath)
                && FileManager.default.fileExists(atPath: aggregator.acksPath))
            {
                guard now() < readyDeadline else { fatalError("serve did not bind in 30 s:\n\(tail(log))") }
                usleep(10_000)
            }
        }
        usleep(200_000)
        let serveCPU0 = serves.map(processCPU)
        let postmaster: pid_t? = if case .postgres(_, _, let pid) = store { pid } else { nil }
        let serverCPU0 = postmaster.map(PostgresCopy.serverCPU)

        let childrenCPU0 = childrenCPU()
        let syncStart = now()
        let syncs = workload.devices.map { device in
            spawn(
                agentExecutable,
                [
                    "--home", directory.appendingPathComponent(device).path, "sync", "--until-drained", "--timeout",
                    "3600",
                ]
                    + (several ? ["--json"] : []),
                log: directory.appendingPathComponent("sync-\(device).log"))
        }
        // VmHWM is the kernel's own peak of the resident set: read before SIGTERM, it covers the whole sync.
        var exits: [Int32] = []
        for pid in syncs { exits.append(wait(pid)) }
        let syncSeconds = now() - syncStart
        figures.seconds = syncSeconds
        let serverCPUSync = postmaster.map(PostgresCopy.serverCPU)
        let agentsCPU = childrenCPU() - childrenCPU0
        let serveCPU = zip(serves, serveCPU0).map { processCPU($0) - $1 }
        figures.aggregatorCPU = serveCPU
        figures.agentsCPU = agentsCPU
        let serveThreadCPU = serves.map(threadTimes)
        figures.networkCPU = serveThreadCPU.first?.first { $0.0 == "jb-network" }?.1
        figures.storeCPU = serveThreadCPU.first?.first { $0.0 == "jb-store" }?.1
        // Receipts may trail the acks (the receipts thread waits for the store to go idle): wait until no seat is
        // marked, then read the threads again, so the whole cost of the receipts shows.
        let catchUpSeconds = waitForReceipts(aggregators[0].home, timeout: 600)
        figures.receiptsCatchUp = catchUpSeconds
        let threadCPUCaughtUp = serves.map(threadTimes)
        if let postmaster, let serverCPU0, let serverCPUSync {
            figures.serverCPU = (
                serverCPUSync - serverCPU0, PostgresCopy.serverCPU(postmaster: postmaster) - serverCPU0
            )
        }
        figures.peakKiB = serves.map { statusField($0, "VmHWM") }
        for serve in serves { kill(serve, SIGTERM) }
        let serveExits = serves.map(wait)
        if !several {
            say(
                String(
                    format:
                        "sync: %@ records in %.2f s from the first sync start to the last exit; aggregator CPU %.1f s (%.2f µs/record)",
                    grouped(total), syncSeconds, serveCPU[0], serveCPU[0] / Double(total) * 1e6))
            say(
                "aggregator CPU by thread (whole process life): "
                    + serveThreadCPU[0].prefix(6).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(
                        separator: ", "))
            say(
                String(format: "receipts caught up %.1f s after the last exit; then: ", catchUpSeconds ?? .nan)
                    + threadCPUCaughtUp[0].prefix(3).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(
                        separator: ", "))
        } else {
            let sum = serveCPU.reduce(0, +)
            say(
                String(
                    format:
                        "sync: %@ records in %.2f s from the first sync start to the last exit; aggregators' CPU %@ (%.2f µs/record together)",
                    grouped(total), syncSeconds,
                    zip(names, serveCPU).map { String(format: "%@ %.1f s", $0, $1) }.joined(separator: ", "),
                    sum / Double(total) * 1e6))
            for (name, threads) in zip(names, serveThreadCPU) {
                say(
                    "aggregator \(name) CPU by thread (whole process life): "
                        + threads.prefix(6).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(separator: ", "))
            }
            say(
                String(format: "receipts caught up %.1f s after the last exit; then: ", catchUpSeconds ?? .nan)
                    + zip(names, threadCPUCaughtUp).map { name, threads in
                        "\(name): "
                            + threads.prefix(3).map { String(format: "%@ %.1f s", $0.0, $0.1) }.joined(separator: ", ")
                    }.joined(separator: "; "))
            if let cpu = figures.serverCPU {
                say(
                    String(
                        format:
                            "PostgreSQL CPU (postmaster and its processes, /proc utime+stime): %.1f s during the sync (%.2f µs/record), %.1f s until the receipts caught up",
                        cpu.sync, cpu.sync / Double(total) * 1e6, cpu.caughtUp))
            } else {
                say("PostgreSQL CPU: not measured (the server is not a process on this machine)")
            }
            if let summaries = agentSummaries() {
                say(
                    "records acknowledged first by each aggregator (agents' --json summaries): "
                        + zip(names, summaries.acknowledged).map { "\($0) \(grouped($1))" }.joined(separator: ", ")
                        + "; batches resent: \(grouped(summaries.resends))")
            }
        }
        say(String(format: "agents' CPU: %.1f s in all (%.2f µs/record)", agentsCPU, agentsCPU / Double(total) * 1e6))
        say(
            "agents' exit codes: \(exits.map(String.init).joined(separator: " ")); serve exit\(several ? "s" : "") after SIGTERM: \(serveExits.map(String.init).joined(separator: " "))"
        )
        for (device, code) in zip(workload.devices, exits) where code != 0 {
            say("--- \(device) exited \(code):\n\(tail(directory.appendingPathComponent("sync-\(device).log")))")
        }

        // MARK: Correctness

        var pass = exits.allSatisfy { $0 == 0 } && serveExits.allSatisfy { $0 == 0 }
        let reportFile = directory.appendingPathComponent("report.json")
        let reportStatus = run(
            aggregatorExecutable,
            ["--home", aggregators[0].home.path, "report", "flights", "--format", "json", "--output", reportFile.path]
                + storeArguments,
            log: setupLog)
        let (expected, orders, scans) = try workload.expected()
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
        // One .txt and one .json per seat with orders, once the receipts caught up; with several aggregators, each
        // writes the seats it claimed into its own home, so the files are counted over all of them.
        let receiptSeats = Set(orders.map { "\($0.flight.rawValue) \($0.seat.rawValue)" }).count
        var receiptNames: Set<String> = []
        for aggregator in aggregators {
            let listed =
                (try? FileManager.default.contentsOfDirectory(
                    atPath: aggregator.home.appendingPathComponent("receipts").path)) ?? []
            receiptNames.formUnion(listed.filter { !$0.hasPrefix(".") })
        }
        if catchUpSeconds == nil || receiptNames.count != 2 * receiptSeats {
            pass = false
            say(
                "receipts: \(receiptNames.count) files for \(receiptSeats) seats with orders (caught up: \(catchUpSeconds != nil))"
            )
        }
        // Exactly once, row by row: one row per order id (its last revision) and one per scan.
        var rowsChecked = ""
        if case .postgres(let server, let database, _) = store {
            let connection = server.connect(database: database)
            let orderRows = server.value(connection, "SELECT count(*)::text FROM orders").flatMap { Int($0) } ?? -1
            let scanRows = server.value(connection, "SELECT count(*)::text FROM scans").flatMap { Int($0) } ?? -1
            try? connection.close().wait()
            let orderIDs = Set(orders.map(\.id)).count
            if orderRows != orderIDs || scanRows != scans.count {
                pass = false
                say(
                    "rows: \(grouped(orderRows)) orders for \(grouped(orderIDs)) order ids, \(grouped(scanRows)) scans for \(grouped(scans.count)) generated"
                )
            }
            rowsChecked = ", one row per order id and per scan"
        }
        if !several, case .sqlite = store {
            // The floor for the receipts: the same store's receipts rendered and written once, by the same binary,
            // into an empty directory (another home, the synced store named by --store).
            let floorHome = directory.appendingPathComponent("receipts-floor")
            try FileManager.default.createDirectory(at: floorHome, withIntermediateDirectories: true)
            let started = now()
            let status = run(
                aggregatorExecutable,
                [
                    "--home", floorHome.path, "receipts", "rebuild", "--store",
                    aggregators[0].home.appendingPathComponent("jetbridge.sqlite").path,
                ],
                log: setupLog)
            if status == 0 {
                figures.receiptsRebuild = now() - started
                say(
                    String(
                        format: "receipts rebuild of the synced store into an empty directory: %.1f s",
                        figures.receiptsRebuild!))
            } else {
                say("receipts rebuild failed (\(status)):\n\(tail(setupLog))")
            }
        }
        let expectedOrders = expected.flights.reduce(0) { $0 + $1.orders }
        let expectedBags = expected.flights.reduce(0) { $0 + $1.bags.checked }
        say(
            "correctness: report flights --format json vs the model's totals of what was generated (\(grouped(expectedOrders)) orders, \(grouped(expectedBags)) bags), 2 receipt files per seat\(rowsChecked): \(pass ? "PASS" : "FAIL")"
        )
        if !pass {
            for log in serveLogs { say("--- \(several ? log.lastPathComponent : "serve log"):\n\(tail(log))") }
        }
        figures.pass = pass
        return figures
    }

    /// Polls the store until no seat is marked for a receipt rewrite: the SQLite file read-only beside the running
    /// serve, or the shared database.
    /// - Returns: Seconds waited, or nil after `timeout` seconds.
    private func waitForReceipts(_ home: URL, timeout: Double) -> Double? {
        switch store {
        case .sqlite:
            return waitForSQLiteReceipts(home.appendingPathComponent("jetbridge.sqlite").path, timeout: timeout)
        case .postgres(let server, let database, _):
            let start = now()
            let connection = server.connect(database: database)
            defer { try? connection.close().wait() }
            while now() - start < timeout {
                if server.value(connection, "SELECT count(*)::text FROM dirty_receipts") == "0" { return now() - start }
                usleep(100_000)
            }
            return nil
        }
    }

    /// Records each aggregator acknowledged first, summed over the agents' `--json` summaries (`aggregators`, in
    /// the configured order), and the batches resent; nil when a summary lacks them.
    private func agentSummaries() -> (acknowledged: [Int], resends: Int)? {
        var sums = [Int](repeating: 0, count: names.count)
        var resends = 0
        for device in workload.devices {
            let log =
                (try? String(contentsOf: directory.appendingPathComponent("sync-\(device).log"), encoding: .utf8)) ?? ""
            guard let line = log.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
                let summary = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                let list = summary["aggregators"] as? [[String: Any]], list.count == names.count
            else { return nil }
            for (index, entry) in list.enumerated() { sums[index] += (entry["acknowledged"] as? Int) ?? 0 }
            resends += (summary["resends"] as? Int) ?? 0
        }
        return (sums, resends)
    }
}

/// Polls the store (read-only, beside the running serve) until no seat is marked for a receipt rewrite.
/// - Returns: Seconds waited, or nil after `timeout` seconds.
func waitForSQLiteReceipts(_ path: String, timeout: Double) -> Double? {
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
