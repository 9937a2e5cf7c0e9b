import FileQueue
import Foundation
import JetbridgeModel
import MessagePack
import Testing

/// `jetbridge-agent set-aside`: the records the ground refused, listed, queued again or discarded, from the set-aside
/// file format docs/AGENT.md documents.
@Suite("set-aside list, resend and discard")
struct SetAsideTests {
    /// Takes two orders and sets the second aside by hand, as sync would (docs/AGENT.md, "Set-aside file").
    private func sandboxWithOneSetAside() throws -> (AgentSandbox, FileQueue.Record) {
        let sandbox = try AgentSandbox()
        for seat in ["3C", "4D"] {
            let run = try sandbox.agent(["order", "--seat", seat, "--item", "Peanuts"])
            #expect(run.status == 0, "\(run)")
        }
        let refused = try #require(try sandbox.records().last)
        try writeSetAside(refused.payload, sequence: refused.sequence, in: sandbox)
        return (sandbox, refused)
    }

    private func writeSetAside(_ payload: Data, sequence: UInt64, in sandbox: AgentSandbox) throws {
        let entry: [String: Any] = [
            "batch": "cart-1 #1…2", "device": "cart-1", "reason": "record 1: unknown item 'Peanuts' on the ground",
            "record": payload.base64EncodedString(), "sequence": sequence, "setAsideAt": "2026-11-22T01:30:07Z",
        ]
        try sandbox.write(
            try JSONSerialization.data(withJSONObject: entry), to: "home/rejected/\(sequence).json")
    }

    @Test("list shows each record's kind, id, flight and the ground's reason; --json the same")
    func list() throws {
        let (sandbox, refused) = try sandboxWithOneSetAside()
        let id = try MessagePackDecoder().decode(Record.self, from: refused.payload).id
        let run = try sandbox.agent(["set-aside", "list"])
        #expect(run.status == 0, "\(run)")
        #expect(
            run.stdout.contains(
                "2  order \(id.uuidString) ZA101/2026-11-21  set aside 2026-11-22T01:30:07Z: record 1: unknown item"),
            "\(run)")
        #expect(run.stdout.contains("1 record set aside in"), "\(run)")
        let json = try sandbox.agent(["set-aside", "list", "--json"])
        let array = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])
        #expect(array.count == 1)
        #expect(array.first?["sequence"] as? Int == 2)
        #expect(array.first?["kind"] as? String == "order")
        #expect(array.first?["id"] as? String == id.uuidString)
        // status counts it and says how to resolve it.
        let status = try sandbox.agent(["status"])
        #expect(status.stdout.contains("`set-aside list` shows why"), "\(status)")
    }

    @Test("resend queues the exact bytes again under a new sequence and removes the file")
    func resend() throws {
        let (sandbox, refused) = try sandboxWithOneSetAside()
        let run = try sandbox.agent(["set-aside", "resend", "2"])
        #expect(run.status == 0, "\(run)")
        #expect(run.stdout.contains("set-aside 2 queued again as 3"), "\(run)")
        let records = try sandbox.records()
        #expect(records.map(\.sequence) == [1, 2, 3])
        #expect(records.last?.payload == refused.payload)
        #expect(!FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("rejected/2.json").path))
        let list = try sandbox.agent(["set-aside", "list"])
        #expect(list.stdout.contains("no records set aside"), "\(list)")
    }

    @Test("discard moves the file to discarded/; status no longer counts it")
    func discard() throws {
        let (sandbox, _) = try sandboxWithOneSetAside()
        // Still in the queue past its acknowledged position: the next sync would send it once discarded.
        let early = try sandbox.agent(["set-aside", "discard", "--all"])
        #expect(early.status == 75, "\(early)")
        #expect(early.stderr.contains("still in the queue"), "\(early)")
        #expect(FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("rejected/2.json").path))
        // As a sync leaves it: the queue acknowledged past the set-aside record.
        try FileQueue(directory: sandbox.queue).acknowledge(through: 2)
        let run = try sandbox.agent(["set-aside", "discard", "--all"])
        #expect(run.status == 0, "\(run)")
        #expect(FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("discarded/2.json").path))
        #expect(!FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("rejected/2.json").path))
        let status = try sandbox.agent(["status", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        #expect(object["rejected"] as? Int == 0, "\(status)")
        #expect(try sandbox.records().count == 2)
    }

    @Test("an unknown sequence, an unreadable file or no selection changes nothing, with 65 or 64")
    func refusals() throws {
        let (sandbox, _) = try sandboxWithOneSetAside()
        let unknown = try sandbox.agent(["set-aside", "resend", "2", "7"])
        #expect(unknown.status == 65, "\(unknown)")
        #expect(unknown.stderr.contains("no set-aside record 7 in"), "\(unknown)")
        #expect(unknown.stderr.contains("nothing was changed"), "\(unknown)")
        let discardUnknown = try sandbox.agent(["set-aside", "discard", "9"])
        #expect(discardUnknown.status == 65, "\(discardUnknown)")
        let neither = try sandbox.agent(["set-aside", "resend"])
        #expect(neither.status == 64, "\(neither)")
        let both = try sandbox.agent(["set-aside", "resend", "2", "--all"])
        #expect(both.status == 64, "\(both)")
        try sandbox.write("{ not json", to: "home/rejected/5.json")
        let unreadable = try sandbox.agent(["set-aside", "resend", "--all"])
        #expect(unreadable.status == 65, "\(unreadable)")
        #expect(unreadable.stderr.contains("cannot read the set-aside record 5"), "\(unreadable)")
        let list = try sandbox.agent(["set-aside", "list"])
        #expect(list.stdout.contains("5  UNREADABLE"), "\(list)")
        // A refused record whose file cannot be read is of no known flight; the verdict still counts it as not
        // delivered (before, no flight's line did).
        let status = try sandbox.agent(["status", "--json"])
        let verdict = try #require(
            (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])?["verdict"] as? String)
        #expect(verdict.hasPrefix("NOT SAFE TO HAND BACK"), "\(verdict)")
        #expect(verdict.contains("1 set-aside file in \(sandbox.home.path)/rejected that cannot be read or decoded"), "\(verdict)")
        // Nothing was queued and both files are still there.
        #expect(try sandbox.records().count == 2)
        for name in ["2.json", "5.json"] {
            #expect(FileManager.default.fileExists(atPath: sandbox.home.appendingPathComponent("rejected/" + name).path))
        }
    }
}
