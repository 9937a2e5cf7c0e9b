import Foundation
import JetbridgeAggregator
import JetbridgeStore
import Testing

/// `aggregator.json`: an unknown key is an error that names it (docs/AGGREGATOR.md), the same key on every run.
@Suite struct AggregatorConfigurationTests {
    @Test func anUnknownKeyIsNamedWithTheKnownOnes() throws {
        let json = Data(#"{"zeta": 1, "receipts": "r", "dataEndpont": "tcp://x:1", "alpha": true}"#.utf8)
        let error = try #require(throws: DecodingError.self) {
            try JSONDecoder().decode(AggregatorConfiguration.self, from: json)
        }
        guard case .dataCorrupted(let context) = error else {
            Issue.record("expected dataCorrupted, got \(error)")
            return
        }
        // Of three unknown keys, the first in sorted order, whatever order the decoder lists them in.
        #expect(context.debugDescription.hasPrefix("unknown key 'alpha'; known keys: acksEndpoint, "))
        #expect(context.debugDescription.contains("dataEndpoint"))
        #expect(context.codingPath.map(\.stringValue) == ["alpha"])
    }

    @Test func knownKeysDecode() throws {
        let json = Data(#"{"dataEndpoint": "tcp://127.0.0.1:6000", "receipts": "r"}"#.utf8)
        let configuration = try JSONDecoder().decode(AggregatorConfiguration.self, from: json)
        #expect(configuration.dataEndpoint == "tcp://127.0.0.1:6000")
        #expect(configuration.receipts == "r")
    }
}
