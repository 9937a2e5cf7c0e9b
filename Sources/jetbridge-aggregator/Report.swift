public import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeLogging
public import JetbridgeAggregator
import JetbridgeModel
import Logging
import JetbridgeStore
import SystemSupport

extension ReportKind: ExpressibleByArgument {}
extension ReportFormat: ExpressibleByArgument {}
extension BagStatus: ExpressibleByArgument {}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a report from the store (safe while serve runs).",
        usage: """
            jetbridge-aggregator report flights|items|luggage|devices [--flight <flight>] [--status <status> ...] \
            [--format <format>] [--output <file>] [--store <url>]
            """,
        discussion: """
            Examples:
              jetbridge-aggregator report flights
              jetbridge-aggregator report items --format csv --output items.csv
              jetbridge-aggregator report luggage --status missing --format html
              jetbridge-aggregator report devices --flight ZA101/2026-11-21

            A flight whose stored orders cannot be totalled (two currencies, a total that overflows) is printed as \
            one row with its error; the other flights print. The HTML luggage page lists the first 1,000 bags \
            (missing first) and counts the rest, naming the console when `console` is configured; CSV and JSON \
            list every bag. --store reads another store, such as the PostgreSQL \
            database several aggregators share (from any host). Exit codes: 0 done, 64 usage, 69 no store yet or \
            PostgreSQL unreachable, \
            73 --output into a directory that does not exist or onto a symbolic link (or a link at the SQLite \
            store), 65 a stored row this version cannot read (a value no record could hold: the store was \
            written by hand or damaged), 75 the store is busy, 1 other failures.
            """)

    @OptionGroup var global: GroundOptions
    @OptionGroup var storeOption: StoreOption

    @Argument(help: "flights, items, luggage or devices.")
    var kind: ReportKind

    @Option(
        help: ArgumentHelp(
            "Only this flight, e.g. ZA101/2026-11-21; for devices: the devices that announced it or stored records of it, and whether each is confirmed, sending or silent.",
            valueName: "flight"))
    var flight: String?

    @Option(
        help: ArgumentHelp(
            "Luggage only: only bags with this status (missing, in-transit, checked or arrived); repeatable.",
            valueName: "status"))
    var status: [BagStatus] = []

    @Option(help: ArgumentHelp("table, csv, json or html.", valueName: "format"))
    var format: ReportFormat = .table

    @Option(
        help: ArgumentHelp(
            "Write to this file (replaced atomically) instead of standard output; its directory must exist.",
            valueName: "file"))
    var output: String?

    func validate() throws {
        // A flight typed by a person is read as the agent reads one: any case, surrounding spaces ignored.
        if let flight, (try? FlightID(parsing: flight)) == nil {
            throw ValidationError("'\(flight)' is not a flight id like ZA101/2026-11-21")
        }
        if !status.isEmpty, kind != .luggage {
            throw ValidationError("--status applies to `report luggage` only")
        }
    }

    func run() throws {
        let logger = Logger(label: AggregatorTool.name)
        let configuration = storeOption.applied(to: try global.configuration())
        let store = try AggregatorTools.openStore(
            home: global.aggregatorHome, configuration: configuration, logger: logger)
        defer { try? store.close() }
        if let line = AggregatorTools.servedBy(store) { LogOutput.write(line, level: .notice, label: logger.label) }
        let text = try AggregatorTools.report(
            kind, flight: try flight.map { try FlightID(parsing: $0) }, status: Set(status), format: format, store: store,
            console: configuration.console)
        if let output {
            try AggregatorTools.write(text, to: URL(fileURLWithPath: output))
        } else {
            // Unicode scalars, not Characters: CSV ends in CR LF, which Swift counts as one Character, so
            // `hasSuffix("\n")` is false for it and a blank line would follow (an empty record in RFC 4180).
            print(text, terminator: text.unicodeScalars.last == "\n" ? "" : "\n")
        }
    }
}

struct Receipts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage receipt files.", subcommands: [Rebuild.self])

    struct Rebuild: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every receipt again from the store and remove stale ones.",
            discussion: """
                Only files whose bytes changed are written; the summary says how many receipts were rewritten and \
                how many were already current. A seat whose stored orders cannot be totalled gets no receipt: it is \
                named on standard error with the reason, the others are written, and the exit code is 65.

                With a PostgreSQL store (--store postgres://…) the receipts are written into this host's receipts \
                directory (the `receipts` setting), from the shared database: any host can rebuild every receipt.

                Exit codes: 0 done, 65 some seats have no receipt (listed), 69 no store yet or PostgreSQL \
                unreachable, 75 the store is busy, 1 other failures.
                """)

        @OptionGroup var global: GroundOptions
        @OptionGroup var storeOption: StoreOption

        func run() throws {
            let logger = Logger(label: AggregatorTool.name)
            let configuration = storeOption.applied(to: try global.configuration())
            let store = try AggregatorTools.openStore(
                home: global.aggregatorHome, configuration: configuration, logger: logger)
            defer { try? store.close() }
            if let line = AggregatorTools.servedBy(store) { LogOutput.write(line, level: .notice, label: logger.label) }
            let summary = try AggregatorTools.rebuildReceipts(
                home: global.aggregatorHome, configuration: configuration, store: store, logger: logger)
            print(Self.describe(summary))
            guard summary.failed.isEmpty else {
                for failure in summary.failed {
                    LogOutput.write(
                        "no receipt for \(failure.flight) seat \(failure.seat): \(failure.reason)", level: .error,
                        label: logger.label)
                }
                throw AggregatorError(
                    .dataError,
                    "\(count(summary.failed.count, "seat")) with orders \(summary.failed.count == 1 ? "has" : "have") no receipt (listed above); the other receipts are written")
            }
        }

        /// `receipts rebuilt: 12 receipts, 0 rewritten, 12 already current; 0 stale files removed`.
        static func describe(_ summary: ReceiptWriter.RebuildSummary) -> String {
            "receipts rebuilt: \(count(summary.receipts, "receipt")), \(summary.written) rewritten, "
                + "\(summary.current) already current; \(count(summary.removed, "stale file")) removed"
        }
    }
}

/// `1 seat`, `2 seats`.
func count(_ number: Int, _ singular: String) -> String {
    "\(number) \(number == 1 ? singular : singular + "s")"
}
