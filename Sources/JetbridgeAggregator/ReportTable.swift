import Foundation
import JetbridgeModel

/// A report laid out as rows and columns, shared by the table, CSV and HTML renderings.
struct ReportTable {
    struct Column {
        /// The CSV header: lower camel case, like the JSON keys.
        var key: String
        /// The heading people read.
        var heading: String
        var numeric: Bool
    }

    enum Cell {
        case text(String)
        case int(Int)
        case money(Int, currency: String)
        case weight(Double)
        case date(Date?)
        case flag(Bool)

        /// For people: money with its currency's decimals, dates in UTC, flags as `yes`.
        var display: String {
            switch self {
            case .text(let text): text
            case .int(let value): String(value)
            case .money(let amount, let currency): Money.format(amount, currency: currency)
            case .weight(let value): "\(value)"
            case .date(let date): date.map(isoDate) ?? "-"
            case .flag(let value): value ? "yes" : ""
            }
        }

        /// For programs: minor units, full weight precision, empty for no date, `true`/`false`.
        var raw: String {
            switch self {
            case .text(let text): text
            case .int(let value): String(value)
            case .money(let amount, _): String(amount)
            case .weight(let value): "\(value)"
            case .date(let date): date.map(isoDate) ?? ""
            case .flag(let value): value ? "true" : "false"
            }
        }
    }

    /// A horizontal bar chart for the HTML page.
    struct Chart {
        struct Bar {
            var label: String
            var value: Double
            var display: String
        }

        var title: String
        var bars: [Bar]
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

    init(flights: [FlightReport]) {
        self.init(
            title: "Flights",
            columns: [
                Self.column("flight", "Flight"), Self.column("currency", "Currency"),
                Self.column("orders", "Orders", numeric: true), Self.column("revenue", "Revenue", numeric: true),
                Self.column("checked", "Bags", numeric: true), Self.column("departed", "Departed", numeric: true),
                Self.column("arrived", "Arrived", numeric: true), Self.column("missing", "Missing", numeric: true),
                Self.column("weight", "Weight (lb)", numeric: true),
                Self.column("conflicts", "Conflicts", numeric: true),
            ],
            rows: flights.map { report in
                [
                    .text(report.flight.rawValue), .text(report.currency), .int(report.orders),
                    .money(report.revenue, currency: report.currency), .int(report.bags.checked),
                    .int(report.bags.departed), .int(report.bags.arrived), .int(report.bags.missing),
                    .weight(report.bags.weight), .int(report.bags.conflicts),
                ]
            },
            charts: [
                Chart(
                    title: "Revenue by flight",
                    bars: flights.map {
                        .init(
                            label: $0.flight.rawValue, value: Double($0.revenue),
                            display: Money.format($0.revenue, currency: $0.currency) + " " + $0.currency)
                    }),
                Chart(
                    title: "Bags checked and missing by flight",
                    bars: flights.flatMap {
                        [
                            Chart.Bar(
                                label: "\($0.flight.rawValue) checked", value: Double($0.bags.checked),
                                display: String($0.bags.checked)),
                            Chart.Bar(
                                label: "\($0.flight.rawValue) missing", value: Double($0.bags.missing),
                                display: String($0.bags.missing)),
                        ]
                    }),
            ])
    }

    init(items report: ItemReport) {
        self.init(
            title: "Items",
            columns: [
                Self.column("name", "Item"), Self.column("currency", "Currency"),
                Self.column("count", "Sold", numeric: true), Self.column("revenue", "Revenue", numeric: true),
                Self.column("flights", "Flights", numeric: true),
            ],
            rows: report.items.map {
                [
                    .text($0.name), .text($0.currency), .int($0.count), .money($0.revenue, currency: $0.currency),
                    .int($0.flights),
                ]
            },
            charts: [
                Chart(
                    title: "Units sold by item",
                    bars: report.items.map {
                        .init(label: "\($0.name) (\($0.currency))", value: Double($0.count), display: String($0.count))
                    }),
                Chart(
                    title: "Revenue by item",
                    bars: report.items.map {
                        .init(
                            label: "\($0.name) (\($0.currency))", value: Double($0.revenue),
                            display: Money.format($0.revenue, currency: $0.currency) + " " + $0.currency)
                    }),
            ])
    }

    init(luggage report: LuggageReport) {
        var counts: [BagStatus: Int] = [:]
        for row in report.bags { counts[row.status, default: 0] += 1 }
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
                    bars: BagStatus.allCases.map {
                        .init(label: $0.rawValue, value: Double(counts[$0] ?? 0), display: String(counts[$0] ?? 0))
                    })
            ])
    }

    init(devices report: DeviceReport) {
        self.init(
            title: "Devices",
            columns: [
                Self.column("device", "Device"), Self.column("lastSync", "Last sync"),
                Self.column("batches", "Batches", numeric: true), Self.column("records", "Records", numeric: true),
                Self.column("new", "New", numeric: true), Self.column("duplicates", "Duplicates", numeric: true),
                Self.column("rejects", "Rejects", numeric: true), Self.column("lastRejectReason", "Last reject"),
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
                        .init(label: $0.device, value: Double($0.records), display: String($0.records))
                    }
                ),
                Chart(
                    title: "Duplicates and rejected batches by device",
                    bars: report.devices.flatMap {
                        [
                            Chart.Bar(
                                label: "\($0.device) duplicates", value: Double($0.duplicates),
                                display: String($0.duplicates)),
                            Chart.Bar(
                                label: "\($0.device) rejects", value: Double($0.rejects), display: String($0.rejects)),
                        ]
                    }),
            ])
    }
}
