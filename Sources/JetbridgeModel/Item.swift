import Foundation

/// One thing on the menu, priced in minor units of the inventory's currency.
public struct Item: Codable, Hashable, Sendable {
    public var name: String
    public var unitPrice: Int

    public init(name: String, unitPrice: Int) {
        self.name = name
        self.unitPrice = unitPrice
    }

    public static let example = Item(name: "Peanuts", unitPrice: 200)

    /// Longest accepted item name.
    public static let maxNameLength = 64

    /// Checks the name (1–64 characters, no surrounding spaces, no control characters) and that the price is ≥ 0.
    /// - Throws: ``ValidationError`` with code `invalidItemName` or `negativePrice`.
    public func validate(path: String = "") throws {
        let prefix = path.isEmpty ? "" : path + "."
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !name.isEmpty, trimmed == name, name.count <= Self.maxNameLength,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw ValidationError(
                .invalidItemName,
                "invalid item name '\(name.prefix(80))': use 1–\(Self.maxNameLength) printable characters without leading or trailing spaces",
                path: prefix + "name")
        }
        guard unitPrice >= 0 else {
            throw ValidationError(
                .negativePrice, "item '\(name)' has a negative price \(unitPrice); prices are minor units ≥ 0",
                path: prefix + "unitPrice")
        }
    }
}
