import ArgumentParser
import JetbridgeAgent
import JetbridgeCLI
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `set-aside`: the records the ground refused (`<home>/rejected/`): list them, send them again, or give up on them.
struct SetAsideCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-aside",
        abstract: "List, resend or discard the records the ground refused (set aside in <home>/rejected/).",
        discussion: """
            A record the ground refused (an item not on its menu, a flight over its limit, …) is set aside in \
            <home>/rejected/ and not delivered: sync exits 65 and status says NOT SAFE TO HAND BACK. Once the \
            cause is fixed on the ground, `set-aside resend` puts the records back in the queue for the next sync; \
            `set-aside discard` gives up on them (moved to <home>/discarded/, kept, never sent).
            """,
        subcommands: [ListSetAsideCommand.self, ResendSetAsideCommand.self, DiscardSetAsideCommand.self])
}

/// `set-aside list`: every set-aside record with the ground's reason.
struct ListSetAsideCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the set-aside records: sequence, kind, id, flight, when, the ground's reason.")

    @OptionGroup var options: AgentOptions

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let service = try options.service()
        let records = try service.setAsideRecords()
        if json {
            try Output.json(records)
            return
        }
        guard !records.isEmpty else {
            print("no records set aside in \(service.configuration.home.rejectedDirectory.path)")
            return
        }
        for record in records {
            guard record.problem == nil, let kind = record.kind, let id = record.id, let flight = record.flight else {
                print("\(record.sequence)  UNREADABLE \(record.file): \(record.problem ?? "incomplete")")
                continue
            }
            let when = record.setAsideAt.map { $0.formatted(.iso8601) } ?? "?"
            print("\(record.sequence)  \(kind) \(id.uuidString) \(flight)  set aside \(when): \(record.reason ?? "")")
        }
        print(Output.count(records.count, "record") + " set aside in \(service.configuration.home.rejectedDirectory.path)")
    }
}

/// The sequences a resend or discard acts on: the ones given, or every one with `--all`.
struct SetAsideSelection: ParsableArguments {
    @Argument(help: ArgumentHelp("Set-aside sequences, as `set-aside list` shows them.", valueName: "sequence"))
    var sequences: [UInt64] = []

    @Flag(help: "Every set-aside record.")
    var all = false

    func validate() throws {
        if all == !sequences.isEmpty {
            throw ValidationError("give the sequences to act on, or --all (not both)")
        }
    }

    func resolve(_ service: CaptureService) throws -> [UInt64] {
        all ? try service.setAsideRecords().map(\.sequence) : sequences
    }
}

/// `set-aside resend`: back into the queue, for the next sync.
struct ResendSetAsideCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resend",
        abstract: "Put set-aside records back in the queue; the next sync sends them again.",
        discussion: """
            Run it once the cause the ground gave is fixed, then run sync. Every file is checked before anything \
            is queued: an unknown sequence or an unreadable file changes nothing (exit 65). A record the ground \
            already holds is counted once (deduplication by id).
            """)

    @OptionGroup var options: AgentOptions
    @OptionGroup var selection: SetAsideSelection

    func run() throws {
        let service = try options.service()
        let resent = try service.resendSetAside(selection.resolve(service))
        for record in resent { print("set-aside \(record.from) queued again as \(record.to)") }
        print("\(Output.count(resent.count, "record")) queued again: run sync to deliver")
    }
}

/// `set-aside discard`: give up on records, keeping their files.
struct DiscardSetAsideCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discard",
        abstract: "Give up on set-aside records: moved to <home>/discarded/, never sent, no longer counted.",
        discussion: """
            For a record that must never reach the ground (a test sale, a duplicate entered by hand). The file \
            keeps the record and the ground's reason. An unknown sequence changes nothing (exit 65). A record \
            still in the queue past its acknowledged position (a sync stopped early) is refused until a sync has \
            skipped it (exit 75: run sync first).
            """)

    @OptionGroup var options: AgentOptions
    @OptionGroup var selection: SetAsideSelection

    func run() throws {
        let service = try options.service()
        let moved = try service.discardSetAside(selection.resolve(service))
        for file in moved { print("discarded \(file.path)") }
        print("\(Output.count(moved.count, "record")) discarded")
    }
}
