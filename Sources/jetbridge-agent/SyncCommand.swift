import ArgumentParser
import JetbridgeCLI
import JetbridgeModel
import JetbridgeLogging
import SystemSupport
import JetbridgeAgent
import JetbridgeProtocol
import Logging
import ServiceLifecycle
import UnixSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `sync`: sends the queue to the ground and advances it over what the ground acknowledged.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send queued records to the ground; the queue advances only over what the ground acknowledged.",
        discussion: """
            Runs until SIGTERM/SIGINT, or with --until-drained until everything queued is acknowledged. On a \
            terminal it draws a progress bar on standard error; otherwise it logs a line every few seconds. The \
            last line on standard output sums up the run.

            Several aggregators (sharing one store): repeat --to, --acks and --server-key, one of each per \
            aggregator in the same order; the i-th of each overrides the i-th aggregator of `ground` in the \
            configuration, and those past its list add aggregators. Batches are spread over the aggregators that \
            are up; one not acknowledged in time goes to the next.

            Proof of delivery: once everything is acknowledged, sync asks the ground to confirm each flight it \
            holds records of, and sends a flight again when the ground no longer holds all of it (docs/AGENT.md).

            Exit codes: 0 done (drained and every flight confirmed, or stopped with nothing left), 64 usage, \
            65 the ground refused this device (forbidden), a batch kept coming back malformed, or the ground \
            refused records of this run (set aside in rejected/, not delivered), 66 no key pair (run `keys \
            generate`) or no home at --home, 69 the ground speaks another protocol version, 75 stopped or \
            timed out with records unacknowledged, drained with a flight the ground did not confirm, or \
            another sync runs on this home.
            """)

    @OptionGroup var options: AgentOptions

    @Option(
        name: .customLong("to"),
        help: ArgumentHelp(
            "The aggregator's data (PULL) endpoint (default: ground.data); repeat for several aggregators.",
            valueName: "endpoint"))
    var dataEndpoints: [String] = []

    @Option(
        name: .customLong("acks"),
        help: ArgumentHelp(
            "The aggregator's ack (ROUTER) endpoint (default: ground.acks); once per --to, in the same order.",
            valueName: "endpoint"))
    var ackEndpoints: [String] = []

    @Option(
        name: .customLong("server-key"),
        help: ArgumentHelp(
            "The aggregator's CURVE public key, 40 characters of Z85 (default: ground.serverPublicKey); once per --to.",
            valueName: "key"))
    var serverKeys: [String] = []

    @Flag(help: "Exit 0 once everything queued is acknowledged and every flight confirmed (75 if stopped first).")
    var untilDrained = false

    // Unconditional, so that `--timeout -1` reaches `validate()` and is refused with a reason, rather than read as
    // an option `-1` and reported as a missing value.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Give up after this many seconds; exit 75 if records remain.", valueName: "seconds"))
    var timeout: Double?

    @Flag(help: "Send without encryption or authentication. For development only.")
    var insecure = false

    @Flag(
        help:
            "End with one JSON object (outcome, counts, duration, rate) on standard output instead of the summary line."
    )
    var json = false

    func validate() throws {
        for (flag, endpoints) in [("--to", dataEndpoints), ("--acks", ackEndpoints)] {
            for endpoint in endpoints {
                if let problem = WireProtocol.endpointProblem(endpoint) {
                    throw ValidationError("\(flag): \(problem)")
                }
            }
        }
        if let timeout, !(timeout.isFinite && timeout > 0) {
            throw ValidationError(
                "--timeout must be a positive number of seconds, not \(NumberText.brief(timeout)); leave it out to sync until stopped"
            )
        }
    }

    func run() async throws {
        let configuration = try options.resolve()
        let logger = Logger(label: "jetbridge-agent.sync")
        let grounds = try configuration.aggregators(to: dataEndpoints, acks: ackEndpoints, serverKeys: serverKeys)
        var aggregators = grounds.map { SyncOptions.Aggregator(dataEndpoint: $0.data, ackEndpoint: $0.acks) }
        let security: SyncOptions.Security
        if insecure {
            LogOutput.write(
                "--insecure: records go to the ground unencrypted and unauthenticated: anyone on the network can "
                    + "read them, and the ground cannot tell who sent them; use this for development only",
                text: """
                    WARNING: --insecure: records go to the ground UNENCRYPTED and UNAUTHENTICATED.
                    WARNING: anyone on the network can read them, and the ground cannot tell who sent them.
                    WARNING: use this for development only.
                    """, level: .warning, label: logger.label)
            security = .insecure
        } else {
            let keys = try DeviceKeys.load(from: configuration.home)
            for (index, ground) in grounds.enumerated() {
                let several = grounds.count > 1
                let key = several ? "ground[\(index)].serverPublicKey" : "ground.serverPublicKey"
                guard let text = ground.serverPublicKey else {
                    throw AgentError(
                        .usage,
                        several
                            ? "aggregator \(index + 1) (\(ground.data)) has no public key; set \(key) in the configuration or pass --server-key once per aggregator (or --insecure for development)"
                            : "the ground's public key is not configured; set ground.serverPublicKey in the configuration or pass --server-key (or --insecure for development)"
                    )
                }
                let source = index < serverKeys.count ? "--server-key" : key
                aggregators[index].serverPublicKey = try DeviceKeys.serverKey(text, source: source)
            }
            security = .curve(keys, serverPublicKey: aggregators[0].serverPublicKey!)
        }
        let options = SyncOptions(
            aggregators: aggregators, security: security, untilDrained: untilDrained, timeout: timeout)
        // With --log-format json, plain progress lines, each a JSON object like every other line on standard error;
        // no bar, which is no JSON.
        let jsonLogs = LogOutput.format == .json
        var progressLine: (@Sendable (String) -> Void)?
        if jsonLogs {
            progressLine = { line in
                LogOutput.write(String(line.dropLast()), level: Logger.Level.info, label: "jetbridge-agent.sync")
            }
        }
        let reporter = ProgressReporter(terminal: isatty(2) != 0 && !jsonLogs, write: progressLine)
        // The ServiceGroup lives here, in @main, as service-lifecycle intends: it turns SIGTERM and SIGINT into a
        // graceful stop (no more sends, a short wait for acks, the queue acknowledged over what was confirmed).
        let service = SyncService(
            configuration: configuration, options: options, logger: logger, progress: { reporter.report($0) })
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
        guard let outcome = service.outcome else {
            throw AgentError(.failure, "sync ended without a result")
        }
        reporter.finish()
        if json {
            let encoder = JSONEncoder()
            // Sorted: Foundation on Linux writes a Codable struct's keys in no fixed order, and scripts diff output.
            encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
            print(String(decoding: try encoder.encode(outcome.summaryObject), as: UTF8.self))
        } else {
            print(outcome.summary)
        }
        switch outcome.ending {
        case .failed(let error):
            throw error
        case .drained, .stopped, .timedOut:
            if outcome.statistics.setAside > 0 && outcome.exitCode == AgentError.Code.dataError.exitCode {
                throw AgentError(
                    .dataError,
                    "the ground refused \(outcome.statistics.setAside) record\(outcome.statistics.setAside == 1 ? "" : "s") in this sync: set aside in \(configuration.home.rejectedDirectory.path), not delivered; `\(configuration.home.command("set-aside list"))` lists them with the ground's reason, `set-aside resend` queues them again once the cause is fixed"
                )
            }
            if outcome.isDrained || outcome.remaining == 0, !outcome.unconfirmed.isEmpty,
                outcome.exitCode == AgentError.Code.tryAgain.exitCode
            {
                throw AgentError(
                    .tryAgain,
                    "sync \(outcome.result), but the ground has not confirmed \(outcome.unconfirmed.keys.sorted().joined(separator: ", ")): run `\(configuration.home.command("sync"))` again (`\(configuration.home.command("status"))` shows what is missing)"
                )
            }
            if outcome.isDrained { return }
            if outcome.exitCode != 0 {
                throw AgentError(
                    .tryAgain,
                    "sync \(outcome.result)\(outcome.problem.map { "; \($0)" } ?? ""); the records stay queued: run `\(configuration.home.command("sync"))` again"
                )
            }
        }
    }
}
