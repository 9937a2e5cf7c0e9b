import Foundation
import JetbridgeModel
import Testing

@Suite struct InventoryTests {
    @Test func loadsTheShippedMenu() throws {
        let inventory = try Inventory.load(from: packageRoot.appendingPathComponent("config/Inventory.plist"))
        #expect(inventory == .example)
        #expect(inventory.currency == "USD")
        #expect(inventory.items.map(\.name) == ["Peanuts", "Chips", "Popcorn"])
        #expect(inventory.items.map(\.unitPrice) == [200, 300, 400])
    }

    @Test func readsBinaryPlists() throws {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        #expect(try Inventory(plist: encoder.encode(Inventory.example)) == .example)
    }

    /// Issue 28: a JSON menu beside the property list (every other file of the tools is JSON); the same keys, the
    /// same checks, chosen by the file's content.
    @Test func readsAJSONMenu() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("menu.json")
        try Data(#"{"currency": "USD", "items": [{"name": "Peanuts", "unitPrice": 200}, {"name": "Chips", "unitPrice": 300}, {"name": "Popcorn", "unitPrice": 400}]}"#.utf8).write(to: file)
        #expect(try Inventory.load(from: file) == .example)
        #expect(try Inventory.load(from: packageRoot.appendingPathComponent("config/Inventory.json")) == .example)
        // Its errors say where, as the property list's do.
        try Data(#"{"currency": "USD", "items": [{"name": "Tea", "unitPrice": -1}]}"#.utf8).write(to: file)
        let negative = expectValidation(.negativePrice) { _ = try Inventory.load(from: file) }
        #expect(negative?.file == file.path)
        try Data(#"{"currency": "USD", "items": [{"name": "Tea"}]}"#.utf8).write(to: file)
        let missing = expectValidation(.missingField) { _ = try Inventory.load(from: file) }
        #expect(missing?.description.contains("unitPrice") == true, "\(String(describing: missing))")
        try Data(#"{"currency": "USD", "items": [}"#.utf8).write(to: file)
        let broken = expectValidation(.malformedJSON) { _ = try Inventory.load(from: file) }
        #expect(broken?.description.contains("JSON") == true, "\(String(describing: broken))")
    }

    @Test func missingFileNamesTheFile() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("nope.plist")
        let error = expectValidation(.fileMissing) { _ = try Inventory.load(from: file) }
        #expect(error?.file == file.path)
        #expect(error?.description.hasPrefix(file.path + ": inventory file not found") == true)
    }

    @Test func directoryIsUnreadable() throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        expectValidation(.fileUnreadable) { _ = try Inventory.load(from: dir) }
    }

    @Test(arguments: [
        ("", "the inventory is empty; it must be a property list with 'currency' and 'items'"),
        ("hello", "not a property list dictionary with 'currency' and 'items'"),
        (
            "<?xml version=\"1.0\"?><plist><dict><key>items</key>",
            "not a valid property list; expected an XML or binary plist dictionary with 'currency' and 'items'"
        ),
    ])
    func corruptFiles(contents: String, message: String) throws {
        let dir = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("Inventory.plist")
        try Data(contents.utf8).write(to: file)
        let error = expectValidation(.malformedPropertyList) { _ = try Inventory.load(from: file) }
        #expect(error?.message == message)
        #expect(error?.file == file.path)
    }

    @Test func missingItemsKey() throws {
        let data = try PropertyListEncoder().encode(["currency": "USD"])
        let error = expectValidation(.missingField) { _ = try Inventory(plist: data) }
        #expect(error?.path == "items")
    }

    @Test func wrongTypes() throws {
        struct Bad: Encodable {
            var currency = "USD"
            var items = [["name": "Peanuts", "unitPrice": "two"]]
        }
        let error = expectValidation(.wrongType) { _ = try Inventory(plist: PropertyListEncoder().encode(Bad())) }
        #expect(error?.path == "items[0].unitPrice")
    }

    @Test func rules() throws {
        func check(_ inventory: Inventory) throws { _ = try Inventory(plist: PropertyListEncoder().encode(inventory)) }
        let empty = expectValidation(.emptyMenu) { try check(Inventory(currency: "USD", items: [])) }
        #expect(empty?.message == "the inventory has no items; add at least one {name, unitPrice} under 'items'")
        let duplicate = expectValidation(.duplicateItem) {
            try check(
                Inventory(
                    currency: "USD", items: [.init(name: "Chips", unitPrice: 1), .init(name: "chips", unitPrice: 2)]))
        }
        #expect(duplicate?.path == "items[1].name")
        let negative = expectValidation(.negativePrice) {
            try check(Inventory(currency: "USD", items: [.init(name: "Chips", unitPrice: -1)]))
        }
        #expect(negative?.path == "items[0].unitPrice")
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "USD", items: [.init(name: " Chips", unitPrice: 1)]))
        }
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "USD", items: [.init(name: "", unitPrice: 1)]))
        }
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "USD", items: [.init(name: "a\nb", unitPrice: 1)]))
        }
        for currency in ["usd", "US", "USDX", "", "U$D"] {
            expectValidation(.invalidCurrency) { try check(Inventory(currency: currency, items: [.example])) }
        }
        try check(Inventory(currency: "JPY", items: [.init(name: "Free water", unitPrice: 0)]))
        try check(Inventory(currency: "EUR", items: [.init(name: "Café au lait ☕", unitPrice: 250)]))
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "EUR", items: [.init(name: "Café\u{0007}", unitPrice: 250)]))
        }
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "EUR", items: [.init(name: String(repeating: "é", count: 65), unitPrice: 1)]))
        }
        expectValidation(.invalidItemName) {
            try check(Inventory(currency: "EUR", items: [.init(name: String(repeating: "x", count: 65), unitPrice: 1)]))
        }
    }

    @Test func lookup() throws {
        let inventory = Inventory.example
        #expect(try inventory.item(named: "Chips") == Item(name: "Chips", unitPrice: 300))
        #expect(try inventory.item(named: "popcorn") == Item(name: "Popcorn", unitPrice: 400))
        #expect(try inventory.item(named: " PEANUTS ") == Item(name: "Peanuts", unitPrice: 200))
        let error = expectValidation(.unknownItem) { _ = try inventory.item(named: "Pretzels") }
        #expect(error?.message == "unknown item 'Pretzels'; the menu has: Peanuts, Chips, Popcorn")
    }

    @Test func exactMatchBeatsCaseInsensitive() throws {
        // Not loadable (duplicates ignoring case), but lookup on a value built in code prefers the exact spelling.
        let inventory = Inventory(
            currency: "USD", items: [.init(name: "TEA", unitPrice: 1), .init(name: "Tea", unitPrice: 2)])
        #expect(try inventory.item(named: "Tea").unitPrice == 2)
    }
}
