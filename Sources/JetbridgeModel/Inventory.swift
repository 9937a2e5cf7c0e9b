import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A flight's menu: the items on sale and the currency their prices are in.
///
/// Read from a property list (`config/Inventory.plist`, the seed format) or the same keys as JSON
/// (`config/Inventory.json`): a dictionary with `currency` (ISO 4217) and `items`, an array of `{name, unitPrice}`.
/// Item names are unique ignoring case, because lookups ignore case.
public struct Inventory: Codable, Hashable, Sendable {
    public var currency: String
    public var items: [Item]

    public init(currency: String, items: [Item]) {
        self.currency = currency
        self.items = items
    }

    /// The reference menu: Peanuts 200, Chips 300, Popcorn 400 (USD cents).
    public static let example = Inventory(
        currency: "USD",
        items: [
            Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300),
            Item(name: "Popcorn", unitPrice: 400),
        ])

    /// Decodes and validates a menu from property list bytes (XML or binary).
    /// - Throws: ``ValidationError`` (`malformedPropertyList`, `missingField`, `wrongType`, `invalidCurrency`,
    ///   `emptyMenu`, `invalidItemName`, `duplicateItem`, `negativePrice`).
    public init(plist data: Data) throws {
        guard !data.isEmpty else {
            throw ValidationError(
                .malformedPropertyList, "the inventory is empty; it must be a property list with 'currency' and 'items'"
            )
        }
        do {
            self = try PropertyListDecoder().decode(Inventory.self, from: data)
        } catch let error as DecodingError {
            var reason = ValidationError(error, malformed: .malformedPropertyList)
            if case .typeMismatch(_, let context) = error, context.codingPath.isEmpty {
                reason = ValidationError(
                    .malformedPropertyList, "not a property list dictionary with 'currency' and 'items'")
            } else if reason.code == .malformedPropertyList {
                reason.message =
                    "not a valid property list; expected an XML or binary plist dictionary with 'currency' and 'items'"
            }
            throw reason
        }
        try validate()
    }

    /// Decodes and validates a menu from JSON: `{"currency": "USD", "items": [{"name": "Peanuts", "unitPrice": 200}]}`.
    /// - Throws: ``ValidationError`` (`malformedJSON`, `missingField`, `wrongType`, and the checks of ``validate()``).
    public init(json data: Data) throws {
        do {
            self = try JSONDecoder().decode(Inventory.self, from: data)
        } catch let error as DecodingError {
            var reason = ValidationError(error, malformed: .malformedJSON)
            if case .typeMismatch(_, let context) = error, context.codingPath.isEmpty {
                reason = ValidationError(.malformedJSON, "not a JSON object with 'currency' and 'items'")
            } else if reason.code == .malformedJSON {
                reason.message = "not valid JSON; expected an object with 'currency' and 'items'"
            }
            throw reason
        }
        try validate()
    }

    /// Decodes a menu file's bytes: JSON when the first character that is not white space is `{`, else a property
    /// list (XML starts with `<`, binary with `bplist`).
    /// - Throws: What ``init(json:)`` or ``init(plist:)`` throws.
    public init(contents data: Data) throws {
        if data.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{") {
            try self.init(json: data)
        } else {
            try self.init(plist: data)
        }
    }

    /// Reads and validates a menu file.
    ///
    /// - Parameter url: The property list or JSON file, usually `config/Inventory.plist`.
    /// - Returns: The validated inventory.
    /// - Throws: ``ValidationError`` carrying the file path: `fileMissing`, `fileUnreadable`, or any error of
    ///   ``init(contents:)``.
    public static func load(from url: URL) throws -> Inventory {
        let file = url.path
        guard FileManager.default.fileExists(atPath: file) else {
            throw ValidationError(
                .fileMissing, "inventory file not found; create it (see config/Inventory.plist) or configure its path",
                file: file)
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ValidationError(
                .fileUnreadable, "cannot read the inventory file: \(fileErrorText(error))", file: file)
        }
        do {
            return try Inventory(contents: data)
        } catch var error as ValidationError {
            error.file = file
            throw error
        }
    }

    /// Checks the currency code, that there is at least one item, and each item's name and price.
    /// - Throws: ``ValidationError``.
    public func validate() throws {
        try Validation.currency(currency)
        guard !items.isEmpty else {
            throw ValidationError(
                .emptyMenu, "the inventory has no items; add at least one {name, unitPrice} under 'items'",
                path: "items")
        }
        var seen: [String: String] = [:]
        for (index, item) in items.enumerated() {
            try item.validate(path: "items[\(index)]")
            if let first = seen[item.name.lowercased()] {
                throw ValidationError(
                    .duplicateItem,
                    "item '\(item.name)' is listed twice (also as '\(first)'); names must be unique ignoring case",
                    path: "items[\(index)].name")
            }
            seen[item.name.lowercased()] = item.name
        }
    }

    /// Finds a menu item by name: an exact match first, then one that differs only in case.
    ///
    /// - Parameter name: The name as typed; surrounding spaces are ignored.
    /// - Returns: The item as the menu spells it.
    /// - Throws: ``ValidationError`` with code `unknownItem`, listing the menu.
    public func item(named name: String) throws -> Item {
        let wanted = name.trimmingWhitespace()
        if let item = items.first(where: { $0.name == wanted }) { return item }
        if let item = items.first(where: { $0.name.lowercased() == wanted.lowercased() }) { return item }
        throw ValidationError(
            .unknownItem,
            "unknown item '\(Validation.visible(name.prefix(80)))'; the menu has: \(items.map(\.name).joined(separator: ", "))")
    }
}
