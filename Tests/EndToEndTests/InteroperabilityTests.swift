import FileQueue
import Foundation
import Testing

/// A record the agent writes must read back, with the documented field names, order and types, in another
/// language's MessagePack library: Python's `msgpack` (PyPI).
@Suite("Records decode with Python's msgpack")
struct InteroperabilityTests {
    /// Decodes each payload (hex, one per line on standard input) and prints, per record, its keys in order and
    /// the MessagePack type of each value, as JSON.
    static let script = #"""
        import json, sys
        import msgpack

        def kind(raw, value):
            if isinstance(value, msgpack.Timestamp):
                return "timestamp"
            if isinstance(value, bool):
                return "bool"
            if isinstance(value, int):
                return "int"
            if isinstance(value, float):
                return "float"
            if isinstance(value, str):
                return "str"
            if isinstance(value, list):
                return "array"
            if isinstance(value, dict):
                return "map"
            return type(value).__name__

        def describe(value):
            if isinstance(value, dict):
                return {"keys": list(value.keys()), "types": [kind(None, v) for v in value.values()],
                        "values": {k: describe(v) for k, v in value.items()}}
            if isinstance(value, list):
                return [describe(v) for v in value]
            if isinstance(value, msgpack.Timestamp):
                return {"seconds": value.seconds, "nanoseconds": value.nanoseconds}
            return value

        out = []
        for line in sys.stdin:
            raw = bytes.fromhex(line.strip())
            record = msgpack.unpackb(raw, raw=False, strict_map_key=True)
            result = describe(record)
            # The weight's MessagePack format: 0xca is float 32, 0xcb float 64.
            marker = b"\xa6weight"
            at = raw.find(marker)
            result["weightFormat"] = raw[at + len(marker)] if at >= 0 else None
            # The timestamp's format byte: 0xd6 (32-bit), 0xd7 (64-bit) or 0xc7 (96-bit), followed by type -1.
            for key in (b"\xa9createdAt", b"\xa9scannedAt"):
                at = raw.find(key)
                if at >= 0:
                    ext = raw[at + len(key): at + len(key) + 3]
                    result["timestampExt"] = ext[1] if ext[0] in (0xd6, 0xd7) else ext[2]
            out.append(result)
        print(json.dumps(out))
        """#

    /// Whether Python and its msgpack package are installed: without them the test is skipped, except in CI
    /// (`CI=true`), where it runs and fails, as the PostgreSQL and promtool tests do.
    static let pythonMsgpackInstalled =
        (try? AgentSandbox.run(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import msgpack"], in: URL(fileURLWithPath: "/")))?
        .status == 0

    @Test(
        "an order and a scan decode into exactly the documented fields and types",
        .enabled(
            if: pythonMsgpackInstalled || ProcessInfo.processInfo.environment["CI"] == "true",
            "Python's msgpack is not installed (sudo apt-get install python3-msgpack)"))
    func pythonMsgpack() throws {
        let check = try AgentSandbox.run(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", "import msgpack"], in: URL(fileURLWithPath: "/"))
        guard check.status == 0 else {
            Issue.record(
                "Python's msgpack package is missing, so the agent's records cannot be checked against another MessagePack library; install it with `apt-get install python3-msgpack` (Debian 12's Python refuses `pip install` outside a virtual environment, PEP 668; CI installs it). \(check.stderr)"
            )
            return
        }
        let sandbox = try AgentSandbox()
        let order = try sandbox.agent(["order", "--seat", "17B", "--item", "Peanuts=2", "--item", "Chips"])
        #expect(order.status == 0, "\(order)")
        let tagID = "F432BDB8-D84F-4461-8362-AFF89F6C493E"
        let scan = try sandbox.agent([
            "scan", "--at", "origin", "--tag", #"{"id": "\#(tagID)", "owner": ["D", "ZMU"], "weight": 42.5}"#,
        ])
        #expect(scan.status == 0, "\(scan)")
        let hex = try sandbox.records().map { $0.payload.map { String(format: "%02x", $0) }.joined() }
        let python = try AgentSandbox.run(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", Self.script], in: sandbox.directory,
            stdin: Data((hex.joined(separator: "\n") + "\n").utf8))
        #expect(python.status == 0, "\(python)")
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(python.stdout.utf8)) as? [[String: Any]])
        #expect(decoded.count == 2)

        let orderRecord = decoded[0]
        #expect(
            orderRecord["keys"] as? [String]
                == ["type", "id", "revision", "flight", "seat", "lineItems", "currency", "createdAt", "device"])
        #expect(
            orderRecord["types"] as? [String]
                == ["str", "str", "int", "str", "str", "array", "str", "timestamp", "str"])
        #expect(orderRecord["timestampExt"] as? Int == 0xFF, "ext type -1")
        let orderValues = try #require(orderRecord["values"] as? [String: Any])
        #expect(orderValues["type"] as? String == "order")
        #expect(orderValues["id"] as? String == order.orderID)
        #expect(orderValues["revision"] as? Int == 1)
        #expect(orderValues["flight"] as? String == "ZA101/2026-11-21")
        #expect(orderValues["seat"] as? String == "17B")
        #expect(orderValues["currency"] as? String == "USD")
        let lines = try #require(orderValues["lineItems"] as? [[String: Any]])
        #expect(lines.map { $0["keys"] as? [String] } == [["item", "count"], ["item", "count"]])
        let firstItem = try #require((lines[0]["values"] as? [String: Any])?["item"] as? [String: Any])
        #expect(firstItem["keys"] as? [String] == ["name", "unitPrice"])
        #expect(firstItem["types"] as? [String] == ["str", "int"])
        #expect((firstItem["values"] as? [String: Any])?["unitPrice"] as? Int == 200)
        let createdAt = try #require(orderValues["createdAt"] as? [String: Any])
        let seconds = try #require(createdAt["seconds"] as? Int)
        #expect(abs(Double(seconds) - Date().timeIntervalSince1970) < 600)

        let scanRecord = decoded[1]
        #expect(
            scanRecord["keys"] as? [String] == ["type", "id", "tag", "point", "scannedAt", "flight", "device"])
        #expect(scanRecord["types"] as? [String] == ["str", "str", "map", "str", "timestamp", "str", "str"])
        #expect(scanRecord["weightFormat"] as? Int == 0xCA, "weight is float 32")
        #expect(scanRecord["timestampExt"] as? Int == 0xFF, "ext type -1")
        let scanValues = try #require(scanRecord["values"] as? [String: Any])
        #expect(scanValues["type"] as? String == "scan")
        #expect((scanValues["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
        #expect(scanValues["point"] as? String == "origin")
        let tag = try #require(scanValues["tag"] as? [String: Any])
        #expect(tag["keys"] as? [String] == ["id", "owner", "weight"])
        #expect(tag["types"] as? [String] == ["str", "array", "float"])
        let tagValues = try #require(tag["values"] as? [String: Any])
        #expect(tagValues["id"] as? String == tagID)
        #expect(tagValues["owner"] as? [String] == ["D", "ZMU"])
        #expect(tagValues["weight"] as? Double == 42.5)
    }
}
