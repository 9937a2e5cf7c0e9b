import BenchmarkSupport
import Foundation
import NIOCore
import PostgresNIO

#if canImport(Glibc)
    import Glibc
#endif

extension Benchmark {
    /// `--store postgres`: two aggregators on one PostgreSQL database, the COPY floor, then the SQLite mode, all with
    /// the same records, and a table comparing them.
    /// - Parameter given: The server's URL from the command line, if any.
    /// - Returns: Whether both runs were exact and the floor loaded every row.
    func postgresMode(url given: String?) throws -> Bool {
        let environment = ProcessInfo.processInfo.environment["JETBRIDGE_TEST_POSTGRES"].flatMap {
            $0.isEmpty ? nil : $0
        }
        var throwaway: String?
        let url: String
        if let given {
            url = given
        } else if let environment {
            url = environment
        } else {
            let started = startThrowaway()
            url = started.url
            throwaway = started.directory
        }
        let server = PostgresCopy(url: url)
        let postmaster = server.postmaster()
        let source =
            given != nil
            ? "--store" : environment != nil ? "JETBRIDGE_TEST_POSTGRES" : "throwaway cluster \(throwaway!)"
        say(
            "PostgreSQL \(server.setting("server_version")) at \(server.shown) (\(source)): fsync \(server.setting("fsync")), synchronous_commit \(server.setting("synchronous_commit")), shared_buffers \(server.setting("shared_buffers")); postmaster \(postmaster.map { "pid \($0)" } ?? "not on this machine")"
        )
        let database = "syncbench_\(getpid())"
        let copyDatabase = "syncbench_copy_\(getpid())"

        // MARK: Two aggregators, one database

        let directory = scratch.appendingPathComponent("postgres")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        _ = server.createDatabase(database)
        migrate(server.url(database: database), log: directory.appendingPathComponent("setup.log"))
        say("\n--- PostgreSQL store: aggregators a and b sharing database \(database)")
        let figures = try SyncRun(
            options: options, workload: workload, directory: directory,
            store: .postgres(server: server, database: database, postmaster: postmaster), names: ["a", "b"],
            agentExecutable: agentExecutable, aggregatorExecutable: aggregatorExecutable
        ).perform(makingSeconds: workload.makingSeconds)

        // MARK: The COPY floor

        say("\n--- floor: the same rows COPY-loaded into the same schema (database \(copyDatabase))")
        _ = server.createDatabase(copyDatabase)
        migrate(server.url(database: copyDatabase), log: directory.appendingPathComponent("setup.log"))
        let total = workload.total
        let all = workload.all
        let c0 = selfCPU()
        let t0 = now()
        // Formatting the rows is timed, as binding is in the store and in SQLite's floor.
        let rows = PostgresCopyRows(all)
        let formatSeconds = now() - t0
        let (copySeconds, copyServerCPU) = server.load(rows, into: copyDatabase, postmaster: postmaster)
        let copyCPU = selfCPU() - c0
        let floorSeconds = formatSeconds + copySeconds
        let floorRate = Double(total) / floorSeconds
        let connection = server.connect(database: copyDatabase)
        let orderRows = server.value(connection, "SELECT count(*)::text FROM orders").flatMap { Int($0) } ?? -1
        let scanRows = server.value(connection, "SELECT count(*)::text FROM scans").flatMap { Int($0) } ?? -1
        try? connection.close().wait()
        let copyExact = orderRows == rows.orderCount && scanRows == rows.scanCount
        say(
            String(
                format:
                    "copy: %@ rows (%@ orders at their last revision, %@ scans) for %@ records; formatted in %.2f s, COPY and commit %.2f s: %.2f s; this process's CPU %.1f s; PostgreSQL CPU %@%@",
                grouped(rows.orderCount + rows.scanCount), grouped(rows.orderCount), grouped(rows.scanCount),
                grouped(total), formatSeconds, copySeconds, floorSeconds, copyCPU,
                copyServerCPU.map { String(format: "%.1f s (%.2f µs/record)", $0, $0 / Double(total) * 1e6) }
                    ?? "not measured",
                copyExact ? "" : "; FAIL: the tables hold \(orderRows) orders and \(scanRows) scans"))

        // MARK: The SQLite mode, same records

        say("\n--- SQLite store (the default): one aggregator, the same records")
        let sqliteDirectory = scratch.appendingPathComponent("sqlite")
        try FileManager.default.createDirectory(at: sqliteDirectory, withIntermediateDirectories: true)
        let (sqlite, directRate, _) = try sqliteMode(in: sqliteDirectory, makingSeconds: 0)

        if options.keep {
            say("kept: databases \(database) and \(copyDatabase)")
        } else {
            server.dropDatabase(database)
            server.dropDatabase(copyDatabase)
        }
        if let throwaway {
            if options.keep {
                say("kept: the throwaway cluster; stop it with Tests/postgres/stop-throwaway.sh \(throwaway)")
            } else {
                stopThrowaway(throwaway)
            }
        }

        let rate = figures.rate
        let ratio = rate / floorRate
        say("")
        say("                                            value      target")
        say(String(format: "PostgreSQL end to end, 2 aggregators  %11.0f   records/s", rate))
        say(String(format: "COPY floor (records/s)                %11.0f", floorRate))
        say(String(format: "ratio end to end / COPY               %11.2f   ≥ 1.3      %@", ratio, met(ratio >= 1.3)))
        // What the machine allows: the sync's processes (agents, aggregators, PostgreSQL) need their CPU seconds on
        // this many cores at best, whatever the code does.
        if let cpu = figures.serverCPU {
            let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
            let busy = figures.agentsCPU + figures.aggregatorCPU.reduce(0, +) + cpu.sync
            say(
                String(
                    format: "best ratio this machine allows        %11.2f   (%.1f s of CPU in the sync on %.0f cores)",
                    floorSeconds / (busy / cores), busy, cores))
        }
        for (name, peak) in zip(["a", "b"], figures.peakKiB) {
            say(
                String(
                    format: "aggregator %@ peak RSS (MB)           %11.1f   ≤ 256      %@", name, Double(peak) / 1024,
                    met(peak <= 256 * 1024)))
        }
        if let cpu = figures.serverCPU {
            let perRecord = cpu.sync / Double(total) * 1e6
            say(String(format: "PostgreSQL CPU, sync (s)              %11.1f", cpu.sync))
            say(
                String(
                    format: "PostgreSQL CPU per record, sync (µs)  %11.2f   ≤ 10       %@", perRecord,
                    met(perRecord <= 10)))
            say(String(format: "PostgreSQL CPU, to receipts (s)       %11.1f", cpu.caughtUp))
        }
        if let copyServerCPU {
            say(String(format: "PostgreSQL CPU, COPY (s)              %11.1f", copyServerCPU))
            say(String(format: "PostgreSQL CPU per record, COPY (µs)  %11.2f", copyServerCPU / Double(total) * 1e6))
        }
        say(String(format: "SQLite end to end, 1 aggregator       %11.0f   records/s", sqlite.rate))
        say(String(format: "SQLite direct insert floor            %11.0f   rows/s", directRate))
        say(String(format: "ratio PostgreSQL / SQLite end to end  %11.2f", rate / sqlite.rate))
        let pass = figures.pass && sqlite.pass && copyExact
        say(
            "correctness: PostgreSQL \(figures.pass ? "PASS" : "FAIL"), COPY \(copyExact ? "PASS" : "FAIL"), SQLite \(sqlite.pass ? "PASS" : "FAIL")"
        )
        return pass
    }

    /// `store migrate --store URL`: the schema `serve` would create, made before the clock starts.
    private func migrate(_ url: String, log: URL) {
        let home = scratch.appendingPathComponent("migrate")
        try? FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        guard run(aggregatorExecutable, ["--home", home.path, "store", "migrate", "--store", url], log: log) == 0 else {
            fatalError("store migrate failed:\n\(tail(log))")
        }
    }

    /// The package's Tests/postgres directory, found above the executable (.build/<configuration>/) or the current
    /// directory.
    private func scriptDirectory() -> URL {
        var candidates = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath)]
        var directory = agentExecutable.resolvingSymlinksInPath().deletingLastPathComponent()
        while directory.path != "/" {
            candidates.append(directory)
            directory = directory.deletingLastPathComponent()
        }
        for candidate in candidates {
            let scripts = candidate.appendingPathComponent("Tests/postgres")
            if FileManager.default.fileExists(atPath: scripts.appendingPathComponent("start-throwaway.sh").path) {
                return scripts
            }
        }
        fatalError(
            "no server: pass --store postgres URL, set JETBRIDGE_TEST_POSTGRES, or run from the package (Tests/postgres/start-throwaway.sh)"
        )
    }

    /// Starts a throwaway cluster with Tests/postgres/start-throwaway.sh.
    /// - Returns: Its URL and its directory (for stop-throwaway.sh).
    private func startThrowaway() -> (url: String, directory: String) {
        let output = scratch.appendingPathComponent("start-throwaway.log")
        let script = scriptDirectory().appendingPathComponent("start-throwaway.sh")
        let pid = spawn(URL(fileURLWithPath: "/bin/bash"), [script.path], log: output)
        let status = wait(pid)
        let text = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("export ") {
            let assignment = line.dropFirst("export ".count)
            guard let equals = assignment.firstIndex(of: "=") else { continue }
            values[String(assignment[..<equals])] = String(assignment[assignment.index(after: equals)...])
        }
        guard status == 0, let url = values["JETBRIDGE_TEST_POSTGRES"],
            let directory = values["JETBRIDGE_TEST_POSTGRES_DIR"]
        else { fatalError("start-throwaway.sh failed (\(status)):\n\(text)") }
        return (url, directory)
    }

    private func stopThrowaway(_ directory: String) {
        let script = scriptDirectory().appendingPathComponent("stop-throwaway.sh")
        let log = scratch.appendingPathComponent("stop-throwaway.log")
        if wait(spawn(URL(fileURLWithPath: "/bin/bash"), [script.path, directory], log: log)) != 0 {
            say("stop-throwaway.sh \(directory) failed:\n\(tail(log))")
        }
    }
}
