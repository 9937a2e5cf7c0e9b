// The benchmark's flags (docs/BENCHMARKS.md, "sync-benchmark").

import BenchmarkSupport

/// Which store the aggregators write to.
enum StoreChoice: Equatable {
    /// One aggregator on its SQLite file (the default mode).
    case sqlite
    /// Two aggregators on one PostgreSQL database, then the same records through the SQLite mode, in one run. The
    /// server is the URL's, else `JETBRIDGE_TEST_POSTGRES`'s, else a throwaway cluster started for the run.
    case postgres(url: String?)
}

struct Options {
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
    var store = StoreChoice.sqlite
    /// The agent binary the devices run, instead of the `jetbridge-agent` beside the benchmark: such as the packages'
    /// statically linked one (`deploy/package.sh`), which starts on about half the CPU of the dynamically linked
    /// release build.
    var agent: String?
    /// How the devices' records get their ids: time-ordered, as the agent mints them, or random.
    var ids = RecordIDs.time

    static let usage =
        "usage: sync-benchmark [--devices N] [--records N] [--batch-records N] [--window N] [--tx-batches N] [--tx-records N] [--queue-batches N] [--tx-delay-ms N] [--keep] [--debug-log] [--store sqlite|postgres [URL]] [--agent PATH] [--ids time|random]"

    /// Parses the arguments after the program's name; a bad one stops the benchmark with the usage.
    init(_ arguments: [String]) {
        var arguments = arguments[...]
        while let argument = arguments.popFirst() {
            if argument == "--keep" {
                keep = true
                continue
            }
            if argument == "--debug-log" {
                debugLog = true
                continue
            }
            if argument == "--agent" {
                guard let path = arguments.popFirst(), !path.hasPrefix("--") else {
                    exitWithUsage("--agent takes the path of a jetbridge-agent binary", usage: Self.usage)
                }
                agent = path
                continue
            }
            if argument == "--ids" {
                guard let scheme = arguments.popFirst().flatMap(RecordIDs.init(rawValue:)) else {
                    exitWithUsage("--ids takes time or random", usage: Self.usage)
                }
                ids = scheme
                continue
            }
            if argument == "--store" {
                switch arguments.popFirst() {
                case "sqlite": store = .sqlite
                case "postgres":
                    let url = arguments.first.flatMap { $0.hasPrefix("postgres") ? $0 : nil }
                    if url != nil { arguments.removeFirst() }
                    store = .postgres(url: url)
                default: exitWithUsage("--store takes sqlite or postgres [URL]", usage: Self.usage)
                }
                continue
            }
            let numeric = [
                "--devices", "--records", "--batch-records", "--window", "--tx-batches", "--tx-records",
                "--queue-batches", "--tx-delay-ms",
            ]
            guard numeric.contains(argument) else { exitWithUsage("unknown option \(argument)", usage: Self.usage) }
            guard let value = arguments.popFirst().flatMap(Int.init), value > 0 else {
                exitWithUsage("\(argument) takes a positive number", usage: Self.usage)
            }
            switch argument {
            case "--devices": deviceCount = value
            case "--records": recordsPerDevice = value
            case "--batch-records": batchRecords = value
            case "--window": window = value
            case "--tx-batches": transactionBatches = value
            case "--tx-records": transactionRecords = value
            case "--queue-batches": queueBatches = value
            case "--tx-delay-ms": transactionDelay = value
            default: preconditionFailure("every numeric option is listed above")
            }
        }
    }

    /// The aggregator settings the flags set, for `aggregator.json`.
    var aggregatorSettings: [String: Int] {
        var settings: [String: Int] = [:]
        if let transactionBatches { settings["transactionMaxBatches"] = transactionBatches }
        if let transactionRecords { settings["transactionMaxRecords"] = transactionRecords }
        if let queueBatches { settings["queueMaxBatches"] = queueBatches }
        if let transactionDelay { settings["transactionDelayMilliseconds"] = transactionDelay }
        return settings
    }
}
