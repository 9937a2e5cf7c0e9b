public import ArgumentParser
import Foundation
public import JetbridgeAggregator
import JetbridgeModel
import Logging

extension ReportKind: ExpressibleByArgument {}
extension ReportFormat: ExpressibleByArgument {}

struct Report: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a report from the store (safe while serve runs).")

    @OptionGroup var global: GlobalOptions

    @Argument(help: "flights, items, luggage or devices.")
    var kind: ReportKind

    @Option(help: "Only this flight, e.g. ZA101/2026-11-21 (not for devices).")
    var flight: String?

    @Option(help: "table, csv, json or html.")
    var format: ReportFormat = .table

    @Option(help: "Write to this file (replaced atomically) instead of standard output.")
    var output: String?

    func validate() throws {
        if let flight, (try? FlightID(flight)) == nil {
            throw ValidationError("'\(flight)' is not a flight id like ZA101/2026-11-21")
        }
    }

    func run() throws {
        let logger = bootstrapLogging(.warning)
        let store = try AggregatorTools.openStore(
            home: global.aggregatorHome, configuration: global.configuration(), logger: logger)
        let text = try AggregatorTools.report(
            kind, flight: try flight.map { try FlightID($0) }, format: format, store: store)
        if let output {
            try AggregatorTools.write(text, to: URL(fileURLWithPath: output))
        } else {
            print(text, terminator: text.hasSuffix("\n") ? "" : "\n")
        }
    }
}

struct Receipts: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage receipt files.", subcommands: [Rebuild.self])

    struct Rebuild: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write every receipt again from the store and remove stale ones.")

        @OptionGroup var global: GlobalOptions

        func run() throws {
            let logger = bootstrapLogging(.warning)
            let configuration = try global.configuration()
            let store = try AggregatorTools.openStore(
                home: global.aggregatorHome, configuration: configuration, logger: logger)
            let summary = try AggregatorTools.rebuildReceipts(
                home: global.aggregatorHome, configuration: configuration, store: store, logger: logger)
            print("receipts rebuilt: \(summary.written) written, \(summary.removed) stale removed")
        }
    }
}
