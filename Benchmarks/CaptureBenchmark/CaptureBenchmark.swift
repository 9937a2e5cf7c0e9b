import FileQueue
import Foundation
import JetbridgeModel
import MessagePack

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
        while let argument = arguments.popFirst() {
            guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
                fatalError("usage: capture-benchmark [--tags N] [--orders N] [--rounds N]")
            }
            switch argument {
            case "--tags": tagCount = value
            case "--orders": orderRuns = value
            case "--rounds": rounds = value
            default:
                fatalError("unknown option \(argument); usage: capture-benchmark [--tags N] [--orders N] [--rounds N]")
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

            // The same work without the process and the disk: parse each line, build and encode a scan.
            let flight = try FlightID("ZA101/2026-11-21")
            let encoder = MessagePackEncoder()
            var payloads: [Data] = []
            payloads.reserveCapacity(tagCount)
            let cpuStart = DispatchTime.now()
            for line in lines {
                let tag = try LuggageTag.parse(qrPayload: line)
                payloads.append(
                    try encoder.encode(
                        Scan(tag: tag, point: .origin, scannedAt: Date(), flight: flight, device: "bench")))
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
    static func run(_ executable: URL, _ arguments: [String], stdin: Data? = nil) throws -> Int32 {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        let pipe = Pipe()
        if stdin != nil { process.standardInput = pipe } else { process.standardInput = FileHandle.nullDevice }
        try process.run()
        if let stdin {
            let writer = pipe.fileHandleForWriting
            let thread = Thread {
                writer.write(stdin)
                try? writer.close()
            }
            thread.start()
        }
        process.waitUntilExit()
        return process.terminationStatus
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
