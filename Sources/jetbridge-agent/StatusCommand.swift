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

/// `status`: what this device holds and how sync last went.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the device, its flight, queued and unacknowledged records, quarantined damage, last sync.",
        discussion: "Reads the queue without changing it; safe to run while capture and sync run.")

    @OptionGroup var options: AgentOptions

    @Flag(help: "Print JSON.")
    var json = false

    func run() throws {
        let status = try options.service().status()
        if json {
            try Output.json(status)
            return
        }
        let sequences = status.firstSequence.map { " (sequences \($0)…\(status.lastSequence ?? $0))" } ?? ""
        var lastSync =
            status.lastSyncAt.map {
                $0.formatted(.iso8601) + (status.lastSyncResult.map { ", \($0)" } ?? "")
            } ?? "never"
        // A running sync holds the home's sync lock for its whole run and rewrites the state every 10 s: a state that
        // still says running with no holder is a sync that ended without finishing; one not heard of for much longer
        // while the lock is held, a sync that may be stuck.
        if let at = status.lastSyncAt, status.lastSyncResult?.hasPrefix("running") == true {
            let silent = Int(-at.timeIntervalSinceNow)
            if status.syncPID == nil {
                lastSync += " (no sync runs now: that one stopped without finishing)"
            } else if silent > 60 {
                lastSync += " (not updated for \(silent) s while it runs: that sync may be stuck)"
            }
        }
        if let pid = status.syncPID { lastSync += pid > 0 ? " (sync pid \(pid) running)" : " (a sync is running)" }
        let lastRun =
            status.lastSyncOutcome.map { outcome in
                "\nlast finished   \(outcome), \(NumberText.oneDecimal(status.lastSyncDurationSeconds ?? 0)) s, "
                    + "\(NumberText.grouped(status.lastSyncAcknowledged ?? 0)) acknowledged, "
                    + "\(NumberText.grouped(Int((status.lastSyncRecordsPerSecond ?? 0).rounded()))) records/s"
            } ?? ""
        print(
            """
            device          \(status.device)
            flight          \(status.flight)
            configuration   \(status.configuration ?? "built-in defaults")
            inventory       \(status.inventory)
            queue           \(status.queue)
            queued          \(Output.count(status.records, "record"))\(sequences)
            unacknowledged  \(NumberText.grouped(status.unacknowledged))
            acknowledged    through \(status.acknowledgedThrough)
            quarantined     \(NumberText.grouped(status.quarantined))\(status.unrepaired > 0 ? " (\(status.unrepaired) damaged, repaired on next open)" : "")
            segments        \(NumberText.grouped(status.segments)) (\(Output.count(Int(status.bytes), "byte")))
            set aside       \(Output.count(status.rejected, "record")) in \(status.rejectedDirectory)
            last sync       \(lastSync)\(lastRun)
            """)
        // Per flight: what the ground holds of this device's records (docs/AGENT.md, "Proof of delivery").
        for flight in status.flights {
            let confirmed =
                flight.confirmed
                ? "confirmed \(flight.confirmedAt.map { $0.formatted(.iso8601) } ?? "")" : "NOT confirmed"
            print(
                "flight \(flight.flight)  captured \(NumberText.grouped(flight.captured)), acknowledged "
                    + "\(NumberText.grouped(flight.acknowledged)), \(confirmed), set aside \(NumberText.grouped(flight.setAside))"
                    + (flight.verdict == "delivered and confirmed" ? "" : ": \(flight.verdict)"))
        }
        print("verdict         \(status.verdict)")
    }
}
