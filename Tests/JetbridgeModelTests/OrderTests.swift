import Foundation
import JetbridgeModel
import Testing

@Suite struct OrderTests {
    let inventory = Inventory.example

    func make(
        _ lines: [(name: String, count: Int)], seat: String = "17B", flight: String = "ZA101/2026-11-21",
        inventory: Inventory? = nil, device: String = "galley-1", revision: Int = 1
    ) throws -> Order {
        try Order.make(
            id: uuid(1), revision: revision, flight: flight, seat: seat, lines: lines,
            inventory: inventory ?? self.inventory, createdAt: date(0), device: device)
    }

    @Test func makesAValidOrder() throws {
        let order = try make([("Peanuts", 2), ("chips", 1), ("Popcorn", 0)], seat: "17b")
        #expect(
            order.lineItems == [
                LineItem(item: Item(name: "Peanuts", unitPrice: 200), count: 2),
                LineItem(item: Item(name: "Chips", unitPrice: 300), count: 1),
            ])
        #expect(try order.total == 700)
        #expect(try order.lineItems[0].price == 400)
        #expect(order.seat.rawValue == "17B")
        #expect(order.currency == "USD")
        #expect(order.revision == 1)
        try order.validate()
        try order.validate(against: inventory)
    }

    @Test func sameItemTwiceIsOneLine() throws {
        let order = try make([("Chips", 2), ("Peanuts", 1), ("CHIPS", 3)])
        #expect(order.lineItems.map(\.count) == [5, 1])
        let error = expectValidation(.invalidCount) { _ = try make([("Chips", 60), ("Chips", 40)]) }
        #expect(error?.message == "'Chips' adds up to 100; use at most 99 of one item per order")
    }

    @Test func unknownItem() {
        let error = expectValidation(.unknownItem) { _ = try make([("Peanuts", 1), ("Caviar", 1)]) }
        #expect(error?.message == "unknown item 'Caviar'; the menu has: Peanuts, Chips, Popcorn")
    }

    @Test(arguments: [-1, 100, Int.max, Int.min])
    func countOutOfRange(count: Int) {
        let error = expectValidation(.invalidCount) { _ = try make([("Chips", count)]) }
        #expect(error?.path == "lines[0].count")
    }

    @Test func countBoundaries() throws {
        #expect(try make([("Chips", 99)]).lineItems[0].count == 99)
        #expect(try make([("Chips", 1)]).lineItems[0].count == 1)
    }

    @Test func emptyOrders() {
        let zero = expectValidation(.emptyOrder) { _ = try make([("Chips", 0)]) }
        #expect(zero?.message == "the order has no items; add at least one item with a count of 1 or more")
        expectValidation(.emptyOrder) { _ = try make([]) }
    }

    @Test func seatFlightDeviceRevision() {
        expectValidation(.invalidSeat) { _ = try make([("Chips", 1)], seat: "17I") }
        expectValidation(.invalidFlight) { _ = try make([("Chips", 1)], flight: "ZA101") }
        expectValidation(.invalidDevice) { _ = try make([("Chips", 1)], device: "") }
        expectValidation(.invalidDevice) { _ = try make([("Chips", 1)], device: "galley 1") }
        expectValidation(.invalidDevice) { _ = try make([("Chips", 1)], device: String(repeating: "d", count: 65)) }
        expectValidation(.invalidRevision) { _ = try make([("Chips", 1)], revision: 0) }
    }

    /// Issue 16, item 4: two valid orders at 2^62 each overflowed their flight's revenue.
    @Test func pricesAndLinesAreBoundedSoNoTotalCanOverflow() throws {
        let pricey = Inventory(
            currency: "USD",
            items: [.init(name: "Jet", unitPrice: Item.maxUnitPrice), .init(name: "Gum", unitPrice: 1)])
        let top = try make([("Jet", LineItem.maxCount)], inventory: pricey)
        #expect(try top.total == 9_900_000_000)
        let tooDear = Inventory(currency: "USD", items: [.init(name: "Jet", unitPrice: 1 << 62)])
        let price = expectValidation(.invalidPrice) { try tooDear.validate() }
        #expect(price?.path == "items[0].unitPrice")
        expectValidation(.invalidPrice) { _ = try make([("Jet", 1)], inventory: tooDear) }
        // The most one order can hold, times the orders it takes to overflow: over 14 million.
        let maxOrder = Order.maxLines * LineItem.maxCount * Item.maxUnitPrice
        #expect(maxOrder == 633_600_000_000)
        #expect(Int.max / maxOrder > 14_000_000)
        let menu = Inventory(
            currency: "USD", items: (0...Order.maxLines).map { Item(name: "Item \($0)", unitPrice: Item.maxUnitPrice) })
        let lines = (0..<Order.maxLines).map { (name: "Item \($0)", count: LineItem.maxCount) }
        #expect(try make(lines, inventory: menu).total == maxOrder)
        let tooMany = expectValidation(.tooManyLines) { _ = try make(lines + [("Item 64", 1)], inventory: menu) }
        #expect(tooMany?.path == "lineItems")
    }

    @Test func amendKeepsIdentityAndRaisesRevision() throws {
        let first = try make([("Chips", 1)])
        let second = try first.amended(lines: [("Chips", 2), ("Popcorn", 1)], inventory: inventory, device: "galley-2")
        #expect(second.id == first.id)
        #expect(second.revision == 2)
        #expect(second.createdAt == first.createdAt)
        #expect(second.flight == first.flight)
        #expect(second.seat == first.seat)
        #expect(second.device == "galley-2")
        #expect(try second.total == 1000)
        let moved = try second.amended(lines: [("Chips", 1)], inventory: inventory, seat: "18c")
        #expect(moved.seat.rawValue == "18C")
        #expect(moved.revision == 3)
        expectValidation(.emptyOrder) { _ = try first.amended(lines: [("Chips", 0)], inventory: inventory) }
        var last = first
        last.revision = Int.max
        expectValidation(.overflow) { _ = try last.amended(lines: [("Chips", 1)], inventory: inventory) }
    }

    @Test func validateCatchesBadDecodedOrders() throws {
        var order = Order.example
        try order.validate()
        order.lineItems[1].count = 0
        let count = expectValidation(.invalidCount) { try order.validate() }
        #expect(count?.path == "lineItems[1].count")
        #expect(count?.description == "lineItems[1].count: count 0 for 'Chips' is out of range; use 1–99")

        order = .example
        order.lineItems.append(order.lineItems[0])
        expectValidation(.duplicateItem) { try order.validate() }
        order = .example
        order.lineItems = []
        expectValidation(.emptyOrder) { try order.validate() }
        order = .example
        order.lineItems[0].item.unitPrice = -5
        expectValidation(.negativePrice) { try order.validate() }
        order = .example
        order.revision = -1
        expectValidation(.invalidRevision) { try order.validate() }
        order = .example
        order.currency = "dollars"
        expectValidation(.invalidCurrency) { try order.validate() }
        order = .example
        order.createdAt = Date(timeIntervalSince1970: .nan)
        expectValidation(.invalidDate) { try order.validate() }
        order = .example
        order.lineItems[0].item.name = "Caviar"
        try order.validate()
        let unknown = expectValidation(.unknownItem) { try order.validate(against: inventory) }
        #expect(unknown?.path == "lineItems[0].item.name")
        order = .example
        expectValidation(.currencyMismatch) {
            try order.validate(against: Inventory(currency: "EUR", items: inventory.items))
        }
    }

    @Test func highestRevisionWins() throws {
        let r1 = try make([("Chips", 1)])
        let r2 = try r1.amended(lines: [("Chips", 2)], inventory: inventory)
        var r2other = r2
        r2other.device = "galley-9"
        #expect(Order.merge(existing: nil, incoming: r1) == r1)
        #expect(Order.merge(existing: r1, incoming: r2) == r2)
        #expect(Order.merge(existing: r2, incoming: r1) == r2)
        #expect(Order.merge(existing: r2, incoming: r2other) == r2)
        let other = try Order.make(
            id: uuid(2), flight: "ZA101/2026-11-21", seat: "1A", lines: [("Peanuts", 1)], inventory: inventory,
            createdAt: date(1), device: "galley-1")
        #expect(Order.latestRevisions([r1, other, r2, r1]) == [r2, other])
        #expect(Order.latestRevisions([r2, r1, other]) == [r2, other])
    }
}

/// Issue 16, item 8: device ids that cannot be mistaken for a path, an option or a reserved name.
@Suite struct DeviceIDTests {
    @Test(arguments: [
        "", ".", "..", "...", ".hidden", "-x", "_x", "cart.", "CON", "con", "Prn", "AUX", "NUL", "nul.txt", "COM1",
        "com9", "LPT0", "lpt3.log", "a/b", "a b", "a\u{202E}b", String(repeating: "d", count: 65),
    ])
    func refused(id: String) {
        let error = expectValidation(.invalidDevice) { try Validation.deviceID(id) }
        #expect(error?.message.unicodeScalars.contains { Validation.isForbidden($0) } == false)
    }

    @Test(arguments: ["cart-1", "galley_2", "a", "9W.ramp", "CONSOLE", "COM10", "CO", "LPT", "nul-1", "x.y.z"])
    func accepted(id: String) throws {
        try Validation.deviceID(id)
    }
}
