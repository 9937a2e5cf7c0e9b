/// One line of an order: an item (as priced when sold) and how many, 1–99.
public struct LineItem: Codable, Hashable, Sendable {
    public var item: Item
    public var count: Int

    /// Most of one item on one order.
    public static let maxCount = 99

    public init(item: Item, count: Int) {
        self.item = item
        self.count = count
    }

    public static let example = LineItem(item: .example, count: 2)

    /// `unitPrice × count` in minor units.
    /// - Throws: ``ValidationError`` with code `overflow`.
    public var price: Int {
        get throws { try Money.multiply(item.unitPrice, count, what: "the price of \(count) × \(item.name)") }
    }

    /// Checks the item and that the count is 1–99.
    /// - Throws: ``ValidationError``.
    public func validate(path: @autoclosure () -> String = "") throws {
        try item.validate(path: path().isEmpty ? "item" : path() + ".item")
        guard (1...Self.maxCount).contains(count) else {
            throw ValidationError(
                .invalidCount, "count \(count) for '\(item.name)' is out of range; use 1–\(Self.maxCount)",
                path: path().isEmpty ? "count" : path() + ".count")
        }
    }
}
