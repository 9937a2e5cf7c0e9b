import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeStore
import JetbridgeLogging
import SystemSupport

/// `status`: one screen about the `serve` running on this home, from the status file it keeps current.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the running aggregator: uptime, endpoints, devices, backlog, last commit, rejections.",
        discussion: """
            Reads <home>/status.json, which serve rewrites every 2 seconds, and the home's lock, which tells whether \
            serve runs. Exit 0 when it runs, 69 when no serve runs on this home, 75 when it has just started and \
            has not written its status yet (its store is still opening).
            """)

    @OptionGroup var global: GroundOptions

    @Flag(help: "Print the status as JSON (the fields of <home>/status.json, plus \"running\": true).")
    var json = false

    func run() throws {
        let home = global.aggregatorHome
        guard let pid = HomeLock.holder(of: home) else {
            throw AggregatorError(
                .unavailable,
                "no jetbridge-aggregator serve is running on the home \(home.directory.path) (nothing holds \(home.directory.appendingPathComponent(HomeLock.fileName).path)); start one with `\(home.command("serve"))`"
            )
        }
        // A status file another pid wrote is not this serve's: one killed with SIGKILL leaves its last status, and a
        // serve started after it writes its own only once its store is open. Shown, it read as ready with the dead
        // process's pid and counts.
        guard let status = try ServeStatus.read(home: home), status.pid == pid else {
            throw AggregatorError(
                .tryAgain,
                "jetbridge-aggregator serve (pid \(pid)) is running on \(home.directory.path) but has not written its status yet; try again in a few seconds"
            )
        }
        if json {
            var object =
                try JSONSerialization.jsonObject(with: try status.json()) as? [String: Any] ?? [:]
            object["running"] = true
            let data = try JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print(Self.render(status, now: Date()))
    }

    /// The text screen. Device ids, reasons and keys come from devices: control characters are escaped.
    static func render(_ status: ServeStatus, now: Date) -> String {
        func clean(_ text: String) -> String { LogEscaping.text(text) }
        let g = Self.g
        func time(_ date: Date?) -> String {
            guard let date else { return "never" }
            return "\(date.formatted(.iso8601)) (\(ago(now.timeIntervalSince(date))) ago)"
        }
        let age = now.timeIntervalSince(status.updatedAt)
        let stale = age > 10 ? "  (written \(ago(age)) ago: serve may be stuck)" : ""
        let totals = status.totals
        var lines = [
            "jetbridge-aggregator serve, pid \(status.pid), up \(ago(now.timeIntervalSince(status.startedAt)))\(stale)",
            "version           \(status.version) (wire protocol \(status.wireProtocol))",
            "ready             \(status.notReady.map { "no: \(clean($0))" } ?? "yes")",
            "data              \(status.endpoints.data)",
            "acks              \(status.endpoints.acks)",
            "metrics           \(status.endpoints.metrics.map { "http://\($0)/metrics" } ?? "off")",
            "mode              \(status.mode)",
            "store             \(status.store)",
            "last commit       \(time(status.lastCommitAt))",
            "backlog           \(status.batchesQueued) batches queued for the store, \(status.acksHeld) acks held",
            "receipts pending  \(status.receiptsPending.map(String.init) ?? "unknown") seats (\(status.receipts))",
            "totals            \(g(totals.storedBatches)) batches stored (\(g(totals.newRecords)) new, \(g(totals.duplicateRecords)) duplicate records), \(g(totals.rejectedBatches)) refused, \(g(totals.retriedBatches)) retried, \(g(totals.transactions)) transactions",
        ]
        lines.append("")
        if status.devices.isEmpty {
            lines.append("devices           none since start")
        } else {
            var rows = [["DEVICE", "LAST BATCH", "STORED", "REFUSED", "NEW", "DUPLICATE", "REJECTED RECORDS"]]
            for device in status.devices {
                let refused = device.batches.filter { $0.key != "stored" }.values.reduce(0, +)
                rows.append([
                    clean(device.device), "\(ago(now.timeIntervalSince(device.lastBatchAt))) ago",
                    g(device.batches["stored"] ?? 0), g(refused), g(device.records["new"] ?? 0),
                    g(device.records["duplicate"] ?? 0), g(device.records["rejected"] ?? 0),
                ])
            }
            lines += table(rows)
        }
        lines.append("")
        if let fleet = status.fleet {
            if fleet.isEmpty {
                lines.append("fleet             no flight announced in the last 24 hours")
            } else {
                lines.append("fleet             devices that announced each flight (last 24 hours)")
                lines += table(
                    [["FLIGHT", "CONFIRMED", "SENDING", "SILENT", "LAST ANNOUNCED"]]
                        + fleet.map {
                            [
                                clean($0.flight), g($0.confirmed), g($0.sending), g($0.silent),
                                "\(ago(now.timeIntervalSince($0.lastAnnouncedAt))) ago",
                            ]
                        })
            }
            lines.append("")
        }
        if status.recentRejections.isEmpty {
            lines.append("last rejections   none")
        } else {
            lines.append("last rejections")
            lines += table(
                [["TIME", "DEVICE", "STATUS", "REASON"]]
                    + status.recentRejections.reversed().map {
                        [$0.time.formatted(.iso8601), clean($0.device), $0.status, clean($0.reason.count > 120 ? String($0.reason.prefix(119)) + "…" : $0.reason)]
                    })
        }
        lines.append("")
        let counts = status.handshakes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
        lines.append("handshakes        " + (counts.isEmpty ? "none" : counts.joined(separator: ", ")))
        if !status.recentRefusedHandshakes.isEmpty {
            // One row per key (and result and address), newest first, with how many of the recent refusals it had:
            // a device with a stale key reconnecting all day is one row, not ten.
            lines += table(
                [["LAST", "RESULT", "KEY", "ADDRESS", "COUNT"]]
                    + refusalGroups(status.recentRefusedHandshakes).map {
                        [
                            $0.last.formatted(.iso8601), $0.result, clean($0.publicKey ?? "-"), clean($0.address),
                            g($0.count),
                        ]
                    })
        }
        return lines.joined(separator: "\n")
    }

    /// Refused handshakes grouped by result, key and address: the latest time and the count of each, newest first.
    static func refusalGroups(
        _ refusals: [ServeStatus.RefusedHandshake]
    ) -> [(result: String, publicKey: String?, address: String, last: Date, count: Int)] {
        var groups: [(result: String, publicKey: String?, address: String, last: Date, count: Int)] = []
        for refusal in refusals {
            if let index = groups.firstIndex(where: {
                $0.result == refusal.result && $0.publicKey == refusal.publicKey && $0.address == refusal.address
            }) {
                groups[index].count += 1
                groups[index].last = max(groups[index].last, refusal.time)
            } else {
                groups.append((refusal.result, refusal.publicKey, refusal.address, refusal.time, 1))
            }
        }
        return groups.sorted { $0.last > $1.last }
    }

    /// `40120` → `40,120`.
    static func g(_ number: Int) -> String { NumberText.grouped(number) }

    static func ago(_ seconds: TimeInterval) -> String {
        let total = max(0, Int(seconds))
        let (days, hours, minutes, rest) = (total / 86_400, total / 3_600 % 24, total / 60 % 60, total % 60)
        if days > 0 { return "\(days)d \(hours)h \(minutes)m" }
        if hours > 0 { return "\(hours)h \(minutes)m \(rest)s" }
        if minutes > 0 { return "\(minutes)m \(rest)s" }
        return "\(rest)s"
    }

    static func table(_ rows: [[String]]) -> [String] {
        let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            "  " + row.enumerated().map { $1.padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
    }
}
