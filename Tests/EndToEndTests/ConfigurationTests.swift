import FileQueue
import Foundation
import JetbridgeModel
import Testing

@Suite("Configuration, inventory and status")
struct ConfigurationTests {
    static let menu = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0"><dict>
        <key>currency</key><string>EUR</string>
        <key>items</key><array>
        <dict><key>name</key><string>Tea</string><key>unitPrice</key><integer>250</integer></dict>
        </array></dict></plist>
        """

    /// Issue 28: a JSON menu beside the property list, named by `inventory` like one.
    @Test func aJSONMenuIsUsedLikeThePropertyList() throws {
        let sandbox = try AgentSandbox()
        try sandbox.write(#"{"currency": "EUR", "items": [{"name": "Tea", "unitPrice": 250}]}"#, to: "conf/menu.json")
        let config = try sandbox.write(#"{"device": "cart-7", "inventory": "menu.json"}"#, to: "conf/agent.json")
        let run = try sandbox.agent(["--config", config.path, "order", "--seat", "4D", "--item", "tea=2"])
        #expect(run.status == 0 && run.stdout.contains("5.00 EUR (Tea ×2)"), "\(run)")
        try sandbox.write(#"{"currency": "EUR", "items": [{"name": "Tea", "unitPrice": -1}]}"#, to: "conf/menu.json")
        let bad = try sandbox.agent(["--config", config.path, "order", "--seat", "4D", "--item", "Tea"])
        #expect(bad.status == 65 && bad.stderr.contains("menu.json"), "\(bad)")
    }

    @Test("the configuration file sets device, flight, queue and inventory; flags override it")
    func configurationFile() throws {
        let sandbox = try AgentSandbox()
        try sandbox.write(Self.menu, to: "conf/menu.plist")
        let config = try sandbox.write(
            #"{"device": "cart-7", "flight": "ZA200/2026-11-23", "queue": "spool", "inventory": "menu.plist", "ground": {"data": "tcp://ground:5560"}, "sync": {"window": 4}}"#,
            to: "conf/agent.json")
        let run = try sandbox.agent(["--config", config.path, "order", "--seat", "4D", "--item", "tea=2"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("5.00 EUR (Tea ×2), seat 4D, flight ZA200/2026-11-23"), "\(run)")
        let flagged = try sandbox.agent([
            "--config", config.path, "order", "--seat", "4D", "--item", "Tea", "--flight", "ZA201/2026-11-24",
        ])
        #expect(flagged.stdout.contains("flight ZA201/2026-11-24"), "\(flagged)")
        let status = try sandbox.status(["--config", config.path])
        #expect(status["device"] as? String == "cart-7")
        #expect(status["queue"] as? String == sandbox.home.appendingPathComponent("spool").path)
        #expect(status["records"] as? Int == 2)
        #expect(status["configuration"] as? String == config.standardizedFileURL.path)
        // <home>/agent.json is read when there is no --config.
        try FileManager.default.createDirectory(at: sandbox.home, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: config, to: sandbox.home.appendingPathComponent("agent.json"))
        try FileManager.default.copyItem(
            at: sandbox.directory.appendingPathComponent("conf/menu.plist"),
            to: sandbox.home.appendingPathComponent("menu.plist"))
        #expect(try sandbox.status()["device"] as? String == "cart-7")
    }

    @Test("with no configuration, config/Inventory.plist in the current directory is the menu, else the built-in one")
    func inventoryLookup() throws {
        let sandbox = try AgentSandbox()
        let builtIn = try sandbox.agent(["order", "--seat", "1A", "--item", "Popcorn"])
        #expect(builtIn.stdout.contains("4.00 USD (Popcorn ×1)"), "\(builtIn)")
        try sandbox.write(Self.menu, to: "config/Inventory.plist")
        let shipped = try sandbox.agent(["order", "--seat", "1A", "--item", "Tea"])
        #expect(shipped.stdout.contains("2.50 EUR (Tea ×1)"), "\(shipped)")
    }

    @Test(
        "a bad configuration file exits with its path and the reason, and stores nothing",
        arguments: [
            (#"{"device": "cart-1", "devcie": "cart-2"}"#, 65, "unknown key 'devcie'"),
            (#"{"ground": {"dta": "tcp://x:1"}}"#, 65, "unknown key 'ground.dta'"),
            (#"{"sync": {"batchRecords": 0}}"#, 65, "sync.batchRecords 0 must be 1–10000"),
            (#"{"sync": {"window": "8"}}"#, 65, "sync.window: expected a whole number"),
            (#"{"device": "cart 1"}"#, 65, "invalid device id 'cart 1'"),
            (#"{"flight": "tomorrow"}"#, 65, "flight"),
            (#"{"device": "#, 65, "not valid JSON"),
            (#"{"inventory": "missing.plist"}"#, 66, "missing.plist: inventory file not found"),
            (#"{"inventory": "corrupt.plist"}"#, 65, "corrupt.plist"),
        ])
    func badConfiguration(contents: String, status: Int32, message: String) throws {
        let sandbox = try AgentSandbox()
        try sandbox.write("<plist><dict><key>items</key>", to: "corrupt.plist")
        let config = try sandbox.write(contents, to: "agent.json")
        let run = try sandbox.agent(["--config", config.path, "order", "--seat", "1A", "--item", "Chips"])
        #expect(run.status == status, "\(run)")
        #expect(run.stderr.contains(message), "\(run)")
        #expect(run.stderr.contains(sandbox.directory.lastPathComponent), "names the file: \(run)")
        #expect(try sandbox.records().isEmpty)
    }

    @Test("a --config file that does not exist exits 66 with its path")
    func missingConfiguration() throws {
        let sandbox = try AgentSandbox()
        let run = try sandbox.agent(["--config", "nope/agent.json", "status"])
        #expect(run.status == 66, "\(run)")
        #expect(run.stderr.contains("nope/agent.json (from --config) does not exist"), "\(run)")
    }

    @Test("a full queue (size cap) refuses with 75 and keeps what it had")
    func sizeCap() throws {
        let sandbox = try AgentSandbox()
        let config = try sandbox.write(#"{"queueMaxBytes": 600}"#, to: "agent.json")
        let arguments = ["--config", config.path]
        #expect(try sandbox.agent(arguments + ["order", "--seat", "1A", "--item", "Chips"]).status == 0)
        #expect(try sandbox.agent(arguments + ["order", "--seat", "1B", "--item", "Chips"]).status == 0)
        let refused = try sandbox.agent(arguments + ["order", "--seat", "1C", "--item", "Chips"])
        #expect(refused.status == 75, "\(refused)")
        #expect(refused.stderr.contains("size cap"), "\(refused)")
        let scans = (0..<10).map { _ in Tags.json() }.joined(separator: "\n")
        let bulk = try sandbox.agent(arguments + ["scan", "--at", "origin"], stdin: Data(scans.utf8))
        #expect(bulk.status == 75, "\(bulk)")
        #expect(bulk.stderr.contains("0 scans were stored; nothing from line 1 on was"), "\(bulk)")
        #expect(try sandbox.records().count == 2)
        let ledger = try FileManager.default.contentsOfDirectory(atPath: sandbox.home.path + "/orders")
        #expect(ledger.filter { $0.hasSuffix(".msgpack") }.count == 2, "the refused order left no ledger entry")
    }

    @Test("a bulk scan that fills the queue keeps a durable prefix and says where it stopped")
    func sizeCapMidInput() throws {
        let sandbox = try AgentSandbox()
        let config = try sandbox.write(#"{"queueMaxBytes": 1000000}"#, to: "agent.json")
        let tags = (0..<5000).map { _ in Tags.json() }.joined(separator: "\n")
        let run = try sandbox.agent(["--config", config.path, "scan", "--at", "origin"], stdin: Data(tags.utf8))
        #expect(run.status == 75, "\(run)")
        #expect(run.stderr.contains("4096 scans were stored; nothing from line 4097 on was"), "\(run)")
        #expect(try sandbox.records().map(\.sequence) == Array(1...4096))
    }

    @Test("status shows queued records, set-aside records and the last sync")
    func status() throws {
        let sandbox = try AgentSandbox()
        // No home yet (nothing captured, no keys): not an empty device, which a mistyped --home would look like.
        let none = try sandbox.agent(["status"])
        #expect(none.status == 66 && none.stderr.contains("no device home at \(sandbox.home.path)"), "\(none)")
        try FileManager.default.createDirectory(at: sandbox.home, withIntermediateDirectories: false)
        let empty = try sandbox.agent(["status"])
        #expect(empty.status == 0, "\(empty)")
        #expect(empty.stdout.contains("queued          0 records"))
        #expect(empty.stdout.contains("last sync       never"))
        _ = try sandbox.agent(["order", "--seat", "1A", "--item", "Chips"])
        _ = try sandbox.agent(["scan", "--at", "origin"], stdin: Data((Tags.json() + "\n" + Tags.json()).utf8))
        try sandbox.write("x", to: "home/rejected/00000000000000000002.msgpack")
        try sandbox.write(
            #"{"lastSyncAt": "2026-11-21T18:30:00Z", "lastResult": "drained", "futureKey": 1}"#,
            to: "home/sync-state.json")
        let text = try sandbox.agent(["status"])
        #expect(text.stdout.contains("queued          3 records (sequences 1…3)"), "\(text)")
        #expect(text.stdout.contains("unacknowledged  3"))
        #expect(text.stdout.contains("quarantined     0"))
        #expect(text.stdout.contains("set aside       1 record in "))
        #expect(text.stdout.contains("last sync       2026-11-21T18:30:00Z, drained"), "\(text)")
        let json = try sandbox.status()
        #expect(json["records"] as? Int == 3)
        #expect(json["unacknowledged"] as? Int == 3)
        #expect(json["acknowledgedThrough"] as? Int == 0)
        #expect(json["rejected"] as? Int == 1)
        #expect(json["segments"] as? Int == 1)
        #expect(json["lastSyncAt"] as? String == "2026-11-21T18:30:00Z")
        #expect(json["flight"] as? String == "ZA101/2026-11-21")
    }
}
