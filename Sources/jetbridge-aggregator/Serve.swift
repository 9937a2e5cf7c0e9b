import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeLogging
import JetbridgeAggregator
import JetbridgeProtocol
import Logging
import ServiceLifecycle
import SystemSupport
import UnixSignals
import SystemSupport

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bind the data and ack endpoints and store batches until SIGTERM or SIGINT.",
        discussion: "SIGHUP reloads the allow list (it is also reloaded within a second of changing).")

    @OptionGroup var global: GroundOptions
    @OptionGroup var storeOption: StoreOption

    @Option(
        name: .customLong("data"),
        help: ArgumentHelp("Data endpoint (PULL) to bind, e.g. tcp://0.0.0.0:5560.", valueName: "endpoint"))
    var dataEndpoint: String?

    @Option(
        name: .customLong("acks"),
        help: ArgumentHelp("Ack endpoint (ROUTER) to bind, e.g. tcp://0.0.0.0:5561.", valueName: "endpoint"))
    var acksEndpoint: String?

    @Option(
        name: .customLong("metrics"),
        help: ArgumentHelp(
            "Serve /metrics (Prometheus), /healthz and /readyz over HTTP, e.g. 127.0.0.1:9560 (default: off).",
            valueName: "host:port"))
    var metrics: String?

    @Option(
        name: .customLong("console"),
        help: ArgumentHelp(
            "Serve the operator's console (a read-only web board) over HTTP, e.g. 127.0.0.1:9570, or a port alone "
                + "for loopback (default: off). Operators sign in with the token in <home>/console.token "
                + "(docs/AGGREGATOR.md, \"Console\").",
            valueName: "host:port"))
    var console: String?

    @Flag(help: "Turn CURVE off and take device ids on trust. Development only.")
    var insecure = false

    func validate() throws {
        for (flag, endpoint) in [("--data", dataEndpoint), ("--acks", acksEndpoint)] {
            if let endpoint, let problem = WireProtocol.endpointProblem(endpoint) {
                throw ValidationError("\(flag): \(problem)")
            }
        }
        // A malformed flag value is a usage error (64), as for --data and --acks; in aggregator.json it is 65.
        if let metrics {
            var probe = AggregatorConfiguration()
            probe.metrics = metrics
            do { try probe.validate() } catch let error as AggregatorError {
                throw ValidationError("--metrics: \(error.message.replacingOccurrences(of: "configuration key 'metrics': ", with: ""))")
            }
        }
        if let console {
            var probe = AggregatorConfiguration()
            probe.console = console
            do { try probe.validate() } catch let error as AggregatorError {
                throw ValidationError("--console: \(error.message.replacingOccurrences(of: "configuration key 'console': ", with: ""))")
            }
        }
    }

    func run() async throws {
        var configuration = storeOption.applied(to: try global.configuration())
        if let dataEndpoint { configuration.dataEndpoint = dataEndpoint }
        if let acksEndpoint { configuration.acksEndpoint = acksEndpoint }
        if insecure { configuration.insecure = true }
        if let metrics { configuration.metrics = metrics }
        if let console { configuration.console = console }
        let logger = Logger(label: "jetbridge-aggregator")
        // Before the server sizes anything by it (the metrics endpoint's connection cap): every device costs two
        // sockets, and the soft limit is often 1,024 where the hard one allows far more.
        let openFiles = OpenFilesLimit.raiseToHard()
        logger.debug(
            "open-files limit", metadata: ["before": "\(openFiles.before)", "now": "\(openFiles.after)"])
        if configuration.insecure {
            LogOutput.write(
                "INSECURE MODE: CURVE is off: batches travel unencrypted and any device id in a header is believed; "
                    + "never use this outside development",
                text: """
                    ************************************************************************
                    WARNING: INSECURE MODE. CURVE is OFF: batches travel unencrypted and any
                    device id in a header is believed. Never use this outside development.
                    ************************************************************************
                    """, level: .warning, label: logger.label)
        }
        // The ServiceGroup listens for SIGTERM/SIGINT from before the server is built: a stop that comes while it
        // binds and opens the store (a supervisor may stop `serve` at once) is a graceful one, exit 0.
        let home = global.aggregatorHome
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [
                    .init(
                        service: ServeService(home: home, configuration: configuration, logger: logger),
                        successTerminationBehavior: .gracefullyShutdownGroup)
                ],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// Builds the server (binding its endpoints and opening its store on a thread of its own: both block), then runs
/// it, reloading the allow list on every SIGHUP until it stops.
private struct ServeService: Service {
    let home: AggregatorHome
    let configuration: AggregatorConfiguration
    let logger: Logger

    func run() async throws {
        let (home, configuration, logger) = (home, configuration, logger)
        let server = try await runOnOwnThread("jb-start") {
            try AggregatorServer(home: home, configuration: configuration, logger: logger)
        }
        try await withThrowingDiscardingTaskGroup { tasks in
            tasks.addTask {
                for await _ in await UnixSignalsSequence(trapping: .sighup) { server.requestReload() }
            }
            defer { tasks.cancelAll() }
            try await server.run()
        }
    }
}
