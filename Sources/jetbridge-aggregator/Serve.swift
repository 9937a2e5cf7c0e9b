import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeLogging
import JetbridgeAggregator
import JetbridgeProtocol
import Logging
import ServiceLifecycle
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
    }

    func run() async throws {
        var configuration = storeOption.applied(to: try global.configuration())
        if let dataEndpoint { configuration.dataEndpoint = dataEndpoint }
        if let acksEndpoint { configuration.acksEndpoint = acksEndpoint }
        if insecure { configuration.insecure = true }
        if let metrics { configuration.metrics = metrics }
        let logger = Logger(label: "jetbridge-aggregator")
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
        // SIGTERM/SIGINT stop the server gracefully from before it starts: the ServiceGroup listens for them only
        // once it runs, after the start-up line a supervisor (or a test) may answer with a stop at once; with the
        // default action that stop would kill the process instead.
        let early = EarlyStop()
        let stopSources = [SIGTERM, SIGINT].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number)
            source.setEventHandler { early.request() }
            source.resume()
            return source
        }
        defer { for source in stopSources { source.cancel() } }
        let server = try AggregatorServer(
            home: global.aggregatorHome, configuration: configuration, logger: logger)
        early.attach(server)
        signal(SIGHUP, SIG_IGN)
        let reload = DispatchSource.makeSignalSource(signal: SIGHUP)
        reload.setEventHandler { server.requestReload() }
        reload.resume()
        defer { reload.cancel() }
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                // A server stopped by an early signal returns from run() by itself: that is a clean end.
                services: [.init(service: server, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

/// A stop signal that may come before the server exists: remembered, and passed on once it does.
private final class EarlyStop: @unchecked Sendable {
    private let lock = NSLock()
    private var requested = false
    private var server: AggregatorServer?

    func request() {
        let server = lock.withLock {
            requested = true
            return self.server
        }
        server?.stop()
    }

    func attach(_ server: AggregatorServer) {
        let stopNow = lock.withLock {
            self.server = server
            return requested
        }
        if stopNow { server.stop() }
    }
}
