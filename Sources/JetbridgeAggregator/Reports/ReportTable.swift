import Foundation
import JetbridgeModel
import JetbridgeStore

/// A report laid out as rows and columns, shared by the table, CSV and HTML renderings.
struct ReportTable {
    struct Column {
        /// The CSV header: lower camel case, like the JSON keys.
        var key: String
        /// The heading people read.
        var heading: String
        var numeric: Bool
        /// Left out of the table and the HTML page when no row has anything in it (CSV always has it, so its header
        /// stays the same).
        var optional = false
        /// The most characters a cell shows in the text table, the rest cut and marked `…` (free text such as a
        /// reject reason would make every row that wide); CSV, JSON and HTML show it whole.
        var tableWidth: Int?
        /// What a count other than zero in this column means on the HTML page (missing bags: ``Tone/bad``).
        var tone: Tone? = nil
    }

    /// What a number or a bar means to the person reading the page, one colour each on every page (docs/STORE.md,
    /// "Reports"): missing bags, rejected batches and limited ones are `bad` (red), arrived bags `good` (green),
    /// bags in transit and duplicates `neutral` (grey), plain quantities (bags checked, revenue, records) `plain`.
    enum Tone: String, CaseIterable {
        case plain, good, bad, neutral

        /// The bar colour.
        var fill: String {
            switch self {
            case .plain: "#3b6fb6"
            case .good: "#2e8b4f"
            case .bad: "#c62828"
            case .neutral: "#9aa3b2"
            }
        }

        /// The text colour of a table cell (darker than the bar, for contrast on white).
        var text: String {
            switch self {
            case .plain: "#1d2330"
            case .good: "#1e6b3a"
            case .bad: "#a61b1b"
            case .neutral: "#5b6475"
            }
        }

        /// A bag's status in these words: missing is bad, arrived good, in transit and checked neutral.
        init(_ status: BagStatus) {
            switch status {
            case .missing: self = .bad
            case .arrived: self = .good
            case .inTransit, .checked: self = .neutral
            }
        }
    }

    enum Cell {
        case text(String)
        /// Text that people see as `-` when empty (a currency, an item name of an error row).
        case label(String)
        case int(Int)
        /// `nil`: no amount (an error row).
        case money(Int?, currency: String)
        case weight(Double)
        case date(Date?)
        case flag(Bool)

        /// For people: money with its currency's decimals, dates in UTC, flags as `yes`.
        var display: String { display(grouped: false) }

        /// ``display``, with thousands separators in counts and money when `grouped` (the HTML page).
        func display(grouped: Bool) -> String {
            switch self {
            case .text(let text): text
            case .label(let text): text.isEmpty ? "-" : text
            case .int(let value): grouped ? NumberText.grouped(value) : String(value)
            case .money(let amount, let currency):
                amount.map {
                    grouped ? NumberText.groupedMoney($0, currency: currency) : Money.format($0, currency: currency)
                } ?? "-"
            case .weight(let value): "\(value)"
            case .date(let date): date.map(isoDate) ?? "-"
            case .flag(let value): value ? "yes" : ""
            }
        }

        /// For programs: plain integers, minor units, full weight precision, empty for no date or amount,
        /// `true`/`false`.
        var raw: String {
            switch self {
            case .text(let text), .label(let text): text
            case .int(let value): String(value)
            case .money(let amount, _): amount.map { String($0) } ?? ""
            case .weight(let value): "\(value)"
            case .date(let date): date.map(isoDate) ?? ""
            case .flag(let value): value ? "true" : "false"
            }
        }

        /// Whether the cell holds a number (never changed by the CSV formula guard).
        var isNumber: Bool {
            switch self {
            case .int, .money, .weight: true
            case .text, .label, .date, .flag: false
            }
        }
    }

    /// A horizontal bar chart for the HTML page.
    struct Chart {
        struct Bar {
            var label: String
            var value: Double
            var display: String
            /// What the bar means, and so its colour.
            var tone = Tone.plain
            /// The value that is a full bar: the bar's own flight's checked bags, so that a small flight's missing
            /// bags show next to a big flight's; `nil`: the largest value of the chart.
            var scale: Double? = nil
        }

        var title: String
        var bars: [Bar]
        /// What each colour means; a chart with one series and no legend shows none.
        var legend: [(name: String, tone: Tone)] = []
    }

    var title: String
    var columns: [Column]
    var rows: [[Cell]]
    var charts: [Chart] = []
    /// On the HTML page, a tone per row (the luggage report's status), made a class of the row.
    var rowTones: [Tone]? = nil
    /// On the HTML page, the most rows listed (the luggage report: a page for 185,000 bags was 37 MB and a browser
    /// had not drawn it after 3 minutes); what it leaves out is counted under the table.
    var htmlRowLimit: Int? = nil
}

extension ReportTable {
    init(_ report: Report) {
        switch report {
        case .flights(let reports): self.init(flights: reports.flights)
        case .items(let report): self.init(items: report)
        case .luggage(let report): self.init(luggage: report)
        case .devices(let report): self.init(devices: report)
        case .fleet(let report): self.init(fleet: report)
        }
    }

    private static func column(_ key: String, _ heading: String, numeric: Bool = false, tone: Tone? = nil) -> Column {
        Column(key: key, heading: heading, numeric: numeric, tone: tone)
    }

    /// Amounts in two currencies are never added, nor drawn on one scale: one chart per currency, in currency order.
    private static func revenueCharts<T>(
        _ title: String, _ rows: [T], currency: (T) -> String, bar: (T) -> Chart.Bar
    ) -> [Chart] {
        Dictionary(grouping: rows, by: currency).sorted { $0.key < $1.key }.map { currency, rows in
            Chart(title: "\(title) (\(currency.isEmpty ? "no currency" : currency))", bars: rows.map(bar))
        }
    }

    /// `1,234 (12.5%)`: a count and its share of `total` (no share of nothing). Never rounded to 0% or 100% unless
    /// it is: 10 missing of 185,000 is `<0.1%`, the 184,990 that arrived `>99.9%`.
    static func share(_ value: Int, of total: Int) -> String {
        guard total > 0 else { return NumberText.grouped(value) }
        let percent = Double(value) / Double(total) * 100
        let text =
            switch percent {
            case 0, 100: String(Int(percent))
            case ..<0.1: "<0.1"
            case 99.9...: ">99.9"
            case 10...90: String(Int(percent.rounded()))
            default: String(format: "%.1f", percent)
            }
        return "\(NumberText.grouped(value)) (\(text)%)"
    }

    private static let errorColumn = Column(key: "error", heading: "Error", numeric: false, optional: true)

    /// The width of a reason in the devices table: the table stays under about 120 columns.
    static let reasonWidth = 40

    /// Bags in the luggage report's words: departed and not arrived is `in transit` while no bag of the flight has
    /// arrived, `missing` once one has (JSON keeps docs/STORE.md's `missing`, departed and not arrived).
    static func bagCounts(_ bags: FlightReport.Bags) -> (inTransit: Int, missing: Int) {
        bags.arrived == 0 ? (bags.missing, 0) : (0, bags.missing)
    }

    init(flights: [FlightReport]) {
        self.init(
            title: "Flights",
            columns: [
                Self.column("flight", "Flight"), Self.column("currency", "Currency"),
                Self.column("orders", "Orders", numeric: true),
                Self.column("revenueMinorUnits", "Revenue", numeric: true),
                Self.column("checked", "Bags", numeric: true), Self.column("departed", "Departed", numeric: true),
                Self.column("inTransit", "In transit", numeric: true),
                Self.column("arrived", "Arrived", numeric: true, tone: .good),
                Self.column("missing", "Missing", numeric: true, tone: .bad),
                Self.column("weight", "Weight (lb)", numeric: true),
                Self.column("conflicts", "Conflicts", numeric: true), Self.errorColumn,
            ],
            rows: flights.map { report in
                let (inTransit, missing) = Self.bagCounts(report.bags)
                return [
                    .text(report.flight.rawValue), .label(report.currency), .int(report.orders),
                    .money(report.error == nil ? report.revenue : nil, currency: report.currency),
                    .int(report.bags.checked), .int(report.bags.departed), .int(inTransit),
                    .int(report.bags.arrived), .int(missing), .weight(report.bags.weight),
                    .int(report.bags.conflicts), .text(report.error ?? ""),
                ]
            },
            charts: Self.revenueCharts(
                "Revenue by flight", flights.filter { $0.error == nil && $0.orders > 0 }, currency: \.currency
            ) {
                .init(
                    label: $0.flight.rawValue, value: Double($0.revenue),
                    display: NumberText.groupedMoney($0.revenue, currency: $0.currency) + " " + $0.currency)
            } + [
                // Each flight's bars are shares of its own checked bags: 10 missing of 20 is half a bar next to a
                // flight of 185,000.
                Chart(
                    title: "Bags by flight (share of each flight's bags)",
                    bars: flights.flatMap { report in
                        let (inTransit, missing) = Self.bagCounts(report.bags)
                        let checked = report.bags.checked
                        let scale = Double(max(checked, 1))
                        return [
                            Chart.Bar(
                                label: report.flight.rawValue, value: Double(checked),
                                display: NumberText.grouped(checked), tone: .plain, scale: scale),
                            Chart.Bar(
                                label: "", value: Double(report.bags.arrived),
                                display: Self.share(report.bags.arrived, of: checked), tone: .good, scale: scale),
                            Chart.Bar(
                                label: "", value: Double(inTransit), display: Self.share(inTransit, of: checked),
                                tone: .neutral, scale: scale),
                            Chart.Bar(
                                label: "", value: Double(missing), display: Self.share(missing, of: checked),
                                tone: .bad, scale: scale),
                        ]
                    }, legend: [("checked", .plain), ("arrived", .good), ("in transit", .neutral), ("missing", .bad)]),
            ])
    }

    init(items report: ItemReport) {
        self.init(
            title: "Items",
            columns: [
                Self.column("name", "Item"), Self.column("currency", "Currency"),
                Self.column("count", "Sold", numeric: true),
                Self.column("revenueMinorUnits", "Revenue", numeric: true),
                Self.column("flights", "Flights", numeric: true), Self.errorColumn,
            ],
            rows: report.items.map {
                [
                    .label($0.name), .label($0.currency), .int($0.count),
                    .money($0.error == nil ? $0.revenue : nil, currency: $0.currency), .int($0.flights),
                    .text($0.error ?? ""),
                ]
            },
            charts: [
                Chart(
                    title: "Units sold by item",
                    bars: report.items.filter { $0.error == nil }.map {
                        .init(label: "\($0.name) (\($0.currency))", value: Double($0.count), display: NumberText.grouped($0.count))
                    }),
            ]
                + Self.revenueCharts("Revenue by item", report.items.filter { $0.error == nil }, currency: \.currency) {
                    .init(
                        label: $0.name, value: Double($0.revenue),
                        display: NumberText.groupedMoney($0.revenue, currency: $0.currency) + " " + $0.currency)
                })
    }

    init(luggage report: LuggageReport) {
        var counts: [BagStatus: Int] = [:]
        for row in report.bags { counts[row.status, default: 0] += 1 }
        let statuses = BagStatus.reportOrder
        self.init(
            title: "Luggage",
            columns: [
                Self.column("flight", "Flight"), Self.column("tag", "Tag"), Self.column("owner", "Owner"),
                Self.column("weight", "Weight (lb)", numeric: true), Self.column("departedAt", "Departed"),
                Self.column("arrivedAt", "Arrived"), Self.column("status", "Status"),
                Self.column("conflict", "Owner conflict"),
            ],
            rows: report.bags.map {
                [
                    .text($0.bag.flight.rawValue), .text($0.bag.tagID.uuidString), .text($0.bag.owner.description),
                    .weight($0.bag.weight), .date($0.bag.departedAt), .date($0.bag.arrivedAt),
                    .text($0.status.rawValue), .flag($0.bag.ownerConflict),
                ]
            },
            charts: [
                Chart(
                    title: "Bags by status",
                    bars: statuses.map {
                        .init(
                            label: $0.rawValue, value: Double(counts[$0] ?? 0),
                            display: Self.share(counts[$0] ?? 0, of: report.bags.count), tone: Tone($0))
                    }, legend: statuses.map { ($0.rawValue, Tone($0)) })
            ],
            rowTones: report.bags.map { Tone($0.status) },
            htmlRowLimit: 1_000)
    }

    init(devices report: DeviceReport) {
        self.init(
            title: "Devices",
            columns: [
                Self.column("device", "Device"), Self.column("lastSync", "Last sync"),
                Self.column("batches", "Batches", numeric: true), Self.column("records", "Records", numeric: true),
                Self.column("new", "New", numeric: true), Self.column("duplicates", "Duplicates", numeric: true),
                Self.column("rejects", "Rejects", numeric: true, tone: .bad),
                Column(key: "lastRejectReason", heading: "Last reject", numeric: false, tableWidth: Self.reasonWidth),
                Self.column("limited", "Limited", numeric: true, tone: .bad),
            ],
            rows: report.devices.map {
                [
                    .text($0.device), .date($0.lastSync), .int($0.batches), .int($0.records), .int($0.new),
                    .int($0.duplicates), .int($0.rejects), .text($0.lastRejectReason ?? ""), .int($0.limited),
                ]
            },
            charts: [
                Chart(
                    title: "Records by device",
                    bars: report.devices.map {
                        .init(label: $0.device, value: Double($0.records), display: NumberText.grouped($0.records))
                    }
                ),
                Chart(
                    title: "Duplicates and rejected batches by device",
                    bars: report.devices.flatMap {
                        [
                            Chart.Bar(
                                label: $0.device, value: Double($0.duplicates), display: NumberText.grouped($0.duplicates),
                                tone: .neutral),
                            Chart.Bar(
                                label: "", value: Double($0.rejects), display: NumberText.grouped($0.rejects), tone: .bad),
                        ]
                    }, legend: [("duplicate records", .neutral), ("rejected batches", .bad)]),
            ])
    }

    /// `report devices --flight F`: each device's state in words (`confirmed`, `sending`, `silent`).
    init(fleet report: FleetReport) {
        let tones: [FleetState: Tone] = [.confirmed: .good, .sending: .neutral, .silent: .bad]
        self.init(
            title: "Devices",
            columns: [
                Self.column("device", "Device"), Self.column("state", "State"),
                Self.column("announcedAt", "Announced"), Self.column("records", "Records", numeric: true),
                Self.column("confirmedAt", "Confirmed"), Self.column("lastSeen", "Last seen"),
            ],
            rows: report.devices.map {
                [
                    .text($0.device), .text($0.state.rawValue), .date($0.announcedAt), .int($0.records),
                    .date($0.confirmedAt), .date($0.lastSeen),
                ]
            },
            charts: [
                Chart(
                    title: "Devices by state",
                    bars: FleetState.allCases.map { state in
                        let count = report.devices.count { $0.state == state }
                        return .init(
                            label: state.rawValue, value: Double(count), display: NumberText.grouped(count),
                            tone: tones[state] ?? .plain)
                    })
            ],
            rowTones: report.devices.map { tones[$0.state] ?? .plain })
    }
}
