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
    public func validate(path: @autoclosure () -> String = "") throws {
        func prefix() -> String { path().isEmpty ? "" : path() + "." }
        // The byte bound comes first so a hostile name costs at most a few hundred bytes of scanning; this runs for
        // every line of every record the aggregator receives.
        let utf8 = name.utf8
        if let first = utf8.first, let last = utf8.last, first != 0x20, last != 0x20, utf8.count <= Self.maxNameLength,
            utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F })
        {
            // Printable ASCII, the usual case: one byte per character, nothing more to check for the name.
        } else {
            try validateUnicodeName(path: path())
        }
        guard unitPrice >= 0 else {
            throw ValidationError(
                .negativePrice, "item '\(name)' has a negative price \(unitPrice); prices are minor units ≥ 0",
                path: prefix() + "unitPrice")
        }
    }

    private func validateUnicodeName(path: String) throws {
        let scalars = name.unicodeScalars
        guard let first = scalars.first, let last = scalars.last, name.utf8.count <= 4 * Self.maxNameLength,
            !first.properties.isWhitespace, !last.properties.isWhitespace, name.count <= Self.maxNameLength,
            !scalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw ValidationError(
                .invalidItemName,
                "invalid item name '\(name.prefix(80))': use 1–\(Self.maxNameLength) printable characters without leading or trailing spaces",
                path: path.isEmpty ? "name" : path + ".name")
        }
    }
}
