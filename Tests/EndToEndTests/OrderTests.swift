import FileQueue
import Foundation
import JetbridgeModel
import Testing

@Suite("order and order --amend")
struct OrderTests {
    @Test("order stores one durable order record and prints its id and total")
    func recordsAnOrder() throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["order", "--seat", "17b", "--item", "Peanuts=2", "--item", "chips"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("revision 1: 7.00 USD (Peanuts ×2, Chips ×1), seat 17B"), "\(run)")
        let id = try #require(run.orderID)
        let records = try sandbox.decodedRecords()
        #expect(records.count == 1)
        guard case .order(let order) = try #require(records.first) else {
            Issue.record("expected an order record, got \(records)")
            return
        }
        #expect(order.id.uuidString == id)
        #expect(order.revision == 1)
        #expect(order.seat.rawValue == "17B")
        #expect(order.flight.rawValue == "ZA101/2026-11-21")
        #expect(order.lineItems.map(\.item.name) == ["Peanuts", "Chips"])
        #expect(order.lineItems.map(\.count) == [2, 1])
        #expect(order.currency == "USD")
        #expect(try order.total == 700)
        try order.validate()
        #expect(abs(order.createdAt.timeIntervalSinceNow) < 600)
    }

    @Test("order --json prints the stored order")
    func json() throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent([
            "order", "--seat", "3C", "--item", "Popcorn=3", "--flight", "za7/2026-12-01", "--json",
        ])
        #expect(run.status == 0, "\(run)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        #expect(object["total"] as? Int == 1200)
        #expect(object["totalText"] as? String == "12.00")
        #expect(object["revision"] as? Int == 1)
        #expect(object["flight"] as? String == "ZA7/2026-12-01")
        #expect(object["sequence"] as? Int == 1)
        #expect((object["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
    }

    @Test(
        "a bad order exits 65 with the reason and stores nothing",
        arguments: [
            (
                ["--seat", "17B", "--item", "Pretzels"],
                "unknown item 'Pretzels'; the menu has: Peanuts, Chips, Popcorn"
            ),
            (["--seat", "17B", "--item", "Peanuts=0"], "the order has no items"),
            // Not a number after the last '=': the whole text is a name (so names holding '=' can be ordered).
            (["--seat", "17B", "--item", "Peanuts=two"], "unknown item 'Peanuts=two'"),
            (["--seat", "17B", "--item", "Peanuts=100"], "count 100 for 'Peanuts' is out of range"),
            (["--seat", "17B", "--item", "Peanuts=-1"], "count -1 for 'Peanuts' is out of range"),
            (["--seat", "17B", "--item", "Peanuts=60", "--item", "Peanuts=60"], "adds up to 120"),
            (["--seat", "17", "--item", "Peanuts"], "invalid seat '17'"),
            (["--seat", "0B", "--item", "Peanuts"], "invalid seat '0B'"),
            (["--seat", "17I", "--item", "Peanuts"], "invalid seat '17I'"),
            (["--seat", "17B", "--item", "Peanuts", "--flight", "ZA101"], "flight"),
        ])
    func badOrder(arguments: [String], message: String) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["order"] + arguments)
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.hasPrefix("Error: "), "\(run)")
        #expect(run.stderr.contains(message), "\(run)")
        #expect(!run.stderr.contains("Fatal error"), "\(run)")
        #expect(try sandbox.records().isEmpty)
        let ledger = sandbox.home.appendingPathComponent("orders")
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: ledger.path)) ?? []
        #expect(entries.filter { $0.hasSuffix(".msgpack") }.isEmpty)
    }

    /// Issue 16, item 9: every name on the menu can be ordered, including names with `=` and names starting with `-`.
    @Test("names holding '=' or starting with '-' are orderable")
    func oddNames() throws {
        let sandbox = try AgentSandbox()
        let names = ["Gin=Tonic", "-Salt", "A=B", "A=B=2", "=Sign", "Cola=2"]
        let items = names.map { "<dict><key>name</key><string>\($0)</string><key>unitPrice</key><integer>100</integer></dict>" }
        try sandbox.write(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>currency</key><string>USD</string>
            <key>items</key><array>\(items.joined())</array></dict></plist>
            """, to: "conf/menu.plist")
        let config = try sandbox.write(#"{"device": "cart-7", "inventory": "menu.plist"}"#, to: "conf/agent.json")
        func order(_ arguments: [String]) throws -> [LineItem] {
            let run = try sandbox.agent(["--config", config.path, "order", "--seat", "4D", "--json"] + arguments)
            #expect(run.status == 0, "\(arguments): \(run)")
            guard case .order(let order)? = try sandbox.decodedRecords().last else { return [] }
            return order.lineItems
        }
        func line(_ name: String, _ count: Int) -> LineItem { LineItem(item: Item(name: name, unitPrice: 100), count: count) }
        #expect(try order(["--item", "Gin=Tonic"]) == [line("Gin=Tonic", 1)])
        #expect(try order(["--item", "Gin=Tonic=3"]) == [line("Gin=Tonic", 3)])
        #expect(try order(["--item", "A=B=2"]) == [line("A=B", 2)])
        #expect(try order(["--item", "A=B=2=1"]) == [line("A=B=2", 1)])
        #expect(try order(["--item==Sign"]) == [line("=Sign", 1)])
        #expect(try order(["--item=-Salt"]) == [line("-Salt", 1)])
        #expect(try order(["--item=-Salt=2", "--item", "Cola=2=4"]) == [line("-Salt", 2), line("Cola=2", 4)])
    }

    @Test("order --amend records the next revision: same id, flight and createdAt")
    func amend() throws {
        let sandbox = try AgentSandbox()
        let first = try sandbox.agent(["order", "--seat", "17B", "--item", "Peanuts=2", "--flight", "ZA9/2026-11-22"])
        let id = try #require(first.orderID, "\(first)")
        let second = try sandbox.agent(["order", "--amend", id.lowercased(), "--item", "Chips=3"])
        #expect(second.status == 0, "\(second)")
        #expect(second.stdout.contains("order \(id) revision 2: 9.00 USD (Chips ×3), seat 17B, flight ZA9/2026-11-22"))
        let third = try sandbox.agent(["order", "--amend", id, "--item", "Chips=1", "--seat", "18A", "--json"])
        #expect(third.status == 0, "\(third)")
        let orders = try sandbox.decodedRecords().compactMap { record -> Order? in
            if case .order(let order) = record { order } else { nil }
        }
        #expect(orders.map(\.revision) == [1, 2, 3])
        #expect(Set(orders.map(\.id.uuidString)) == [id])
        #expect(Set(orders.map(\.createdAt)).count == 1)
        #expect(Set(orders.map(\.flight.rawValue)) == ["ZA9/2026-11-22"])
        #expect(orders.map(\.seat.rawValue) == ["17B", "17B", "18A"])
        #expect(try orders.map { try $0.total } == [400, 900, 300])
    }

    @Test("the ledger outlives the queue: amending after the records were acknowledged and deleted")
    func amendAfterSync() throws {
        let sandbox = try AgentSandbox()
        let id = try #require(try sandbox.agent(["order", "--seat", "2A", "--item", "Chips"]).orderID)
        // What sync does once the ground has stored everything: acknowledge; then remove the segments entirely.
        try FileManager.default.removeItem(at: sandbox.queue)
        let run = try sandbox.agent(["order", "--amend", id, "--item", "Chips=2"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("revision 2"))
    }

    @Test(
        "--amend with an unknown or malformed id exits 65 and stores nothing",
        arguments: [
            (
                "0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D",
                "no order 0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D was taken on this device"
            ),
            ("not-an-id", "'not-an-id' is not an order id"),
        ])
    func amendUnknown(id: String, message: String) throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["order", "--amend", id, "--item", "Chips"])
        #expect(run.status == 65, "\(run)")
        #expect(run.stderr.contains(message), "\(run)")
        #expect(try sandbox.records().isEmpty)
    }

    @Test("concurrent amendments of one order get distinct revisions")
    func concurrentAmendments() async throws {
        let sandbox = try AgentSandbox()
        let id = try #require(try sandbox.agent(["order", "--seat", "5F", "--item", "Chips"]).orderID)
        let runs = try await onThreads(6) { index in
            try sandbox.agent(["order", "--amend", id, "--item", "Peanuts=\(index + 1)"])
        }
        for run in runs { #expect(run.status == 0, "\(run)") }
        let revisions = try sandbox.decodedRecords().compactMap { record -> Int? in
            if case .order(let order) = record { order.revision } else { nil }
        }
        #expect(revisions.sorted() == Array(1...7))
        #expect(revisions == revisions.sorted(), "revisions reach the queue in lock order")
    }
}
