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

    /// Highest accepted unit price in minor units: 100,000,000 (1,000,000.00 USD). With at most
    /// ``LineItem/maxCount`` of an item per line and ``Order/maxLines`` lines per order, an order is at most
    /// 6.336 × 10¹¹ minor units, so a seat, flight or item total stays exact (below `Int64.max`, 9.22 × 10¹⁸) for
    /// more than 14 million such orders (docs/PROTOCOL.md shows the arithmetic).
    public static let maxUnitPrice = 100_000_000

    /// Checks the name (1–64 characters, no surrounding spaces, nothing ``Validation/forbiddenCharacter(in:)``
    /// refuses) and that the price is 0…``maxUnitPrice``.
    /// - Throws: ``ValidationError`` with code `invalidItemName`, `negativePrice` or `invalidPrice`.
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
                .negativePrice,
                "item '\(Validation.visible(name))' has a negative price \(unitPrice); prices are minor units ≥ 0",
                path: prefix() + "unitPrice")
        }
        guard unitPrice <= Self.maxUnitPrice else {
            throw ValidationError(
                .invalidPrice,
                "item '\(Validation.visible(name))' has a price of \(unitPrice); the highest accepted unit price is "
                    + "\(Self.maxUnitPrice) minor units",
                path: prefix() + "unitPrice")
        }
    }

    private func validateUnicodeName(path: String) throws {
        let field = path.isEmpty ? "name" : path + ".name"
        let scalars = name.unicodeScalars
        if name.utf8.count <= 4 * Self.maxNameLength, let bad = Validation.forbiddenCharacter(in: name) {
            throw ValidationError(
                .invalidItemName,
                "invalid item name '\(Validation.visible(name.prefix(80)))': it contains \(Validation.describe(bad)); "
                    + "names are printable text",
                path: field)
        }
        guard let first = scalars.first, let last = scalars.last, name.utf8.count <= 4 * Self.maxNameLength,
            !first.properties.isWhitespace, !last.properties.isWhitespace, name.count <= Self.maxNameLength
        else {
            throw ValidationError(
                .invalidItemName,
                "invalid item name '\(Validation.visible(name.prefix(80)))': use 1–\(Self.maxNameLength) printable characters without leading or trailing spaces",
                path: field)
        }
    }
}
