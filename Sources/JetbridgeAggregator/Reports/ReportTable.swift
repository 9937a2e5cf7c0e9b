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
            /// Which of the chart's `legend` entries (and colour) the bar belongs to.
            var series = 0
        }

        var title: String
        var bars: [Bar]
        /// What each colour means; a chart with one series and no legend shows none.
        var legend: [String] = []
    }

    var title: String
    var columns: [Column]
    var rows: [[Cell]]
    var charts: [Chart] = []
}

extension ReportTable {
    init(_ report: Report) {
        switch report {
        case .flights(let reports): self.init(flights: reports.flights)
        case .items(let report): self.init(items: report)
        case .luggage(let report): self.init(luggage: report)
        case .devices(let report): self.init(devices: report)
        }
    }

    private static func column(_ key: String, _ heading: String, numeric: Bool = false) -> Column {
        Column(key: key, heading: heading, numeric: numeric)
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
                Self.column("inTransit", "In transit", numeric: true), Self.column("arrived", "Arrived", numeric: true),
                Self.column("missing", "Missing", numeric: true), Self.column("weight", "Weight (lb)", numeric: true),
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
            charts: [
                Chart(
                    title: "Revenue by flight",
                    bars: flights.filter { $0.error == nil }.map {
                        .init(
                            label: $0.flight.rawValue, value: Double($0.revenue),
                            display: NumberText.groupedMoney($0.revenue, currency: $0.currency) + " " + $0.currency)
                    }),
                Chart(
                    title: "Bags by flight",
                    bars: flights.flatMap { report in
                        let (inTransit, missing) = Self.bagCounts(report.bags)
                        return [
                            Chart.Bar(
                                label: report.flight.rawValue, value: Double(report.bags.checked),
                                display: NumberText.grouped(report.bags.checked), series: 0),
                            Chart.Bar(
                                label: "", value: Double(report.bags.arrived), display: NumberText.grouped(report.bags.arrived),
                                series: 1),
                            Chart.Bar(label: "", value: Double(inTransit), display: NumberText.grouped(inTransit), series: 2),
                            Chart.Bar(label: "", value: Double(missing), display: NumberText.grouped(missing), series: 3),
                        ]
                    }, legend: ["checked", "arrived", "in transit", "missing"]),
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
                Chart(
                    title: "Revenue by item",
                    bars: report.items.filter { $0.error == nil }.map {
                        .init(
                            label: "\($0.name) (\($0.currency))", value: Double($0.revenue),
                            display: NumberText.groupedMoney($0.revenue, currency: $0.currency) + " " + $0.currency)
                    }),
            ])
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
                    bars: statuses.enumerated().map {
                        .init(
                            label: $0.element.rawValue, value: Double(counts[$0.element] ?? 0),
                            display: NumberText.grouped(counts[$0.element] ?? 0), series: $0.offset)
                    }, legend: statuses.map(\.rawValue))
            ])
    }

    init(devices report: DeviceReport) {
        self.init(
            title: "Devices",
            columns: [
                Self.column("device", "Device"), Self.column("lastSync", "Last sync"),
                Self.column("batches", "Batches", numeric: true), Self.column("records", "Records", numeric: true),
                Self.column("new", "New", numeric: true), Self.column("duplicates", "Duplicates", numeric: true),
                Self.column("rejects", "Rejects", numeric: true),
                Column(key: "lastRejectReason", heading: "Last reject", numeric: false, tableWidth: Self.reasonWidth),
                Self.column("limited", "Limited", numeric: true),
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
                                series: 0),
                            Chart.Bar(label: "", value: Double($0.rejects), display: NumberText.grouped($0.rejects), series: 1),
                        ]
                    }, legend: ["duplicate records", "rejected batches"]),
            ])
    }
}
