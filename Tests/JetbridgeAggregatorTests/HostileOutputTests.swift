import Foundation
import JetbridgeTestKit
import GRDB
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Logging
import MessagePack
import Testing

/// Writes orders straight into the store's tables, as a store written before today's ground rules could hold them
/// (two currencies on one flight, totals that overflow, device text with control characters), marking their seats
/// for receipts as `apply` does.
func insertRaw(_ records: [JetbridgeModel.Record], into fixture: Fixture) throws {
    let queue = try DatabaseQueue(path: fixture.storePath)
    defer { try? queue.close() }
    let encoder = MessagePackEncoder()
    try queue.write { db in
        for case .order(let order) in records {
            let id = withUnsafeBytes(of: order.id.uuid) { Data($0) }
            try db.execute(
                sql: "INSERT INTO orders (id, revision, flight, seat, device, record) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    id, order.revision, order.flight.rawValue, order.seat.rawValue, order.device,
                    try encoder.encode(JetbridgeModel.Record.order(order)),
                ])
            try db.execute(
                sql: """
                    INSERT INTO dirty_receipts (flight, seat, generation) VALUES (?, ?, 1)
                    ON CONFLICT (flight, seat) DO UPDATE SET generation = generation + 1
                    """,
                arguments: [order.flight.rawValue, order.seat.rawValue])
        }
    }
}

/// An order with one line of `item` × `count`, in `currency`.
func rawOrder(
    _ n: Int, flight: FlightID = flightA, seat: String = "17B", item: Item, count: Int = 1, currency: String = "USD",
    device: String = "cart-1"
) -> JetbridgeModel.Record {
    .order(
        Order(
            id: uuid(n), revision: 1, flight: flight, seat: try! Seat(seat),
            lineItems: [LineItem(item: item, count: count)], currency: currency, createdAt: date(Double(n)),
            device: device))
}

@Suite("Hostile device text and bad stored data never hijack or break an output (issues 10 and 16)")
struct HostileOutputTests {
    static let formulas = ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1:A2)", "\tTab", "\rCR"]

    /// Issue 16, defect 1: every text cell a spreadsheet would run as a formula gets a leading `'`; numbers, negative
    /// ones included, do not.
    @Test func csvNeutralisesFormulasInEveryTextCell() throws {
        let items = ItemReport(
            items: Self.formulas.enumerated().map {
                .init(name: $0.element, currency: "USD", count: -$0.offset - 1, revenue: -100, flights: 1)
            })
        let csv = ReportRenderer().render(.items(items), as: .csv)
        let lines = csv.components(separatedBy: "\r\n").dropFirst().filter { !$0.isEmpty }
        #expect(lines.count == Self.formulas.count)
        for line in lines {
            #expect(line.hasPrefix("'") || line.hasPrefix("\"'"), "\(line)")
            #expect(line.contains(",USD,-"), "numbers stay numbers: \(line)")
        }
        #expect(csv.contains("'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")"))
        #expect(csv.contains("'@SUM(A1:A2),USD,-4,-100,1,"))
        #expect(csv.contains(#"'\u{9}Tab,"#))
        #expect(csv.contains(#"'\u{D}CR,"#))

        let devices = DeviceReport(devices: [
            DeviceStatistics(
                device: "cart-1", lastSync: nil, batches: 0, records: 0, new: 0, duplicates: 0, rejects: 1,
                lastRejectAt: nil, lastRejectReason: "=cmd|' /C calc'!A0")
        ])
        #expect(ReportRenderer().render(.devices(devices), as: .csv).hasSuffix(",0,1,'=cmd|' /C calc'!A0,0\r\n"))
    }

    static let hostileName = "Pea\u{1B}[2J\u{07}nuts\u{202E}00.2\u{200B}\r\n\u{2028}"
    static let escapedName = #"Pea\u{1B}[2J\u{7}nuts\u{202E}00.2\u{200B}\u{D}\u{A}\u{2028}"#

    /// Issue 16, defects 2 and 3: no raw control, bidi, zero-width or separator character reaches a table, CSV cell,
    /// HTML page, JSON document or receipt.
    @Test func everyOutputShowsDeviceTextInert() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        try insertRaw(
            [rawOrder(1, item: Item(name: Self.hostileName, unitPrice: 200), device: "cart-1")], into: fixture)
        try store.recordRejection(device: "cart-1", reason: "record 0: item name '\u{1B}]0;pwned\u{07}' is bad")
        func isInert(_ text: String) -> Bool {
            !text.unicodeScalars.contains {
                ($0.value < 0x20 && $0 != "\n" && $0 != "\r")
                    || [0x7F, 0x9B, 0x202E, 0x200B, 0x2028].contains($0.value)
            }
        }
        for kind in ReportKind.allCases {
            let report = try store.report(kind)
            for format in ReportFormat.allCases {
                let text = ReportRenderer().render(report, as: format)
                #expect(isInert(text), "\(kind) as \(format): \(text.debugDescription)")
                // Lines end where the format ends them, never inside device text.
                if format != .html, kind == .items {
                    #expect(text.contains(format == .json ? "\\r\\n\\u2028" : Self.escapedName), "\(kind) \(format)")
                }
            }
        }
        let devices = ReportRenderer().render(try store.report(.devices), as: .table)
        // Escaped in the table (which cuts a reason at 40 characters, issue 28) and whole in the other formats.
        #expect(devices.contains(#"record 0: item name '\u{1B}]0;pwned\u{7"#), "\(devices)")
        let devicesCSV = ReportRenderer().render(try store.report(.devices), as: .csv)
        #expect(devicesCSV.contains(#"record 0: item name '\u{1B}]0;pwned\u{7}' is bad"#), "\(devicesCSV)")

        try fixture.writer().refreshDirty(store)
        let text = try String(
            contentsOf: fixture.receipts.appendingPathComponent("ZA101_2026-11-21_17B.txt"), encoding: .utf8)
        #expect(isInert(text.replacingOccurrences(of: "\n", with: "")))
        #expect(text.contains("  " + Self.escapedName + "  1 x 2.00  2.00\n"))
        // The receipt's JSON escapes what JSON must, as JSONEncoder does.
        let json = try Data(contentsOf: fixture.receipts.appendingPathComponent("ZA101_2026-11-21_17B.json"))
        #expect(!json.contains(0x1B) && !json.contains(0x07) && !json.contains(0x0D))
    }

    /// A batch rejected for its device's text carries that text inert into the ack, the log and the store.
    @Test func rejectionReasonsAreInert() {
        let rejection = BatchRejection(
            status: .rejected, header: nil, index: 3, reason: "item name 'x\u{1B}[31m\r\u{07}' is invalid")
        #expect(rejection.reason == #"item name 'x\u{1B}[31m\u{D}\u{7}' is invalid"#)
        #expect(!rejection.description.unicodeScalars.contains { $0.value < 0x20 })
        let error = ValidationError(.invalidItemName, "item name 'a\u{202E}b\u{1B}' is not allowed", path: "x")
        #expect(error.description == #"x: item name 'a\u{202E}b\u{1B}' is not allowed"#)
    }

    /// Issue 10 defect 3 and issue 16 defect 4: a flight in two currencies and a flight whose revenue overflows are
    /// each one error row; the other flights print, in every format, and so does the items report.
    @Test func aFlightThatCannotBeTotalledIsOneErrorRowAndTheRestPrint() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let flightC = try FlightID("ZA103/2026-11-21")
        let jet = Item(name: "Jet", unitPrice: 1 << 62)
        try insertRaw(
            [
                rawOrder(1, flight: flightA, item: peanuts), rawOrder(2, flight: flightA, seat: "3A", item: chips),
                rawOrder(3, flight: flightB, item: peanuts),
                rawOrder(4, flight: flightB, seat: "3A", item: peanuts, currency: "EUR"),
                rawOrder(5, flight: flightC, item: jet), rawOrder(6, flight: flightC, seat: "3A", item: jet),
            ], into: fixture)
        _ = try store.apply([batch("ramp-1", 1, [scan(10, tag: 1, flight: flightB)])])

        let flights = try store.flightReports().flights
        #expect(flights.map(\.flight) == [flightA, flightB, flightC])
        #expect(flights[0].error == nil && flights[0].revenue == 500)
        #expect(flights[1].error?.contains("EUR and USD") == true)
        #expect(flights[1].bags.checked == 1 && flights[1].orders == 2)
        #expect(flights[2].error?.contains("overflow") == true)

        let json = ReportRenderer().render(.flights(FlightReports(flights: flights)), as: .json)
        #expect(json.contains(#""flight":"ZA101/2026-11-21","currency":"USD","orders":2,"revenue":500,"#))
        #expect(json.contains(#""flight":"ZA102/2026-11-21","currency":"","orders":2,"revenue":null,"items":[],"#))
        #expect(json.contains(#""error":"#))
        #expect(try JSONDecoder().decode(FlightReports.self, from: Data(json.utf8)).flights == flights)
        let table = ReportRenderer().render(.flights(FlightReports(flights: flights)), as: .table)
        #expect(table.contains("Error"))
        #expect(table.split(separator: "\n").count == 5)
        let csv = ReportRenderer().render(.flights(FlightReports(flights: flights)), as: .csv)
        #expect(csv.hasPrefix("flight,currency,orders,revenueMinorUnits,"))
        #expect(csv.contains("\r\nZA102/2026-11-21,,2,,1,1,1,0,0,"))
        let html = ReportRenderer().render(.flights(FlightReports(flights: flights)), as: .html)
        #expect(html.contains("EUR and USD"))

        let items = try store.itemReport()
        #expect(items.items.map(\.name) == ["Chips", "Peanuts", "", ""])
        #expect(items.items[1].revenue == 200 && items.items[1].error == nil)
        #expect(items.items[2].error?.contains("ZA102/2026-11-21 is left out") == true)
        for format in ReportFormat.allCases {
            _ = ReportRenderer().render(.items(items), as: format)
        }
        #expect(ReportRenderer().render(.items(items), as: .json).contains(#""revenue":null,"flights":1,"error":"#))
    }

    /// An item sold at 2^62 on two sound flights: each flight totals, their sum would overflow; the items report
    /// flags that row and prints the rest.
    @Test func anItemTotalThatWouldOverflowIsFlagged() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let jet = Item(name: "Jet", unitPrice: 1 << 62)
        try insertRaw(
            [
                rawOrder(1, flight: flightA, item: jet), rawOrder(2, flight: flightB, item: jet),
                rawOrder(3, item: chips),
            ],
            into: fixture)
        let items = try store.itemReport()
        #expect(items.items.map(\.name) == ["Chips", "Jet"])
        #expect(items.items[0].error == nil)
        #expect(items.items[1].error?.contains("overflow") == true)
        #expect(items.items[1].revenue == 1 << 62)
        let table = ReportRenderer().render(.items(items), as: .table)
        #expect(table.contains("overflow"))
    }

    /// Receipts: the seats that cannot be made are listed with the reason; every other receipt is written.
    @Test func rebuildNamesTheSeatsWithoutReceiptAndWritesTheRest() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        try insertRaw(
            [
                rawOrder(1, seat: "10A", item: peanuts), rawOrder(2, seat: "17B", item: peanuts),
                rawOrder(3, seat: "17B", item: peanuts, currency: "EUR"), rawOrder(4, seat: "20C", item: chips),
            ], into: fixture)
        let summary = try fixture.writer().rebuildAll(store)
        #expect(summary.receipts == 2 && summary.written == 2 && summary.current == 0)
        #expect(summary.failed.map(\.seat.rawValue) == ["17B"])
        #expect(summary.failed.first?.reason.contains("EUR and USD") == true)
        let again = try fixture.writer().rebuildAll(store)
        #expect(again.written == 0 && again.current == 2 && again.failed.count == 1)
    }
}

@Suite("HTML reports at real sizes (issue 10)")
struct HTMLReportTests {
    @Test func statesItsTimesGroupsThousandsAndHasLegends() throws {
        let flights = FlightReports(flights: [
            FlightReport(
                flight: flightA, currency: "USD", orders: 12_345, revenue: 123_456_789, items: [],
                bags: .init(checked: 4_000, departed: 4_000, arrived: 3_000, missing: 1_000, weight: 1.5, conflicts: 0)),
            FlightReport(
                flight: flightB, currency: "", orders: 0, revenue: 0, items: [],
                bags: .init(checked: 2, departed: 2, arrived: 0, missing: 2, weight: 1, conflicts: 0)),
        ])
        let renderer = ReportRenderer(generatedAt: date(0), lastCommit: date(-60))
        let html = renderer.render(.flights(flights), as: .html)
        #expect(
            html.contains(
                "Generated <time>2026-11-20T18:40:00Z</time>; data as of the last commit at <time>2026-11-20T18:39:00Z</time>."
            ))
        #expect(html.contains(">12,345<") && html.contains(">1,234,567.89<") && html.contains(">4,000<"))
        #expect(html.contains("<g class=\"legend\">") && html.contains(">in transit</text>"))
        #expect(html.contains("<td class=\"id\">ZA101/2026-11-21</td>"))
        #expect(html.contains("td.id { white-space: nowrap;"))
        // One vocabulary: flight B has no arrivals, so its departed bags are in transit, not missing.
        let table = ReportRenderer().render(.flights(flights), as: .table)
        let rowB = try #require(table.split(separator: "\n").first { $0.hasPrefix("ZA102") })
        #expect(
            rowB.split(separator: " ", omittingEmptySubsequences: true).map(String.init)[0...7]
                == ["ZA102/2026-11-21", "-", "0", "0.00", "2", "2", "2", "0"])
        #expect(
            ReportRenderer(generatedAt: date(0)).render(.flights(flights), as: .html).contains("no batch committed yet")
        )

        var luggage: [LuggageReport.Row] = []
        for status in BagStatus.allCases {
            luggage.append(.init(bag: BagState(scan: .example), status: status))
        }
        let page = renderer.render(.luggage(LuggageReport(bags: luggage)), as: .html)
        #expect(page.contains(">missing</text>") && page.contains(">in-transit</text>"))
    }
}

@Suite("serve: device text in warnings, acks and the devices report is inert (issue 16 defect 3)")
struct InertServeTests {
    @Test func aRejectedRecordQuotingEscapesIsLoggedAckedAndStoredInert() async throws {
        let key = UUID().uuidString
        let logger = Logger(label: "test", factory: { _ in CapturingLogHandler(key: key) })
        let fixture = try ServerFixture(logger: logger)
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        // A record that names another device, whose id carries ESC, CR and BEL: the reason quotes it.
        guard case .order(var hostile) = order(1) else { return }
        hostile.device = "evil\u{1B}[2J\r\u{07}"
        let payload = try MessagePackEncoder().encode(JetbridgeModel.Record.order(hostile))
        try device.send(OutgoingBatch(device: "cart-1", records: [(sequence: 1, payload: payload)]))
        let ack = try #require(try await device.ack())
        #expect(ack.status == .rejected)
        let reason = try #require(ack.reason)
        #expect(reason.contains(#"evil\u{1B}[2J\u{D}\u{7}"#), "\(reason)")
        try await waitUntil("the rejection is counted") {
            try fixture.server.store.deviceReport().devices.first?.rejects == 1
        }
        let stored = try #require(try fixture.server.store.deviceReport().devices.first?.lastRejectReason)
        await fixture.stop()
        let lines = CapturingLogHandler.lines(key)
        let refused = try #require(lines.first { $0.contains("batch refused") })
        for text in [reason, stored, refused] {
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }, "\(text.debugDescription)")
        }
        #expect(refused.contains(#"\u{1B}[2J"#), "\(refused)")
    }
}
