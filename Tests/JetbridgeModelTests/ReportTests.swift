import Foundation
import JetbridgeModel
import Testing

/// A small flight with totals worked out by hand.
enum Fixture {
    static let inventory = Inventory.example
    static let za102 = try! FlightID("ZA102/2026-11-22")

    static func order(
        _ n: Int, seat: String, _ lines: [(name: String, count: Int)], flight: String = "ZA101/2026-11-21",
        at seconds: Double
    ) -> Order {
        try! Order.make(
            id: uuid(n), flight: flight, seat: seat, lines: lines, inventory: inventory, createdAt: date(seconds),
            device: "galley-1")
    }

    static let a1 = order(1, seat: "17B", [("Peanuts", 2), ("Chips", 1)], at: 10)  // 700, superseded
    static let a2 = try! a1.amended(lines: [("Peanuts", 1), ("Popcorn", 2)], inventory: inventory)  // 1000
    static let b = order(2, seat: "17B", [("Chips", 3)], at: 20)  // 900
    static let c = order(3, seat: "2A", [("Popcorn", 1)], at: 5)  // 400
    static let d = order(4, seat: "17B", [("Chips", 1)], flight: "ZA102/2026-11-22", at: 30)  // other flight
    static let orders = [a1, b, a2, c, d, a1]

    static let conflicting = try! Owner(initial: "Q", family: "XYZ")
    static let scans: [Scan] = [
        BagStateTests.scan(1, .origin, at: 1, weight: 42.3, tag: uuid(101)),
        BagStateTests.scan(2, .destination, at: 9, weight: 42.3, tag: uuid(101)),
        BagStateTests.scan(3, .origin, at: 2, weight: 10.1, tag: uuid(102)),
        BagStateTests.scan(4, .destination, at: 8, weight: 20, tag: uuid(103)),
        BagStateTests.scan(5, .destination, at: 7, owner: conflicting, weight: 19, tag: uuid(103)),
        BagStateTests.scan(6, .origin, at: 3, weight: 5, tag: uuid(104), flight: za102),
    ]
    static let bags = BagState.bags(from: scans)
}

@Suite struct ReportTests {
    @Test func flightTotalsMatchHandComputedValues() throws {
        let report = try FlightReport(flight: .example, orders: Fixture.orders, bags: Fixture.bags)
        #expect(
            report
                == FlightReport(
                    flight: .example, currency: "USD", orders: 3, revenue: 2300,
                    items: [
                        .init(name: "Chips", count: 3, revenue: 900), .init(name: "Peanuts", count: 1, revenue: 200),
                        .init(name: "Popcorn", count: 3, revenue: 1200),
                    ],
                    bags: .init(checked: 3, departed: 2, arrived: 2, missing: 1, weight: 72.4, conflicts: 1)))
    }

    @Test func allFlightsAndOrderIndependence() throws {
        let reports = try FlightReport.all(orders: Fixture.orders, bags: Fixture.bags)
        #expect(reports.map(\.flight) == [.example, Fixture.za102])
        #expect(reports[1].revenue == 300)
        #expect(reports[1].bags == .init(checked: 1, departed: 1, arrived: 0, missing: 1, weight: 5, conflicts: 0))
        for _ in 0..<20 {
            let shuffled = try FlightReport.all(
                orders: Fixture.orders.shuffled(), bags: BagState.bags(from: Fixture.scans.shuffled()).shuffled())
            #expect(shuffled == reports)
        }
    }

    @Test func jsonMatchesTheDesign() throws {
        let document = FlightReports(flights: [
            try FlightReport(flight: .example, orders: Fixture.orders, bags: Fixture.bags)
        ])
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(
            String(decoding: try encoder.encode(document), as: UTF8.self)
                == #"{"flights":[{"bags":{"arrived":2,"checked":3,"conflicts":1,"departed":2,"missing":1,"weight":72.4},"currency":"USD","flight":"ZA101/2026-11-21","items":[{"count":3,"name":"Chips","revenue":900},{"count":1,"name":"Peanuts","revenue":200},{"count":3,"name":"Popcorn","revenue":1200}],"orders":3,"revenue":2300}]}"#
        )
        #expect(
            try KeyOrderRecorder.keys(of: document.flights[0]).filter { !$0.contains("[") } == [
                "flight", "currency", "orders", "revenue", "items", "bags", "bags.checked", "bags.departed",
                "bags.arrived", "bags.missing", "bags.weight", "bags.conflicts",
            ])
        #expect(try roundTrip(document) == document)
    }

    @Test func emptyFlight() throws {
        let report = try FlightReport(flight: .example, orders: [], bags: [])
        #expect(report.currency == "")
        #expect(report.orders == 0)
        #expect(report.items.isEmpty)
    }

    @Test func overflowAndCurrencyMismatch() throws {
        // Prices above Item.maxUnitPrice are refused at validation; a store may still hold them from before.
        let orders = try (1...3).map {
            Order(
                id: uuid($0), revision: 1, flight: .example, seat: try Seat("1A"),
                lineItems: [LineItem(item: Item(name: "Jet", unitPrice: Int.max / 2), count: 1)], currency: "USD",
                createdAt: Order.example.createdAt, device: "g")
        }
        expectValidation(.overflow) { _ = try FlightReport(flight: .example, orders: orders, bags: []) }
        expectValidation(.overflow) { _ = try Receipt(flight: .example, seat: Seat("1A"), orders: orders) }
        var euro = Fixture.c
        euro.id = uuid(50)
        euro.currency = "EUR"
        let mixed = expectValidation(.currencyMismatch) {
            _ = try FlightReport(flight: .example, orders: Fixture.orders + [euro], bags: [])
        }
        #expect(mixed?.message == "flight ZA101/2026-11-21 has orders in EUR and USD; one flight sells in one currency")
    }
}

@Suite struct ReceiptTests {
    @Test func oneSeat() throws {
        let receipt = try Receipt(flight: .example, seat: Seat("17B"), orders: Fixture.orders)
        #expect(receipt.orders.map(\.id) == [uuid(1), uuid(2)])
        #expect(receipt.orders.map(\.revision) == [2, 1])
        #expect(receipt.orders.map(\.subtotal) == [1000, 900])
        #expect(receipt.total == 1900)
        #expect(receipt.currency == "USD")
        #expect(receipt.fileStem == "ZA101_2026-11-21_17B")
        #expect(
            receipt.text == """
                Jetbridge receipt
                Flight: ZA101/2026-11-21
                Seat:   17B

                Order 00000000-0000-4000-8000-000000000001 (revision 2)
                2026-11-20T18:40:10Z, device galley-1
                  Peanuts   1 x 2.00   2.00
                  Popcorn   2 x 4.00   8.00
                  Subtotal            10.00

                Order 00000000-0000-4000-8000-000000000002 (revision 1)
                2026-11-20T18:40:20Z, device galley-1
                  Chips     3 x 3.00   9.00
                  Subtotal             9.00

                Total                 19.00 USD

                """)
        #expect(try roundTrip(receipt) == receipt)
    }

    @Test func allSeatsAndDeterminism() throws {
        let receipts = try Receipt.all(orders: Fixture.orders)
        #expect(receipts.map(\.fileStem) == ["ZA101_2026-11-21_2A", "ZA101_2026-11-21_17B", "ZA102_2026-11-22_17B"])
        let again = try Receipt.all(orders: Fixture.orders.reversed())
        #expect(again.map(\.text) == receipts.map(\.text))
        let reportRevenue = try FlightReport.all(orders: Fixture.orders, bags: []).map(\.revenue)
        #expect(reportRevenue == [receipts[0].total + receipts[1].total, receipts[2].total])
    }
}

@Suite struct MoneyTests {
    @Test(arguments: [
        (0, "USD", "0.00"), (5, "USD", "0.05"), (1234, "USD", "12.34"), (-1234, "USD", "-12.34"),
        (1234, "JPY", "1234"), (1234, "KWD", "1.234"), (Int.min, "USD", "-92233720368547758.08"),
        (Int.max, "USD", "92233720368547758.07"),
    ])
    func format(amount: Int, currency: String, text: String) {
        #expect(Money.format(amount, currency: currency) == text)
    }

    @Test func checkedArithmetic() throws {
        #expect(try Money.add(Int.max - 1, 1, what: "x") == Int.max)
        let error = expectValidation(.overflow) { _ = try Money.add(Int.max, 1, what: "the total") }
        #expect(
            error?.message == "the total overflows: 9223372036854775807 + 1 is beyond 9223372036854775807 minor units")
        expectValidation(.overflow) { _ = try Money.multiply(Int.max / 2 + 1, 2, what: "x") }
        #expect(try Money.multiply(Int.max / 2, 2, what: "x") == Int.max - 1)
    }
}

@Suite struct ExampleTests {
    @Test func fixturesAreValid() throws {
        try Inventory.example.validate()
        try Order.example.validate(against: .example)
        try Scan.example.validate()
        try Record.example.validate()
        #expect(FlightReport.example.revenue == 700)
        #expect(Receipt.example.total == 700)
        #expect(FlightReports.example.flights.count == 1)
        #expect(BagState.example.departedAt == Scan.example.scannedAt)
        #expect(Item.example.unitPrice == 200)
        #expect(LineItem.example.count == 2)
    }
}
