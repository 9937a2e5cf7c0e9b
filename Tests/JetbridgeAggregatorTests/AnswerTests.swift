import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import Testing
import ZeroMQ

/// docs/PROTOCOL.md "Every batch gets an answer": whatever reaches the ground from an admitted key is answered.
@Suite("Server: every batch gets an answer")
struct AnswerTests {
    @Test func aHeaderWithAMalformedDeviceIdIsAnsweredNotIgnored() async throws {
        let fixture = try ServerFixture()
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        let good = try outgoing("cart-1", 7, [order(1)])
        var header = good.header
        header.device = "../etc"
        try device.send(frames: [try WireCoding.encode(header), try good.frames()[1]])
        let ack = try #require(try await device.ack())
        #expect(ack.status == .rejected || ack.status == .forbidden)
        #expect(ack.first == 7 && ack.last == 7)
        #expect(ack.device == "../etc")
        #expect(ack.reason?.contains("not a valid device id") == true, "\(ack.reason ?? "no reason")")
        #expect(try fixture.server.store.orders().isEmpty)
        await fixture.stop()
    }

    @Test func aMessageThatNamesNoBatchIsAnsweredWithFirstAndLastZero() async throws {
        let fixture = try ServerFixture()
        let device = try await fixture.device("cart-1")
        defer { device.close() }
        try device.send(frames: [Data("not a header".utf8), Data([0x90])])
        let ack = try #require(try await device.ack())
        #expect(ack.status == .rejected)
        #expect(ack.device == "cart-1")
        #expect(ack.first == 0 && ack.last == 0)
        #expect(ack.index == -1)
        #expect(ack.reason?.contains("frame 1 is not a batch header") == true, "\(ack.reason ?? "no reason")")
        // The device is still served afterwards.
        try device.send(try outgoing("cart-1", 1, [order(1)]))
        #expect(try await device.ack()?.status == .stored)
        await fixture.stop()
    }
}
