import BenchmarkSupport
import FileQueue
import Foundation
import JetbridgeModel
import MessagePack

#if canImport(Glibc)
    import Glibc
#endif

/// Measures capture through the release `jetbridge-agent` binary, as a scanner or an attendant uses it:
///
/// 1. `scan --at origin` with 100,000 tag lines on standard input, into a fresh home: scans per second, durable at
///    the end of input (process start to exit). Baselines in the same run: parsing and encoding the same tags in
///    this process (CPU only), and FileQueue group commits of the same records already encoded (disk only).
/// 2. 200 runs of one `order` command: latency from process start to exit (the record is durable at exit).
///
/// `swift build -c release --product jetbridge-agent && swift build -c release --product capture-benchmark &&
/// .build/release/capture-benchmark [--tags N] [--orders N] [--rounds N]`
@main
struct CaptureBenchmark {
    static func main() throws {
        var tagCount = 100_000
        var orderRuns = 200
        var rounds = 3
        var arguments = CommandLine.arguments.dropFirst()
        let usage = "usage: capture-benchmark [--tags N] [--orders N] [--rounds N]"
        while let argument = arguments.popFirst() {
            guard ["--tags", "--orders", "--rounds"].contains(argument) else {
                exitWithUsage("unknown option \(argument)", usage: usage)
            }
            guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
                exitWithUsage("\(argument) takes a positive number", usage: usage)
            }
            switch argument {
            case "--tags": tagCount = value
            case "--orders": orderRuns = value
            case "--rounds": rounds = value
            default: preconditionFailure("every option is listed above")
            }
        }
        let agent = try locateAgent()
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("capture-benchmark-\(UUID())")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        print("agent: \(agent.path)")
        print("scratch: \(scratch.path) (\(ProcessInfo.processInfo.activeProcessorCount) cores)")

        // MARK: 1. Bulk scan
        let lines = (0..<tagCount).map { index in
            let initial = String(UnicodeScalar(UInt8(65 + index % 26)))
            let weight = Double(index % 50_000) / 1000
            return #"{"id": "\#(UUID().uuidString)", "owner": ["\#(initial)", "ZMU"], "weight": \#(weight)}"#
        }
        let input = Data((lines.joined(separator: "\n") + "\n").utf8)
        print("\n1. scan --at origin, \(grouped(tagCount)) tags on standard input (\(grouped(input.count)) bytes)")
        print("   round  agent scans/s   parse+encode/s (CPU)   group commit/s (disk)")
        var agentRates: [Double] = []
        var cpuRates: [Double] = []
        var diskRates: [Double] = []
        for round in 1...rounds {
            // The agent, end to end.
            let home = scratch.appendingPathComponent("scan-\(round)")
            let start = DispatchTime.now()
            let status = try run(agent, ["--home", home.path, "scan", "--at", "origin"], stdin: input)
            let seconds = elapsed(since: start)
            guard status == 0 else { fatalError("jetbridge-agent scan exited \(status)") }
            let stored = try count(queue: home.appendingPathComponent("queue"))
            guard stored == tagCount else { fatalError("expected \(tagCount) records, found \(stored)") }
            agentRates.append(Double(tagCount) / seconds)

            // The same work without the process and the disk: parse each line, build and encode a scan (ids made
            // beforehand: Foundation's UUID() costs three system calls each; the agent draws them in bulk).
            let flight = try FlightID("ZA101/2026-11-21")
            let ids = (0..<tagCount).map { _ in UUID() }
            let encoder = MessagePackEncoder()
            var payloads: [Data] = []
            payloads.reserveCapacity(tagCount)
            let cpuStart = DispatchTime.now()
            for (line, id) in zip(lines, ids) {
                let tag = try LuggageTag.parse(qrPayload: line)
                let scan = Scan(id: id, tag: tag, point: .origin, scannedAt: Date(), flight: flight, device: "bench")
                payloads.append(try encoder.encode(scan))
            }
            cpuRates.append(Double(tagCount) / elapsed(since: cpuStart))

            // The same records, already encoded, through FileQueue group commits of the agent's batch size.
            let queue = try FileQueue(directory: scratch.appendingPathComponent("baseline-\(round)"))
            let diskStart = DispatchTime.now()
            var index = 0
            while index < payloads.count {
                let end = min(index + 4096, payloads.count)
                _ = try queue.append(contentsOf: payloads[index..<end])
                index = end
            }
            diskRates.append(Double(tagCount) / elapsed(since: diskStart))
            print(
                "   \(pad(round, 5))  \(pad(grouped(Int(agentRates.last!)), 13))   \(pad(grouped(Int(cpuRates.last!)), 20))   \(pad(grouped(Int(diskRates.last!)), 21))"
            )
        }
        print(
            "   median \(pad(grouped(Int(median(agentRates))), 13))   \(pad(grouped(Int(median(cpuRates))), 20))   \(pad(grouped(Int(median(diskRates))), 21))"
        )
        print("   (target: ≥ 50,000 scans/s durable at the end of input)")

        // MARK: 2. Single orders
        print("\n2. order --seat 17B --item Peanuts=2 --item Chips, \(orderRuns) runs, one process each")
        let home = scratch.appendingPathComponent("orders")
        var latencies: [Double] = []
        for _ in 0..<orderRuns {
            let start = DispatchTime.now()
            let status = try run(
                agent, ["--home", home.path, "order", "--seat", "17B", "--item", "Peanuts=2", "--item", "Chips"])
            latencies.append(elapsed(since: start) * 1000)
            guard status == 0 else { fatalError("jetbridge-agent order exited \(status)") }
        }
        let stored = try count(queue: home.appendingPathComponent("queue"))
        guard stored == orderRuns else { fatalError("expected \(orderRuns) orders, found \(stored)") }
        latencies.sort()
        func percentile(_ p: Double) -> Double { latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        print(
            String(
                format: "   latency, process start to exit (durable): p50 %.1f ms, p99 %.1f ms (min %.1f, max %.1f)",
                percentile(0.5), percentile(0.99), latencies.first!, latencies.last!))
    }

    /// `jetbridge-agent` in the directory this benchmark runs from (`.build/release/`).
    static func locateAgent() throws -> URL {
        let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let url = (Bundle.main.executableURL?.deletingLastPathComponent() ?? directory).appendingPathComponent(
            "jetbridge-agent")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            fatalError("\(url.path) not found; build it first: swift build -c release --product jetbridge-agent")
        }
        return url
    }

    /// Runs a process with `stdin` fed through a pipe by another thread, output discarded; returns its exit status.
    ///
    /// `posix_spawn` and `waitpid`, not Foundation's `Process`: on Linux its `waitUntilExit` polls a run loop every
    /// 50 ms, which would be most of what an `order` latency measures.
    static func run(_ executable: URL, _ arguments: [String], stdin: Data? = nil) throws -> Int32 {
        var fds: [Int32] = [-1, -1]
        if stdin != nil { guard pipe(&fds) == 0 else { fatalError("pipe: \(errno)") } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if stdin != nil {
            posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
            posix_spawn_file_actions_addclose(&actions, fds[0])
            posix_spawn_file_actions_addclose(&actions, fds[1])
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable.path, &actions, nil, argv, environ)
        guard spawned == 0 else { fatalError("posix_spawn \(executable.path): \(spawned)") }
        if let stdin {
            close(fds[0])
            let writeEnd = fds[1]
            stdin.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        break
                    }
                    offset += written
                }
            }
            close(writeEnd)
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS, which Swift does not import.
        return status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
    }

    static func count(queue: URL) throws -> Int {
        try FileQueue.check(directory: queue).status.records
    }

    static func elapsed(since start: DispatchTime) -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    }

    static func median(_ values: [Double]) -> Double {
        values.sorted()[values.count / 2]
    }

    static func grouped(_ number: Int) -> String {
        let digits = String(number)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return result
    }

    static func pad(_ value: some CustomStringConvertible, _ width: Int) -> String {
        let text = value.description
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
