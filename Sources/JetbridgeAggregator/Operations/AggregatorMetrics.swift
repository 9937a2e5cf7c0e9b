import CoreMetrics
import FileQueue
import Foundation
import JetbridgeProtocol
import JetbridgeStore
import Prometheus
import SystemSupport
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The aggregator's Prometheus metrics (docs/AGGREGATOR.md, "Metrics and health"): swift-metrics types made by a
/// `PrometheusMetricsFactory` over a registry of this server's own, so no global bootstrap is needed and two servers in
/// one process (tests) never share counters. The names are a contract for dashboards and alerts.
///
/// Thread-safe: the network thread counts refused batches, the store thread stored and retried ones, the ZAP thread
/// handshakes; gauges and process metrics are sampled when `/metrics` is scraped.
final class AggregatorMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let commit: CoreMetrics.Timer
    private let receiptsRefresh: CoreMetrics.Timer
    private let queueDepth: CoreMetrics.Gauge
    private let acksHeld: CoreMetrics.Gauge
    private let receiptsPending: CoreMetrics.Gauge
    private let ready: CoreMetrics.Gauge
    private let process = ProcessMetrics()
    private let devices = Locked([String: DeviceCounters]())

    /// Per-device counters, made once per device.
    private struct DeviceCounters: @unchecked Sendable {
        var records: [String: CoreMetrics.Counter] = [:]
        var batches: [String: CoreMetrics.Counter] = [:]
        var lastBatch: CoreMetrics.Gauge
    }

    static let commitBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
    ]
    static let refreshBuckets: [Duration] = [
        .milliseconds(10), .milliseconds(50), .milliseconds(100), .milliseconds(500), .seconds(1), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60),
    ]

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = [
            "jetbridge_store_commit_seconds": Self.commitBuckets,
            "jetbridge_receipts_refresh_seconds": Self.refreshBuckets,
        ]
        self.factory = factory
        commit = CoreMetrics.Timer(label: "jetbridge_store_commit_seconds", factory: factory)
        receiptsRefresh = CoreMetrics.Timer(label: "jetbridge_receipts_refresh_seconds", factory: factory)
        queueDepth = CoreMetrics.Gauge(label: "jetbridge_batch_queue_depth", factory: factory)
        acksHeld = CoreMetrics.Gauge(label: "jetbridge_acks_held", factory: factory)
        receiptsPending = CoreMetrics.Gauge(label: "jetbridge_receipts_pending", factory: factory)
        ready = CoreMetrics.Gauge(label: "jetbridge_ready", factory: factory)
        CoreMetrics.Gauge(label: "jetbridge_build_info", dimensions: Self.buildLabels, factory: factory).record(1)
        for result in ZAPHandler.Decision.Result.allCases.map(\.rawValue) + ["failed"] {
            // Present at zero from the start, so a rate() over them works before the first refusal.
            CoreMetrics.Counter(label: "jetbridge_handshakes_total", dimensions: [("result", result)], factory: factory)
                .increment(by: 0)
        }
        for status in ["confirmed", "mismatch"] {
            // Likewise for proof of delivery: a dashboard's rate() of mismatches exists before the first one.
            CoreMetrics.Counter(label: "jetbridge_summaries_total", dimensions: [("status", status)], factory: factory)
                .increment(by: 0)
        }
        CoreMetrics.Counter(label: "jetbridge_announces_total", dimensions: [("status", "recorded")], factory: factory)
            .increment(by: 0)
        process.register(in: factory)
    }

    // MARK: Counting (``AnswerLedger`` counts every answer here)

    /// A batch answered: `status` is the ack status (`stored`, `retry`, `rejected`, `forbidden`, …).
    /// - Parameters:
    ///   - device: The device it is counted against.
    ///   - new: Records that changed the store (`stored` only).
    ///   - duplicates: Records already stored (`stored` only).
    ///   - rejected: Records of a refused batch (its header's count, when the header could be read).
    func batch(device: String, status: String, new: Int = 0, duplicates: Int = 0, rejected: Int = 0) {
        devices.withLock { devices in
            var counters =
                devices[device]
                ?? DeviceCounters(
                    lastBatch: CoreMetrics.Gauge(
                        label: "jetbridge_device_last_batch_timestamp_seconds", dimensions: [("device", device)],
                        factory: factory))
            for (outcome, count) in [("new", new), ("duplicate", duplicates), ("rejected", rejected)] {
                counter(
                    &counters.records, outcome, label: "jetbridge_records_total",
                    dimensions: [("device", device), ("outcome", outcome)]
                ).increment(by: count)
            }
            counter(
                &counters.batches, status, label: "jetbridge_batches_total",
                dimensions: [("device", device), ("status", status)]
            ).increment()
            counters.lastBatch.record(Date().timeIntervalSince1970)
            devices[device] = counters
        }
    }

    /// Makes `device`'s series before its first batch (docs/AGGREGATOR.md, "Metrics and health"): its records and its
    /// `stored` and `limited` batches at zero, and its last-batch gauge at `lastBatch` (its last sync in the store, or when the aggregator
    /// started or the allow list named it), so that an alert on a cart silent since landing fires also for a cart
    /// that never synced since the restart. A device already counted keeps its series as they are.
    func declare(device: String, lastBatch: Date) {
        devices.withLock { devices in
            guard devices[device] == nil else { return }
            var counters = DeviceCounters(
                lastBatch: CoreMetrics.Gauge(
                    label: "jetbridge_device_last_batch_timestamp_seconds", dimensions: [("device", device)],
                    factory: factory))
            for outcome in ["new", "duplicate", "rejected"] {
                counter(
                    &counters.records, outcome, label: "jetbridge_records_total",
                    dimensions: [("device", device), ("outcome", outcome)]
                ).increment(by: 0)
            }
            // `limited` too: the alert on limited batches is an increase(), which a series first seen at 1 never shows.
            for status in ["stored", "limited"] {
                counter(
                    &counters.batches, status, label: "jetbridge_batches_total",
                    dimensions: [("device", device), ("status", status)]
                ).increment(by: 0)
            }
            counters.lastBatch.record(lastBatch.timeIntervalSince1970)
            devices[device] = counters
        }
    }

    /// The counter `cache` holds under `key`, made and kept there on first use.
    private func counter(
        _ cache: inout [String: CoreMetrics.Counter], _ key: String, label: String, dimensions: [(String, String)]
    ) -> CoreMetrics.Counter {
        if let counter = cache[key] { return counter }
        let counter = CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
        cache[key] = counter
        return counter
    }

    /// A summary answered: `status` is the answer's (`confirmed`, `mismatch`, `rejected`, …).
    func summary(status: String) {
        CoreMetrics.Counter(label: "jetbridge_summaries_total", dimensions: [("status", status)], factory: factory)
            .increment()
    }

    /// An announcement answered: `status` is the answer's (`recorded`, `rejected`, …).
    func announce(status: String) {
        CoreMetrics.Counter(label: "jetbridge_announces_total", dimensions: [("status", status)], factory: factory)
            .increment()
    }

    /// A handshake the ZAP handler decided.
    func handshake(result: String) {
        CoreMetrics.Counter(label: "jetbridge_handshakes_total", dimensions: [("result", result)], factory: factory)
            .increment()
    }

    /// One store transaction's commit (`apply`), successful or not.
    func committed(in duration: Duration) {
        commit.recordNanoseconds(duration.nanoseconds)
    }

    /// One receipts refresh.
    func refreshedReceipts(in duration: Duration) { receiptsRefresh.recordNanoseconds(duration.nanoseconds) }

    // MARK: Scraping

    /// The Prometheus text exposition, after sampling the gauges, with a `# HELP` line before every family's
    /// `# TYPE` line.
    /// - Parameters:
    ///   - queueDepth: Batches waiting for the store.
    ///   - acksHeld: Acks waiting for a route.
    ///   - receiptsPending: Seats whose receipts are behind, if the store could say.
    ///   - ready: Whether `/readyz` would answer ready now.
    ///   - fleet: Each recently announced flight's devices by state (`jetbridge_flight_devices`).
    ///   - flightBags: Each recent flight's bags by status (`jetbridge_flight_bags`), as ``FlightBagsReader`` last
    ///     read them.
    func exposition(
        queueDepth depth: Int, acksHeld held: Int, receiptsPending pending: Int?, ready isReady: Bool,
        fleet: [FleetFlightCounts] = [], flightBags: [FlightBagsReader.Line] = []
    ) -> String {
        queueDepth.record(depth)
        acksHeld.record(held)
        if let pending { receiptsPending.record(pending) }
        ready.record(isReady ? 1 : 0)
        process.sample()
        return Self.withHelp(registry.emitToString() + Self.fleetFamily(fleet) + Self.flightBagsFamily(flightBags))
    }

    /// `jetbridge_flight_bags{flight, status}`, written here for the reason of ``fleetFamily(_:)``: a flight that is no
    /// longer recent must leave the exposition. Four series per flight (`checked`, `in-transit`, `arrived`,
    /// `missing`), at most ``FlightBagsReader/maxFlights`` flights.
    static func flightBagsFamily(_ lines: [FlightBagsReader.Line]) -> String {
        var text = "# TYPE jetbridge_flight_bags gauge\n"
        for line in lines {
            let flight = line.flight.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
            let bags = line.bags
            for (status, count) in [
                (BagStatus.checked, bags.checked), (.inTransit, bags.inTransit), (.arrived, bags.arrived),
                (.missing, bags.missing),
            ] {
                text += "jetbridge_flight_bags{flight=\"\(flight)\",status=\"\(status.rawValue)\"} \(count)\n"
            }
        }
        return text
    }

    /// `jetbridge_flight_devices{flight, state}`, written here rather than kept as gauges in the registry: a flight
    /// announced more than ``FleetFlightCounts/window`` ago must leave the exposition, and the registry keeps every
    /// series it ever made. Three series per flight, at most ``FleetFlightCounts/maxFlights`` flights.
    static func fleetFamily(_ fleet: [FleetFlightCounts]) -> String {
        var text = "# TYPE jetbridge_flight_devices gauge\n"
        for counts in fleet {
            // Flight ids are checked (`ZA101/2026-11-21`); escaped anyway, as the format asks.
            let flight = counts.flight.replacingOccurrences(of: "\\", with: "\\\\")
                .replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
            for state in FleetState.allCases {
                text += "jetbridge_flight_devices{flight=\"\(flight)\",state=\"\(state.rawValue)\"} \(counts.count(state))\n"
            }
        }
        return text
    }

    /// `jetbridge_build_info`'s labels: what `--version` prints.
    static let buildLabels = [
        ("version", JetbridgeVersion.release), ("wire_protocol", String(WireProtocol.version)),
        ("queue_format", String(FileQueue.formatVersion)),
    ]

    /// What each family means, as its `# HELP` line says (docs/AGGREGATOR.md, "Metrics and health", has the same
    /// words). swift-prometheus's metrics factory registers every family with an empty help, and its registry stops
    /// the process when one name is registered with two helps, so the lines are added to the text here, from this one
    /// table; a family missing from it is a test failure (`MetricsExpositionTests`).
    static let help: [String: String] = [
        "jetbridge_records_total":
            "Records answered, by device and outcome: new and duplicate in stored acks, rejected in refused batches.",
        "jetbridge_batches_total":
            "Batches answered, by device and ack status (stored, retry, rejected, limited, ...).",
        "jetbridge_device_last_batch_timestamp_seconds":
            "Unix time of the device's last answered batch (its last sync in the store until it sends one).",
        "jetbridge_summaries_total": "Flight summaries (proof of delivery) answered, by answer.",
        "jetbridge_flight_devices":
            "Devices that announced the flight (announced in the last 24 hours), by state: confirmed, sending, silent.",
        "jetbridge_flight_bags":
            "Bags of each flight dated today or yesterday (UTC), by status: checked, in-transit, arrived, missing.",
        "jetbridge_announces_total": "Announcements of the flights a device holds records of, answered, by answer.",
        "jetbridge_handshakes_total": "CURVE handshakes decided by ZAP, by result; failed: before ZAP.",
        "jetbridge_store_commit_seconds": "Time of one store transaction, committed or failed.",
        "jetbridge_batch_queue_depth": "Decoded batches waiting for the store.",
        "jetbridge_acks_held": "Acks waiting for their device's route.",
        "jetbridge_receipts_pending": "Seats whose receipts are behind the store.",
        "jetbridge_receipts_refresh_seconds": "Time of one receipts refresh.",
        "jetbridge_ready":
            "1 when /readyz answers ready (sockets bound, the store answering and committing), 0 otherwise.",
        "jetbridge_build_info": "Always 1; the labels say the release, wire protocol and queue format of this build.",
        "process_resident_memory_bytes": "Resident memory size in bytes.",
        "process_virtual_memory_bytes": "Virtual memory size in bytes.",
        "process_cpu_seconds_total": "Total user and system CPU time spent in seconds.",
        "process_open_fds": "Number of open file descriptors.",
        "process_max_fds": "Maximum number of open file descriptors.",
        "process_start_time_seconds": "Start time of the process since unix epoch in seconds.",
    ]

    /// `text` with `# HELP name …` before each `# TYPE name …` line whose family is in ``help``.
    static func withHelp(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 4_096)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
                let help = help[String(name)]
            {
                out += "# HELP \(name) \(help)\n"
            }
            out += line
            out += "\n"
        }
        // The split gives an empty last piece after the final line feed: one line feed too many.
        if out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }
}

/// The usual process metrics, read from /proc when scraped (swift-metrics has no system metrics of its own any more;
/// they live in swift-system-metrics, which this machine does not have): `process_resident_memory_bytes`,
/// `process_virtual_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`, `process_max_fds`,
/// `process_start_time_seconds`, as the Prometheus client libraries name them.
final class ProcessMetrics: Sendable {
    private struct Metrics: @unchecked Sendable {
        var resident: CoreMetrics.Gauge
        var virtual: CoreMetrics.Gauge
        var cpu: CoreMetrics.FloatingPointCounter
        var openFiles: CoreMetrics.Gauge
        var maxFiles: CoreMetrics.Gauge
        var start: CoreMetrics.Gauge
    }

    private let metrics = Locked<Metrics?>(nil)
    private let cpuSeen = Locked(0.0)

    func register(in factory: PrometheusMetricsFactory) {
        let made = Metrics(
            resident: CoreMetrics.Gauge(label: "process_resident_memory_bytes", factory: factory),
            virtual: CoreMetrics.Gauge(label: "process_virtual_memory_bytes", factory: factory),
            cpu: CoreMetrics.FloatingPointCounter(label: "process_cpu_seconds_total", factory: factory),
            openFiles: CoreMetrics.Gauge(label: "process_open_fds", factory: factory),
            maxFiles: CoreMetrics.Gauge(label: "process_max_fds", factory: factory),
            start: CoreMetrics.Gauge(label: "process_start_time_seconds", factory: factory))
        metrics.withLock { $0 = made }
        if let start = Self.startTime() { made.start.record(start) }
    }

    func sample() {
        guard let metrics = metrics.withLock({ $0 }) else { return }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        if let fields = Self.statFields() {
            // Fields after the command name: state is [0], utime [11], stime [12], vsize [20], rss [21].
            if fields.count > 21 {
                let cpu = ((Double(fields[11]) ?? 0) + (Double(fields[12]) ?? 0)) / ticks
                let delta = cpuSeen.withLock { seen -> Double in
                    defer { seen = max(seen, cpu) }
                    return max(0, cpu - seen)
                }
                if delta > 0 { metrics.cpu.increment(by: delta) }
                metrics.virtual.record(Double(fields[20]) ?? 0)
                metrics.resident.record((Double(fields[21]) ?? 0) * page)
            }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            metrics.openFiles.record(entries.count)
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { metrics.maxFiles.record(Double(limit.rlim_cur)) }
    }

    /// /proc/self/stat after the `(comm)` field, split on spaces.
    private static func statFields() -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// Seconds since the epoch at which this process started: boot time plus its start in clock ticks.
    private static func startTime() -> Double? {
        guard let fields = statFields(), fields.count > 19, let startTicks = Double(fields[19]),
            let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = stat.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
            let boot = Double(line.dropFirst(6))
        else { return nil }
        return boot + startTicks / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
