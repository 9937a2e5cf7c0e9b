import Foundation
import JetbridgeAggregator
import JetbridgeStore
import SystemSupport
import Testing

/// `aggregator.json`: an unknown key is an error that names it (docs/AGGREGATOR.md), the same key on every run.
@Suite struct AggregatorConfigurationTests {
    @Test func anUnknownKeyIsNamedWithTheKnownOnes() throws {
        let json = Data(#"{"zeta": 1, "receipts": "r", "dataEndpont": "tcp://x:1", "alpha": true}"#.utf8)
        let error = try #require(throws: AggregatorError.self) {
            try JSONDecoder().decode(AggregatorConfiguration.self, from: json)
        }
        // Of three unknown keys, the first in sorted order, whatever order the decoder lists them in.
        #expect(error.message.hasPrefix("unknown key 'alpha'; known keys: acksEndpoint, "))
        #expect(error.message.contains("dataEndpoint"))
        #expect(error.code == .dataError)
        // A key as typed is shown escaped and cut short, once: not again raw in front of the message.
        let hostile = Data(("{\"" + "k\\u001b[31m" + String(repeating: "k", count: 500) + "\": 1}").utf8)
        let shown = try #require(throws: AggregatorError.self) {
            try JSONDecoder().decode(AggregatorConfiguration.self, from: hostile)
        }
        #expect(!shown.message.contains("\u{1B}") && shown.message.count < 1_000, "\(shown.message)")
        #expect(shown.message.contains(#"unknown key 'k\u{1B}[31mkkk"#), "\(shown.message)")
    }

    @Test func knownKeysDecode() throws {
        let json = Data(#"{"dataEndpoint": "tcp://127.0.0.1:6000", "receipts": "r"}"#.utf8)
        let configuration = try JSONDecoder().decode(AggregatorConfiguration.self, from: json)
        #expect(configuration.dataEndpoint == "tcp://127.0.0.1:6000")
        #expect(configuration.receipts == "r")
    }
}
