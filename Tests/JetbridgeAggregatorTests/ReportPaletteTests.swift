import Foundation
@testable import JetbridgeAggregator
import JetbridgeModel
import JetbridgeStore
import Testing

/// The static HTML reports read the same on every page (issue 26 item 5): the generated HTML is parsed for the
/// colours of rows, cells, bars and legends, the bar widths and the size of the luggage page.
@Suite("HTML reports: one palette, scales per currency and per flight, a small luggage page (issue 26 item 5)")
struct ReportPaletteTests {
    // MARK: Reading the page

    /// What a colour looks like to a reader: `red`, `green`, `blue` or `grey`.
    static func hue(_ hex: String) -> String {
        let digits = Array(hex.dropFirst())
        func channel(_ at: Int) -> Int { Int(String(digits[at..<at + 2]), radix: 16) ?? 0 }
        let (r, g, b) = (channel(0), channel(2), channel(4))
        if max(r, g, b) - min(r, g, b) < 48 { return "grey" }
        if r > g + 48 && r > b + 48 { return "red" }
        if g > r + 32 && g >= b { return "green" }
        if b > r + 32 { return "blue" }
        return "other \(hex)"
    }

    static func matches(_ pattern: String, in text: String) -> [[String]] {
        let regex = try! NSRegularExpression(pattern: pattern)
        let range = NSRange(text.startIndex..., in: text)
        return regex.matches(in: text, range: range).map { match in
            (0..<match.numberOfRanges).map { index in
                Range(match.range(at: index), in: text).map { String(text[$0]) } ?? ""
            }
        }
    }

    /// The page's style sheet.
    static func style(_ html: String) -> String {
        matches("(?s)<style>(.*?)</style>", in: html).first?[1] ?? ""
    }

    /// The declarations of the first rule whose selector list names `selector`.
    static func declarations(of selector: String, in html: String) -> String? {
        for rule in matches("([^{}]+)\\{([^}]*)\\}", in: style(html)) {
            let selectors = rule[1].split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            if selectors.contains(selector) { return rule[2] }
        }
        return nil
    }

    /// The text colour the style sheet gives a `td` with these classes in a `tr` with this class.
    static func cellColour(cellClasses: [String], rowClass: String?, in html: String) -> String? {
        var selectors = cellClasses.map { "td.\($0)" }
        if let rowClass { selectors.append("tr.\(rowClass) td.status") }
        for selector in selectors {
            if let rule = declarations(of: selector, in: html),
                let colour = matches("color:\\s*(#[0-9a-fA-F]{6})", in: rule).first?[1]
            {
                return colour
            }
        }
        return nil
    }

    /// The luggage table row (row class, status cell classes) of the row whose status cell says `status`.
    static func statusRow(_ status: String, in html: String) -> (row: String?, cell: [String])? {
        for row in matches("<tr( class=\"([a-z ]+)\")?>(.*?)</tr>", in: html) {
            for cell in matches("<td( class=\"([a-z ]+)\")?>([^<]*)</td>", in: row[3]) where cell[3] == status {
                return (row[2].isEmpty ? nil : row[2], cell[2].split(separator: " ").map(String.init))
            }
        }
        return nil
    }

    /// The fill of the legend entry named `name`.
    static func legendFill(_ name: String, in html: String) -> String? {
        matches(
            "<rect [^>]*fill=\"(#[0-9a-fA-F]{6})\"/><text[^>]*>\(NSRegularExpression.escapedPattern(for: name))</text>",
            in: html
        )
        .first?[1]
    }

    /// The fill and width of the bar right after the label `label`, first occurrence on the page.
    static func bar(after label: String, in html: String) -> (width: Int, fill: String)? {
        let pattern =
            "text-anchor=\"end\">\(NSRegularExpression.escapedPattern(for: label))</text><rect [^>]*width=\"(\\d+)\"[^>]*fill=\"(#[0-9a-fA-F]{6})\""
        return matches(pattern, in: html).first.map { (Int($0[1]) ?? -1, $0[2]) }
    }

    static func bag(_ index: Int, flight: FlightID, status: BagStatus) -> LuggageReport.Row {
        let departed = date(Double(index))
        let tag = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012X", index))!
        let bag = BagState(
            flight: flight, tagID: tag, owner: BagState.example.owner, weight: 23.5, departedAt: departed,
            arrivedAt: status == .arrived ? date(Double(index) + 3_600) : nil, ownerConflict: false,
            newestScanID: tag, newestScannedAt: departed)
        return .init(bag: bag, status: status)
    }

    static func luggage() -> LuggageReport {
        LuggageReport(
            bags: BagStatus.reportOrder.enumerated().map { bag($0.offset, flight: flightA, status: $0.element) })
    }

    // MARK: The defects

    /// The luggage page had arrived bags in red and missing ones in blue.
    @Test func luggageShowsMissingInRedArrivedInGreenInTransitNeutral() throws {
        let html = ReportRenderer().render(.luggage(Self.luggage()), as: .html)
        let expected = ["missing": "red", "arrived": "green", "in-transit": "grey"]
        for (status, hue) in expected {
            let row = try #require(Self.statusRow(status, in: html), "no row for \(status)")
            let colour = try #require(
                Self.cellColour(cellClasses: row.cell, rowClass: row.row, in: html), "\(status) row has no colour")
            #expect(Self.hue(colour) == hue, "\(status) row: \(colour)")
            let bar = try #require(Self.bar(after: status, in: html), "no bar for \(status)")
            #expect(Self.hue(bar.fill) == hue, "\(status) bar: \(bar.fill)")
            let legend = try #require(Self.legendFill(status, in: html))
            #expect(Self.hue(legend) == hue, "\(status) legend: \(legend)")
        }
    }

    /// The devices page drew rejected batches in green.
    @Test func devicesShowRejectedInRed() throws {
        let report = DeviceReport(devices: [
            DeviceStatistics(
                device: "cart-1", lastSync: date(0), batches: 3, records: 30, new: 20, duplicates: 10, rejects: 2,
                lastRejectAt: date(1), lastRejectReason: "bad record", limited: 1)
        ])
        let html = ReportRenderer().render(.devices(report), as: .html)
        let legend = try #require(Self.legendFill("rejected batches", in: html))
        #expect(Self.hue(legend) == "red", "\(legend)")
        #expect(Self.hue(try #require(Self.legendFill("duplicate records", in: html))) == "grey")
        // The table's rejects cell (2) is red too.
        let cells = Self.matches("<td class=\"([a-z ]+)\">2</td>", in: html)
        let classes = try #require(cells.first?[1]).split(separator: " ").map(String.init)
        let colour = try #require(Self.cellColour(cellClasses: classes, rowClass: nil, in: html))
        #expect(Self.hue(colour) == "red")
    }

    /// The flights page: missing red, arrived green, in the legend, the bars and the table.
    @Test func flightsShowMissingInRedAndArrivedInGreen() throws {
        let flights = FlightReports(flights: [
            FlightReport(
                flight: flightA, currency: "USD", orders: 1, revenue: 100, items: [],
                bags: .init(checked: 20, departed: 20, arrived: 15, missing: 5, weight: 1, conflicts: 0))
        ])
        let html = ReportRenderer().render(.flights(flights), as: .html)
        #expect(Self.hue(try #require(Self.legendFill("missing", in: html))) == "red")
        #expect(Self.hue(try #require(Self.legendFill("arrived", in: html))) == "green")
        #expect(Self.hue(try #require(Self.legendFill("in transit", in: html))) == "grey")
        let missingCell = try #require(Self.matches("<td class=\"([a-z ]+)\">5</td>", in: html).first?[1])
        let colour = Self.cellColour(
            cellClasses: missingCell.split(separator: " ").map(String.init), rowClass: nil, in: html)
        #expect(colour.map(Self.hue) == "red", "\(missingCell)")
    }

    /// EUR and USD revenue shared one bar scale: a EUR flight of 1.00 drew no bar next to 10,000.00 USD.
    @Test func currenciesDoNotShareABarScale() throws {
        let flights = FlightReports(flights: [
            FlightReport(
                flight: flightA, currency: "EUR", orders: 1, revenue: 100,
                items: [.init(name: "Tea", count: 1, revenue: 100)],
                bags: .init(checked: 0, departed: 0, arrived: 0, missing: 0, weight: 0, conflicts: 0)),
            FlightReport(
                flight: flightB, currency: "USD", orders: 1, revenue: 1_000_000,
                items: [.init(name: "Gin", count: 1, revenue: 1_000_000)],
                bags: .init(checked: 0, departed: 0, arrived: 0, missing: 0, weight: 0, conflicts: 0)),
        ])
        let html = ReportRenderer().render(.flights(flights), as: .html)
        let eur = try #require(Self.bar(after: flightA.rawValue, in: html))
        let usd = try #require(Self.bar(after: flightB.rawValue, in: html))
        #expect(eur.width == usd.width && eur.width > 300, "EUR \(eur.width) px, USD \(usd.width) px")

        let items = ItemReport(items: [
            .init(name: "Tea", currency: "EUR", count: 1, revenue: 100, flights: 1),
            .init(name: "Gin", currency: "USD", count: 1, revenue: 1_000_000, flights: 1),
        ])
        let page = ReportRenderer().render(.items(items), as: .html)
        // Each revenue chart has its own largest bar: both full.
        let revenueBars = Self.matches(
            "(?s)aria-label=\"Revenue by item[^\"]*\">(.*?)</svg>", in: page
        ).flatMap { Self.matches("<rect [^>]*width=\"(\\d+)\"", in: $0[1]).map { Int($0[1]) ?? -1 } }
        #expect(revenueBars.count == 2 && revenueBars.allSatisfy { $0 > 300 }, "\(revenueBars)")
    }

    /// One global scale made a small flight's 10 missing bags invisible next to a flight of 185,000: each flight's
    /// bars are shares of its own bags, with the percentage written.
    @Test func bagBarsArePerFlightShares() throws {
        let flights = FlightReports(flights: [
            FlightReport(
                flight: flightA, currency: "", orders: 0, revenue: 0, items: [],
                bags: .init(checked: 185_000, departed: 185_000, arrived: 185_000, missing: 0, weight: 1, conflicts: 0)),
            FlightReport(
                flight: flightB, currency: "", orders: 0, revenue: 0, items: [],
                bags: .init(checked: 20, departed: 20, arrived: 10, missing: 10, weight: 1, conflicts: 0)),
        ])
        let html = ReportRenderer().render(.flights(flights), as: .html)
        let half = Self.matches("<rect [^>]*width=\"(\\d+)\"[^>]*/><text[^>]*>10 \\(50%\\)</text>", in: html)
        #expect(half.count == 2, "flight B's arrived and missing bars are each half its bags")
        for match in half {
            let width = Int(match[1]) ?? 0
            #expect(width > 150 && width < 210, "\(width) px")
        }
        // Shares are not rounded into 0% or 100%.
        #expect(ReportTable.share(10, of: 185_000) == "10 (<0.1%)")
        #expect(ReportTable.share(184_990, of: 185_000) == "184,990 (>99.9%)")
        #expect(ReportTable.share(3, of: 1_300) == "3 (0.2%)" && ReportTable.share(0, of: 5) == "0 (0%)")
    }

    /// Ids and timestamps never wrap inside: their cells' classes are `white-space: nowrap`.
    @Test func idsAndTimestampsDoNotWrap() throws {
        let html = ReportRenderer(generatedAt: date(0), lastCommit: date(-60)).render(
            .luggage(Self.luggage()), as: .html)
        let stamps = Self.matches("<td( class=\"([a-z ]+)\")?>(\\d{4}-\\d\\d-\\d\\dT[^<]*)</td>", in: html)
        #expect(!stamps.isEmpty)
        for stamp in stamps {
            let nowrap = stamp[2].split(separator: " ").contains {
                Self.declarations(of: "td.\($0)", in: html)?.contains("white-space: nowrap") == true
            }
            #expect(nowrap, "\(stamp[0]) may wrap")
        }
        // A status (`in-transit`) does not break at its hyphen either.
        #expect(Self.declarations(of: "td.status", in: html)?.contains("white-space: nowrap") == true)
        #expect(html.contains("<td class=\"status neutral\">in-transit</td>"))
        let tags = Self.matches("<td( class=\"([a-z ]+)\")?>00000000-[^<]*</td>", in: html)
        #expect(!tags.isEmpty && tags.allSatisfy { $0[2].split(separator: " ").contains("id") })
    }

    /// A luggage page for 185,000 bags was 37 MB: the page lists the first 1,000, missing first, and says how many
    /// more there are and of which status.
    @Test func aLuggagePageFor185000BagsStaysSmall() throws {
        let missing = 1_500
        let rows = (0..<185_000).map { Self.bag($0, flight: flightA, status: $0 < missing ? .missing : .arrived) }
        let html = ReportRenderer(generatedAt: date(0)).render(.luggage(LuggageReport(bags: rows)), as: .html)
        #expect(html.utf8.count < 1_000_000, "\(html.utf8.count) bytes")
        #expect(html.contains("184,000 more not listed (500 missing, 183,500 arrived)"), "\(html.suffix(800))")
        #expect(Self.matches("<tr class=\"", in: html).count == 1_000)
        #expect(Self.statusRow("arrived", in: html) == nil, "missing bags first: 1,500 of them fill the page")
        #expect(html.contains("185,000"))
    }

    /// With the console configured, the page names it and a flight's page on it; without, it names none.
    @Test func aCutLuggagePageNamesTheConsoleWhenConfigured() throws {
        let rows = (0..<1_200).map { Self.bag($0, flight: flightA, status: $0 < 10 ? .missing : .arrived) }
        let report = Report.luggage(LuggageReport(bags: rows))
        let html = ReportRenderer(console: "127.0.0.1:9570").render(report, as: .html)
        #expect(html.contains("200 more not listed (200 arrived)"))
        #expect(html.contains("<code>serve --console 127.0.0.1:9570</code>"), "\(html.suffix(600))")
        #expect(html.contains("<code>/flight?flight=ZA101/2026-11-21</code>"))
        #expect(html.contains("<code>report luggage --format csv</code>"))
        let plain = ReportRenderer().render(report, as: .html)
        #expect(plain.contains("200 more not listed") && !plain.contains("console"))
        #expect(!html.contains("href="), "still no links: the page is for printing and mail")
        // Other formats list every bag.
        #expect(ReportRenderer().render(report, as: .csv).split(separator: "\r\n").count == 1_201)
    }
}
