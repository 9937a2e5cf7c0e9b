import Foundation
import Testing

import SystemSupport
@testable import JetbridgeAgent

/// `ground` as a list of aggregators in `agent.json`, and the sync flags laid over it (docs/AGENT.md, "Several
/// aggregators").
@Suite("Several aggregators in the configuration and on the command line")
struct AggregatorListTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("jetbridge-agent-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func resolve(_ json: String) throws(AgentError) -> AgentConfiguration {
        let file = directory.appendingPathComponent("agent.json")
        try? Data(json.utf8).write(to: file)
        return try AgentConfiguration.resolve(
            home: AgentHome(url: directory.appendingPathComponent("home")), configFile: file.path,
            currentDirectory: directory, hostName: "cart-1")
    }

    static let keyA = String(repeating: "A", count: 40)
    static let keyB = String(repeating: "B", count: 40)

    @Test("a list holds the same objects as the single form, in order")
    func list() throws {
        let configuration = try resolve(
            #"{"ground": [{"data": "tcp://a:5560", "acks": "tcp://a:5561", "serverPublicKey": "\#(Self.keyA)"}, {"data": "tcp://b:5560", "acks": "tcp://b:5561", "serverPublicKey": "\#(Self.keyB)"}]}"#
        )
        #expect(
            configuration.aggregators == [
                .init(data: "tcp://a:5560", acks: "tcp://a:5561", serverPublicKey: Self.keyA),
                .init(data: "tcp://b:5560", acks: "tcp://b:5561", serverPublicKey: Self.keyB),
            ])
        #expect(configuration.ground == configuration.aggregators[0])
        // The single form is a list of one, as before.
        let single = try resolve(#"{"ground": {"data": "tcp://a:5560"}}"#)
        #expect(single.aggregators == [.init(data: "tcp://a:5560", acks: "tcp://127.0.0.1:5561", serverPublicKey: nil)])
    }

    @Test(
        "a bad list is refused with the entry it concerns",
        arguments: [
            (#"{"ground": []}"#, "ground lists 0 aggregators"),
            (
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2"}, {"dta": "tcp://b:1"}]}"#,
                "unknown key 'ground[1].dta'"
            ),
            (
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2"}, {"data": "tcp://a:1", "acks": "tcp://b:2"}]}"#,
                "ground[1].data tcp://a:1 is already ground[0].data"
            ),
            (
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2"}, {"data": 5}]}"#,
                "ground[1].data: expected a string"
            ),
            (
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2"}, {"data": "nope", "acks": "tcp://b:2"}]}"#,
                "ground[1].data"
            ),
            (
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2", "serverPublicKey": "short"}]}"#,
                "ground[0].serverPublicKey must be 40 characters"
            ),
            (
                // The right length, but not Z85: refused by the configuration check, not first at sync.
                #"{"ground": [{"data": "tcp://a:1", "acks": "tcp://a:2", "serverPublicKey": "\#(String(repeating: "~", count: 40))"}]}"#,
                "ground[0].serverPublicKey must be 40 characters of Z85 (a 32-byte CURVE key), found characters outside Z85"
            ),
        ])
    func badList(json: String, message: String) throws {
        #expect {
            try resolve(json)
        } throws: { error in
            (error as? AgentError)?.code == .dataError && "\(error)".contains(message)
        }
    }

    @Test("flags override the configured aggregators position by position and add more")
    func flags() throws {
        let configuration = try resolve(
            #"{"ground": [{"data": "tcp://a:5560", "acks": "tcp://a:5561", "serverPublicKey": "\#(Self.keyA)"}, {"data": "tcp://b:5560", "acks": "tcp://b:5561", "serverPublicKey": "\#(Self.keyB)"}]}"#
        )
        #expect(try configuration.aggregators(to: [], acks: [], serverKeys: []) == configuration.aggregators)
        // The first --to replaces the first aggregator's data endpoint only.
        let first = try configuration.aggregators(to: ["tcp://x:1"], acks: [], serverKeys: [])
        #expect(first.map(\.data) == ["tcp://x:1", "tcp://b:5560"])
        #expect(first.map(\.acks) == ["tcp://a:5561", "tcp://b:5561"])
        // A third aggregator from the flags alone.
        let three = try configuration.aggregators(
            to: ["tcp://a:5560", "tcp://b:5560", "tcp://c:5560"],
            acks: ["tcp://a:5561", "tcp://b:5561", "tcp://c:5561"],
            serverKeys: [Self.keyA, Self.keyB, Self.keyB])
        #expect(
            three.count == 3
                && three[2] == .init(data: "tcp://c:5560", acks: "tcp://c:5561", serverPublicKey: Self.keyB))
    }

    @Test(
        "flags that cannot make a list are usage errors",
        arguments: [
            (["tcp://a:1", "tcp://b:1", "tcp://c:1"], ["tcp://a:2"], [String](), "aggregator 3 has no --acks"),
            ([String](), [String](), [keyA, keyA, keyB], "--server-key given 3 times for 2 aggregators"),
            (
                ["tcp://b:5560"], [String](), [String](),
                "aggregator 2's data (--to) endpoint tcp://b:5560 is already aggregator 1's"
            ),
        ])
    func badFlags(to: [String], acks: [String], keys: [String], message: String) throws {
        let configuration = try resolve(
            #"{"ground": [{"data": "tcp://a:5560", "acks": "tcp://a:5561"}, {"data": "tcp://b:5560", "acks": "tcp://b:5561"}]}"#
        )
        #expect {
            try configuration.aggregators(to: to, acks: acks, serverKeys: keys)
        } throws: { error in
            (error as? AgentError)?.code == .usage && "\(error)".contains(message)
        }
    }

    @Test("one aggregator and each flag once: what the flags always did")
    func singleUnchanged() throws {
        let configuration = try resolve(#"{"ground": {"serverPublicKey": "\#(Self.keyA)"}}"#)
        let result = try configuration.aggregators(to: ["tcp://x:1"], acks: [], serverKeys: [Self.keyB])
        #expect(result == [.init(data: "tcp://x:1", acks: "tcp://127.0.0.1:5561", serverPublicKey: Self.keyB)])
    }
}
