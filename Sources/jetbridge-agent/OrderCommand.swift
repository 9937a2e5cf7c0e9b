import ArgumentParser
import JetbridgeCLI
import SystemSupport
import JetbridgeAgent
import JetbridgeModel

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `order`: record a sale, or a correction of one.
struct OrderCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "order",
        abstract: "Record a sale for one seat; prints the order id and total once the record is durable.",
        usage: """
            jetbridge-agent order --seat 17B --item Peanuts=2 --item Chips
            jetbridge-agent order --amend 0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D --item Peanuts=1
            """,
        discussion: """
            Items are looked up in the flight's menu (ignoring case); a bare name means a count of 1; \
            counts are 0–99 and a count of 0 leaves the item out. The same item given twice is added up. \
            NAME=COUNT splits at the last '=' followed by a number, so names holding '=' work as they are \
            (--item Gin=Tonic=2); a name starting with '-' goes after '=': --item=-Salt or --item=-Salt=2.

            --amend ID records a corrected order: the same id, flight and creation time, the next revision. \
            Give the complete corrected list of items (not a difference). Only the device that took an order \
            can amend it: it keeps each order's latest revision in <home>/orders/.
            """
    )

    @OptionGroup var options: AgentOptions

    @Option(
        help: ArgumentHelp("The passenger's seat: row 1–99 and a letter A–K (no I), such as 17B.", valueName: "seat"))
    var seat: String?

    @Option(
        name: .customLong("item"),
        help: ArgumentHelp("An item, NAME or NAME=COUNT; repeat for more items.", valueName: "name[=count]"))
    var items: [ItemArgument] = []

    @Option(
        help: ArgumentHelp(
            "The flight leg, overriding the configuration, such as ZA101/2026-11-21.", valueName: "flight"))
    var flight: String?

    @Option(help: ArgumentHelp("Correct the order with this id: record its next revision.", valueName: "id"))
    var amend: String?

    @Flag(help: "Print the stored order as JSON.")
    var json = false

    func validate() throws {
        guard !items.isEmpty else {
            throw ValidationError("give at least one --item, such as --item Peanuts=2")
        }
        if amend == nil, seat == nil {
            throw ValidationError("give the passenger's --seat, such as --seat 17B")
        }
        if amend != nil, flight != nil {
            throw ValidationError("--flight cannot be changed by --amend: an amended order keeps its flight")
        }
    }

    func run() throws {
        let service = try options.service()
        let lines = items.map { (name: $0.name, count: $0.count) }
        let order =
            if let amend {
                try service.amendOrder(id: amend, lines: lines, seat: seat)
            } else {
                try service.recordOrder(seat: seat ?? "", lines: lines, flight: flight)
            }
        if json {
            try Output.json(order)
        } else {
            let items = order.lines.map { "\($0.name) ×\($0.count)" }.joined(separator: ", ")
            print(
                "order \(order.id.uuidString) revision \(order.revision): \(order.totalText) \(order.currency) (\(items)), seat \(order.seat), flight \(order.flight)"
            )
        }
    }
}

/// `--item NAME` or `--item NAME=COUNT`; the count's range and the name are checked against the menu later.
///
/// The text is split at its LAST `=`, and only when what follows is a whole number: so a menu name that holds `=`
/// (`Gin=Tonic`, `A=B=2` for two of `A=B`) needs no quoting, and a name that itself ends in `=` and a number is
/// ordered by giving its count (`--item 'Cola=2=1'`).
struct ItemArgument: ExpressibleByArgument {
    var name: String
    var count: Int

    init?(argument: String) {
        var name = argument
        var count = 1
        if let equals = argument.lastIndex(of: "="),
            let number = Int(argument[argument.index(after: equals)...].trimmingWhitespace())
        {
            name = String(argument[..<equals])
            count = number
        }
        name = name.trimmingWhitespace()
        guard !name.isEmpty else { return nil }
        self.name = name
        self.count = count
    }
}
