import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import Testing

/// The announce and its answer (docs/PROTOCOL.md, "Announce"): the wire bytes of the worked example, and the checks
/// every announce passes on the ground.
@Suite("Announce: protocol")
struct AnnounceProtocolTests {
    static func map(_ pairs: [(String, MessagePackValue)]) throws -> Data {
        try MessagePackEncoder().encode(MessagePackValue.map(pairs.map { (.string($0.0), $0.1) }))
    }

    static func fields(
        v: MessagePackValue = .int(1), device: MessagePackValue = .string("cart-1"),
        flights: MessagePackValue = .array([.string("ZA101/2026-11-21")])
    ) -> [(String, MessagePackValue)] {
        [("v", v), ("type", .string("announce")), ("device", device), ("flights", flights)]
    }

    /// The page's worked example: the bytes the reference code writes are the ones shown, and they decode back.
    @Test func theWorkedExampleIsWhatTheCodeWrites() throws {
        let page = try ProofOfDeliveryProtocolTests.page()
        let announce = try WireCoding.encode(FlightAnnounce.example)
        #expect(announce.count == 75)
        #expect(page.contains(ProofOfDeliveryProtocolTests.hex(announce)), "docs/PROTOCOL.md lacks \(ProofOfDeliveryProtocolTests.hex(announce))")
        guard case .success(let decoded) = FlightAnnounce.decode(announce) else {
            Issue.record("the example does not decode")
            return
        }
        #expect(decoded == FlightAnnounce.example)

        let recorded = try WireCoding.encode(AnnounceAnswer(device: "cart-1", status: .recorded, flights: 2))
        #expect(recorded.count == 64)
        #expect(page.contains(ProofOfDeliveryProtocolTests.hex(recorded)), "docs/PROTOCOL.md lacks \(ProofOfDeliveryProtocolTests.hex(recorded))")

        var twice = FlightAnnounce.example
        twice.flights = ["ZA101/2026-11-21", "ZA101/2026-11-21"]
        guard case .failure(let rejection) = FlightAnnounce.decode(try WireCoding.encode(twice)) else {
            Issue.record("a flight listed twice was accepted")
            return
        }
        let rejected = try WireCoding.encode(rejection.answer(owner: "cart-1"))
        #expect(rejected.count == 118)
        #expect(page.contains(ProofOfDeliveryProtocolTests.hex(rejected)), "docs/PROTOCOL.md lacks \(ProofOfDeliveryProtocolTests.hex(rejected))")
    }

    @Test(arguments: [
        ("missing flights", fields().filter { $0.0 != "flights" }, "flights: missing"),
        ("flights as text", fields(flights: .string("ZA101/2026-11-21")), "flights"),
        ("a flight as int", fields(flights: .array([.int(7)])), "flights"),
        ("bad flight", fields(flights: .array([.string("ZA101/2026-02-30")])), "flights[0]"),
        (
            "a flight twice", fields(flights: .array([.string("ZA101/2026-11-21"), .string("ZA101/2026-11-21")])),
            "flights[1]: ZA101/2026-11-21 is listed twice"
        ),
        (
            "65 flights", fields(flights: .array((0..<65).map { .string("ZA\($0 + 100)/2026-11-21") })),
            "flights: 65 entries; at most 64"
        ),
        ("bad device", fields(device: .string("../etc")), "device"),
        ("device as int", fields(device: .int(7)), "device"),
        ("version 2", fields(v: .int(2)), "v 2 is not a version"),
        // A later version that renamed a key of version 1: still unsupported-version, not rejected for the key.
        ("version 2 without flights", fields(v: .int(2)).filter { $0.0 != "flights" }, "v 2 is not a version"),
    ])
    func everyMalformedAnnounceIsRefusedWithWhatAndWhere(
        _ name: String, _ pairs: [(String, MessagePackValue)], _ expected: String
    ) throws {
        let frame = try Self.map(pairs)
        #expect(AckChannelType.of(frame) == "announce")
        switch FlightAnnounce.decode(frame) {
        case .success: Issue.record("\(name): accepted")
        case .failure(let rejection):
            #expect(rejection.reason.contains(expected), "\(name): \(rejection.reason)")
            #expect(rejection.reason.hasPrefix("announce: "))
            #expect(rejection.status == (name.hasPrefix("version 2") ? .unsupportedVersion : .rejected))
        }
    }

    /// An array header that claims a million flights and holds none is refused without reading them.
    @Test func aHostileFlightCountIsRefused() throws {
        var frame = try Self.map(Array(Self.fields().dropLast()))
        frame[0] = 0x84
        frame += try MessagePackEncoder().encode("flights") + [0xdd, 0x00, 0x0f, 0x42, 0x40]
        guard case .failure(let rejection) = FlightAnnounce.decode(frame) else {
            Issue.record("accepted")
            return
        }
        #expect(rejection.reason.hasPrefix("announce: flights"), "\(rejection.reason)")
    }

    @Test func fuzzedAnnouncesNeverCrashTheDecoder() throws {
        var generator = SystemRandomNumberGenerator()
        let good = try WireCoding.encode(FlightAnnounce.example)
        for _ in 0..<5_000 {
            var frame = good
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<frame.count, using: &generator)
                frame[index] = UInt8.random(in: 0...255, using: &generator)
            }
            if Bool.random(using: &generator) { frame = frame.prefix(Int.random(in: 0...frame.count, using: &generator)) }
            switch FlightAnnounce.decode(frame) {
            case .success(let announce): #expect(announce.flights.count <= FlightAnnounce.maxFlights)
            case .failure(let rejection): #expect(!rejection.reason.isEmpty)
            }
        }
    }

    /// An answer with a status a later version adds reads as `retry`.
    @Test func anUnknownAnswerStatusIsRetry() throws {
        var pairs: [(String, MessagePackValue)] = [
            ("v", .int(1)), ("type", .string("announce-answer")), ("device", .string("cart-1")),
            ("status", .string("pending")),
        ]
        #expect(try WireCoding.decode(AnnounceAnswer.self, from: Self.map(pairs)).status == .retry)
        pairs[3] = ("status", .string("recorded"))
        #expect(try WireCoding.decode(AnnounceAnswer.self, from: Self.map(pairs)).status == .recorded)
    }
}
