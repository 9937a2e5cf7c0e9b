public import Foundation
import JetbridgeModel
public import JetbridgeStore

/// How a report is printed.
public enum ReportFormat: String, CaseIterable, Hashable, Sendable {
    /// Aligned columns for a terminal.
    case table
    /// RFC 4180: a header row, CRLF line ends, fields quoted when they hold a comma, quote, CR or LF; a text field
    /// that begins with `=`, `+`, `-`, `@`, TAB or CR gets a leading `'` so that a spreadsheet does not run it as a
    /// formula (OWASP's advice); numbers stay numbers.
    case csv
    /// Compact JSON with a fixed key order; `report flights` prints docs/STORE.md's `{"flights":[…]}` exactly.
    case json
    /// One self-contained HTML page with inline SVG bar charts and no external assets.
    case html
}

/// Renders reports as text; the output depends only on the report (and, for HTML, the two times given), so the same
/// data prints the same bytes.
///
/// Text from devices is shown inert: in tables, CSV and HTML, control, bidirectional, zero-width and line-separator
/// characters are escaped as `\u{…}` (``InertText``); JSON escapes them as `\uXXXX`; HTML also escapes `& < > " '`.
public struct ReportRenderer: Sendable {
    /// When the report was made, stated on the HTML page.
    public var generatedAt: Date?
    /// When the data was last committed (``SQLiteStore/lastCommit()``), stated on the HTML page.
    public var lastCommit: Date?
    /// The `console` setting (`HOST:PORT` of `serve --console`), named on a luggage page that leaves bags out.
    public var console: String?

    /// - Parameters:
    ///   - generatedAt: When the report was made; the HTML page states it (`nil`: not stated).
    ///   - lastCommit: When the store last committed a batch; the HTML page states it (`nil`: "no data yet").
    ///   - console: `HOST:PORT` of the operator's console, when configured; a luggage page that lists only its
    ///     first bags points to the console's flight page for the rest.
    public init(generatedAt: Date? = nil, lastCommit: Date? = nil, console: String? = nil) {
        self.generatedAt = generatedAt
        self.lastCommit = lastCommit
        self.console = console
    }

    /// Renders one report.
    ///
    /// - Parameters:
    ///   - report: The report's data, from ``SQLiteStore/report(_:flight:)``.
    ///   - format: The output format.
    /// - Returns: The text, ending in a newline.
    public func render(_ report: Report, as format: ReportFormat) -> String {
        switch format {
        case .json: json(report).text + "\n"
        case .table: table(ReportTable(report))
        case .csv: csv(ReportTable(report))
        case .html: html(ReportTable(report))
        }
    }

    // MARK: JSON

    func json(_ report: Report) -> JSONText {
        switch report {
        case .flights(let reports):
            return .list("flights", reports.flights.map(Self.json))
        case .items(let report):
            return .list(
                "items",
                report.items.map {
                    .object(
                        [
                            ("name", .string($0.name)), ("currency", .string($0.currency)),
                            ("count", .int($0.count)), ("revenue", $0.error == nil ? .int($0.revenue) : .null),
                            ("flights", .int($0.flights)),
                        ] + ($0.error.map { [("error", JSONText.string($0))] } ?? []))
                })
        case .luggage(let report):
            return .list(
                "bags",
                report.bags.map {
                    .object([
                        ("flight", .string($0.bag.flight.rawValue)), ("tag", .string($0.bag.tagID.uuidString)),
                        ("owner", .array([.string($0.bag.owner.initial), .string($0.bag.owner.family)])),
                        ("weight", .double($0.bag.weight)), ("departedAt", .optional($0.bag.departedAt)),
                        ("arrivedAt", .optional($0.bag.arrivedAt)), ("status", .string($0.status.rawValue)),
                        ("conflict", .bool($0.bag.ownerConflict)),
                    ])
                })
        case .devices(let report):
            return .list(
                "devices",
                report.devices.map {
                    .object([
                        ("device", .string($0.device)), ("lastSync", .optional($0.lastSync)),
                        ("batches", .int($0.batches)), ("records", .int($0.records)), ("new", .int($0.new)),
                        ("duplicates", .int($0.duplicates)), ("rejects", .int($0.rejects)),
                        ("lastRejectAt", .optional($0.lastRejectAt)),
                        ("lastRejectReason", .optional($0.lastRejectReason)), ("limited", .int($0.limited)),
                    ])
                })
        case .fleet(let report):
            return .object([
                ("flight", .string(report.flight.rawValue)),
                (
                    "devices",
                    .array(
                        report.devices.map {
                            .object([
                                ("device", .string($0.device)), ("state", .string($0.state.rawValue)),
                                ("announcedAt", .optional($0.announcedAt)), ("records", .int($0.records)),
                                ("confirmedAt", .optional($0.confirmedAt)), ("lastSeen", .optional($0.lastSeen)),
                            ])
                        })
                ),
            ])
        }
    }

    /// One flight in docs/STORE.md's key order; a flight whose sales cannot be totalled has `"revenue": null` and an
    /// `"error"` key last.
    static func json(_ report: FlightReport) -> JSONText {
        .object(
            [
                ("flight", .string(report.flight.rawValue)), ("currency", .string(report.currency)),
                ("orders", .int(report.orders)), ("revenue", report.error == nil ? .int(report.revenue) : .null),
                (
                    "items",
                    .array(
                        report.items.map {
                            .object([
                                ("name", .string($0.name)), ("count", .int($0.count)), ("revenue", .int($0.revenue)),
                            ])
                        })
                ),
                (
                    "bags",
                    .object([
                        ("checked", .int(report.bags.checked)), ("departed", .int(report.bags.departed)),
                        ("arrived", .int(report.bags.arrived)), ("missing", .int(report.bags.missing)),
                        ("weight", .double(report.bags.weight)), ("conflicts", .int(report.bags.conflicts)),
                    ])
                ),
            ] + (report.error.map { [("error", JSONText.string($0))] } ?? []))
    }

    // MARK: Table

    /// The columns shown to people: optional ones only when a row has something in them.
    static func shownColumns(_ table: ReportTable) -> [Int] {
        table.columns.indices.filter { index in
            !table.columns[index].optional || table.rows.contains { !$0[index].raw.isEmpty }
        }
    }

    func table(_ full: ReportTable) -> String {
        let shown = Self.shownColumns(full)
        var table = full
        table.columns = shown.map { full.columns[$0] }
        table.rows = full.rows.map { row in shown.map { row[$0] } }
        let cells = table.rows.map { row in
            row.indices.map { index in
                Self.cut(InertText.escape(row[index].display), to: table.columns[index].tableWidth)
            }
        }
        let widths = table.columns.indices.map { index in
            max(table.columns[index].heading.count, cells.map { $0[index].count }.max() ?? 0)
        }
        func line(_ values: [String]) -> String {
            var out = ""
            for (index, value) in values.enumerated() {
                let fill = String(repeating: " ", count: widths[index] - value.count)
                if index > 0 { out += "  " }
                out += table.columns[index].numeric ? fill + value : value + fill
            }
            // Trailing spaces of a left-aligned last column help nobody.
            while out.last == " " { out.removeLast() }
            return out + "\n"
        }
        var out = line(table.columns.map(\.heading))
        out += line(widths.map { String(repeating: "-", count: $0) })
        for row in cells { out += line(row) }
        if cells.isEmpty { out += "(no \(table.title.lowercased()))\n" }
        return out
    }

    /// `text` in at most `width` characters: cut, with `…` as the last one, when longer.
    static func cut(_ text: String, to width: Int?) -> String {
        guard let width, text.count > width else { return text }
        return text.prefix(width - 1) + "…"
    }

    // MARK: CSV

    func csv(_ table: ReportTable) -> String {
        var out = Self.csvRecord(table.columns.map(\.key))
        for row in table.rows {
            out += Self.csvRecord(row.map { $0.isNumber ? $0.raw : InertText.escape(Self.formulaGuarded($0.raw)) })
        }
        return out
    }

    /// `'` + `text` when a spreadsheet would take `text` for a formula: it begins with `=`, `+`, `-`, `@`, TAB or CR.
    static func formulaGuarded(_ text: String) -> String {
        guard let first = text.utf8.first else { return text }
        switch first {
        case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "@"), 0x09, 0x0D: return "'" + text
        default: return text
        }
    }

    static func csvRecord(_ fields: [String]) -> String {
        fields.map(csvField).joined(separator: ",") + "\r\n"
    }

    static func csvField(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) else {
            return field
        }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    // MARK: HTML

    func html(_ full: ReportTable) -> String {
        let shown = Self.shownColumns(full)
        var table = full
        table.columns = shown.map { full.columns[$0] }
        table.rows = full.rows.map { row in shown.map { row[$0] } }
        let title = "Jetbridge: \(table.title.lowercased()) report"
        var out = """
            <!DOCTYPE html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(Self.escape(title))</title>
            <style>
            body { font-family: system-ui, sans-serif; margin: 2rem; color: #1d2330; }
            h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
            p.stamp { color: #5b6475; font-size: 0.9rem; }
            table { border-collapse: collapse; font-size: 0.9rem; }
            th, td { padding: 0.25rem 0.75rem; border-bottom: 1px solid #d8dce3; text-align: left; }
            td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
            td.id { white-space: nowrap; font-family: ui-monospace, monospace; }
            td.time, time { white-space: nowrap; font-variant-numeric: tabular-nums; }
            td.status { white-space: nowrap; }
            td.error { color: #a61b1b; }
            \(Self.toneStyles)
            p.more { font-weight: 600; }
            svg text { font-size: 12px; fill: #1d2330; }
            </style>
            </head>
            <body>
            <h1>\(Self.escape(title))</h1>

            """
        var stamp: [String] = []
        if let generatedAt { stamp.append("Generated <time>\(isoDate(generatedAt))</time>") }
        stamp.append(
            lastCommit.map { "data as of the last commit at <time>\(isoDate($0))</time>" } ?? "no batch committed yet")
        out += "<p class=\"stamp\">\(stamp.joined(separator: "; ")).</p>\n"
        for chart in table.charts where !chart.bars.isEmpty {
            out += "<h2>\(Self.escape(chart.title))</h2>\n" + Self.svg(chart) + "\n"
        }
        out += "<h2>\(Self.escape(table.title))</h2>\n<table>\n<thead><tr>"
        for column in table.columns {
            out += (column.numeric ? "<th class=\"n\">" : "<th>") + Self.escape(column.heading) + "</th>"
        }
        out += "</tr></thead>\n<tbody>\n"
        let classes = table.columns.map { column in
            column.numeric
                ? "n"
                : ["flight", "tag", "device"].contains(column.key)
                    ? "id"
                    : Self.timeColumns.contains(column.key)
                        ? "time" : column.key == "status" ? "status" : column.key == "error" ? "error" : ""
        }
        let shownRows = table.htmlRowLimit.map { min($0, table.rows.count) } ?? table.rows.count
        for (rowIndex, row) in table.rows.prefix(shownRows).enumerated() {
            let rowTone = table.rowTones?[rowIndex]
            out += rowTone.map { "<tr class=\"\($0.rawValue)\">" } ?? "<tr>"
            for (index, cell) in row.enumerated() {
                var names = classes[index].isEmpty ? [] : [classes[index]]
                if let tone = table.columns[index].tone, case .int(let count) = cell, count != 0 {
                    names.append(tone.rawValue)
                } else if let rowTone, table.columns[index].key == "status" {
                    names.append(rowTone.rawValue)
                }
                let attribute = names.isEmpty ? "" : " class=\"\(names.joined(separator: " "))\""
                out += "<td\(attribute)>" + Self.escape(cell.display(grouped: true)) + "</td>"
            }
            out += "</tr>\n"
        }
        out += "</tbody>\n</table>\n"
        if table.rows.isEmpty { out += "<p>No \(Self.escape(table.title.lowercased())).</p>\n" }
        if shownRows < table.rows.count { out += omitted(table, shown: shownRows) }
        out += "</body>\n</html>\n"
        return out
    }

    /// The columns that hold times: they never wrap (a timestamp broken at its `-` or `T` reads as two).
    static let timeColumns: Set<String> = ["departedAt", "arrivedAt", "lastSync", "lastRejectAt"]

    /// One rule per ``ReportTable/Tone``: the same colours on every page, for cells and for bars.
    static let toneStyles = ReportTable.Tone.allCases.filter { $0 != .plain }.map {
        "td.\($0.rawValue), tr.\($0.rawValue) td.status { color: \($0.text); }"
    }.joined(separator: "\n")

    /// The line under a table cut at ``ReportTable/htmlRowLimit``: how many rows are not listed and of which
    /// statuses, where to get them all, and, when the console is configured, its flight page.
    func omitted(_ table: ReportTable, shown: Int) -> String {
        let rest = table.rows[shown...]
        let statusColumn = table.columns.firstIndex { $0.key == "status" }
        let flightColumn = table.columns.firstIndex { $0.key == "flight" }
        var statuses: [String: Int] = [:]
        var flights: Set<String> = []
        for row in rest {
            if let statusColumn { statuses[row[statusColumn].raw, default: 0] += 1 }
            if let flightColumn { flights.insert(row[flightColumn].raw) }
        }
        let breakdown = BagStatus.reportOrder.compactMap { status in
            statuses[status.rawValue].map { "\(NumberText.grouped($0)) \(status.rawValue)" }
        }
        var out = "<p class=\"more\">\(NumberText.grouped(rest.count)) more not listed"
        out += breakdown.isEmpty ? "" : " (\(breakdown.joined(separator: ", ")))"
        out += ": this page lists the first \(NumberText.grouped(shown)) of \(NumberText.grouped(table.rows.count)),"
        out += " the ones that need someone first.</p>\n"
        out += "<p>Every one of them is in <code>report \(Self.escape(table.title.lowercased())) --format csv</code>"
        out += " (or <code>--format json</code>)"
        if let console {
            let names = flights.sorted()
            let example = names.count == 1 ? Self.escape(names[0]) : "FLIGHT"
            out += ", and on the operator's console (<code>serve --console \(Self.escape(console))</code>):"
            out += " a flight's page, <code>/flight?flight=\(example)</code>, lists its bags missing first"
            if names.count > 1 {
                out += " (here: \(names.prefix(10).map(Self.escape).joined(separator: ", "))"
                out += names.count > 10 ? " and \(names.count - 10) more flights)" : ")"
            }
        }
        return out + ".</p>\n"
    }

    /// A horizontal bar chart: labels left, bars scaled to their ``ReportTable/Chart/Bar/scale`` or else to the
    /// chart's largest value (a count that is not zero is at least 2 pixels), values right of the bars, each bar
    /// coloured by its ``ReportTable/Tone``; a legend above when the chart has one.
    static func svg(_ chart: ReportTable.Chart) -> String {
        let labelWidth = 220
        let barSpace = 360
        let rowHeight = 22
        let width = labelWidth + barSpace + 140
        let legendHeight = chart.legend.isEmpty ? 0 : rowHeight
        let height = chart.bars.count * rowHeight + 4 + legendHeight
        let largest = chart.bars.map(\.value).max() ?? 0
        var out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" role=\"img\""
        out += " aria-label=\"\(escape(chart.title))\">\n"
        if !chart.legend.isEmpty {
            out += "<g class=\"legend\">"
            for (index, entry) in chart.legend.enumerated() {
                let x = labelWidth + index * 110
                out += "<rect class=\"\(entry.tone.rawValue)\" x=\"\(x)\" y=\"4\" width=\"12\" height=\"12\""
                out += " fill=\"\(entry.tone.fill)\"/>"
                out += "<text x=\"\(x + 16)\" y=\"15\">\(escape(entry.name))</text>"
            }
            out += "</g>\n"
        }
        for (index, bar) in chart.bars.enumerated() {
            let y = index * rowHeight + 2 + legendHeight
            let scale = bar.scale ?? largest
            let length =
                scale > 0 && bar.value > 0
                ? max(2, Int((min(bar.value / scale, 1) * Double(barSpace)).rounded())) : 0
            out += "<text x=\"\(labelWidth - 8)\" y=\"\(y + 15)\" text-anchor=\"end\">\(escape(bar.label))</text>"
            out += "<rect class=\"\(bar.tone.rawValue)\" x=\"\(labelWidth)\" y=\"\(y + 3)\" width=\"\(length)\""
            out += " height=\"\(rowHeight - 6)\" fill=\"\(bar.tone.fill)\"/>"
            out += "<text x=\"\(labelWidth + length + 6)\" y=\"\(y + 15)\">\(escape(bar.display))</text>\n"
        }
        return out + "</svg>"
    }

    /// Escapes text for HTML element content and quoted attribute values, after ``InertText`` (a right-to-left
    /// override would reorder a table cell in a browser just as on a terminal).
    static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for character in InertText.escape(text) {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.append(character)
            }
        }
        return out
    }
}
