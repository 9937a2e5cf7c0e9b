// Sync benchmark: N devices × M records (orders and bag scans) synced by N `jetbridge-agent sync --until-drained`
// processes to one `jetbridge-aggregator serve` over CURVE; then, in the same run, the same rows inserted into SQLite
// directly in ONE transaction (the floor set by the store). Checks the flight report against the model's totals.
//
// `--store postgres [URL]`: first two `serve --store URL` processes on one PostgreSQL database, every agent given
// both; then the same rows loaded into the same schema with COPY (PostgreSQL's floor); then the SQLite mode above
// with the same records, so the cost of scaling out shows in one run.
//
//   swift build -c release --product jetbridge-aggregator
//   swift build -c release --product jetbridge-agent
//   swift build -c release --product sync-benchmark
//   .build/release/sync-benchmark [--devices 10] [--records 100000] [--batch-records N] [--window N]
//                                 [--tx-batches N] [--tx-records N] [--queue-batches N] [--tx-delay-ms N] [--keep]
//                                 [--debug-log] [--store sqlite|postgres [URL]] [--agent PATH] [--ids time|random]
//
// `--agent PATH`: the devices run that agent binary instead of the one beside the benchmark, such as the packages'
// statically linked build (docs/BENCHMARKS.md, "The agents' wait for acks").
// `--ids random`: the records carry random (version 4) ids instead of time-ordered ones as the agent mints them
// (docs/BENCHMARKS.md, "Time-ordered record ids").

import BenchmarkSupport
import Foundation
import JetbridgeModel

#if canImport(Glibc)
    import Glibc
#endif

let options = Options(Array(CommandLine.arguments.dropFirst()))

let executables = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
let agentExecutable =
    options.agent.map { URL(fileURLWithPath: $0) } ?? executables.appendingPathComponent("jetbridge-agent")
let aggregatorExecutable = executables.appendingPathComponent("jetbridge-aggregator")
if let agent = options.agent, !FileManager.default.isExecutableFile(atPath: agent) {
    exitWithUsage("--agent \(agent): no executable file there", usage: Options.usage)
}
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
say("agent: \(agentExecutable.path)")
say("record ids: \(options.ids == .time ? "time-ordered (version 7)" : "random (version 4)")")

let workload = try Workload(
    deviceCount: options.deviceCount, recordsPerDevice: options.recordsPerDevice, ids: options.ids)
let benchmark = Benchmark(
    options: options, workload: workload, scratch: scratch, agentExecutable: agentExecutable,
    aggregatorExecutable: aggregatorExecutable)
let pass: Bool
switch options.store {
case .sqlite:
    let (figures, directRate, directCPUPerRow) = try benchmark.sqliteMode(
        in: scratch, makingSeconds: workload.makingSeconds)
    let syncRate = figures.rate
    let peakKiB = figures.peakKiB[0]
    pass = figures.pass
    say("")
    say("                                    value      target")
    say(String(format: "end to end (records/s)        %11.0f   ≥ 150,000  %@", syncRate, met(syncRate >= 150_000)))
    say(String(format: "direct insert floor (rows/s)  %11.0f", directRate))
    say(
        String(
            format: "ratio end to end / direct     %11.2f   ≥ 0.5      %@", syncRate / directRate,
            met(syncRate / directRate >= 0.5)))
    say(
        String(
            format: "aggregator peak RSS (MB)      %11.1f   ≤ 256      %@", Double(peakKiB) / 1024,
            met(peakKiB <= 256 * 1024)))
    // The network thread (issue 29): receiving, decoding and checking batches, sending acks; no store call.
    let networkMicroseconds = figures.networkCPU.map { $0 / Double(figures.records) * 1e6 }
    say(
        String(
            format: "network thread (µs/record)    %11.2f   ≤ 4        %@", networkMicroseconds ?? .nan,
            networkMicroseconds.map { met($0 <= 4) } ?? "not measured"))
    // The store thread (issue 29): its CPU per record against the direct floor's CPU per row.
    let storeRatio = figures.storeCPU.map { $0 / Double(figures.records) / directCPUPerRow }
    say(
        String(
            format: "store thread / floor, CPU     %11.2f   ≤ 0.9      %@", storeRatio ?? .nan,
            storeRatio.map { met($0 <= 0.9) } ?? "not measured"))
    // Receipts (issue 29): caught up soon after the last device, next to one rebuild of the same store.
    let caughtUp = figures.receiptsCatchUp
    say(
        String(
            format: "receipts caught up after (s)  %11.1f   ≤ 20       %@", caughtUp ?? .nan,
            caughtUp.map { $0 <= 20 } == true ? "PASS" : "FAIL"))
    say(String(format: "receipts rebuild, same store  %11.1f", figures.receiptsRebuild ?? .nan))
    say("correctness                   \(pass ? "       PASS" : "       FAIL")")
case .postgres(let url):
    pass = try benchmark.postgresMode(url: url)
}
if options.keep { say("kept: \(scratch.path)") }
if !options.keep { try? FileManager.default.removeItem(at: scratch) }
exit(pass ? 0 : 1)
