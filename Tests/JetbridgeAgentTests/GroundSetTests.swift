import FileQueue
import Foundation
import JetbridgeProtocol
import Testing

@testable import JetbridgeAgent

/// The choice of aggregator (``GroundSet``) and how the window takes answers from several (docs/PROTOCOL.md,
/// "Several aggregators"), without sockets.
@Suite("GroundSet and the window with several aggregators")
struct GroundSetTests {
    static func allUp(_ count: Int) -> GroundSet {
        var set = GroundSet(count: count)
        for index in 0..<count { set.setUp(index, true) }
        return set
    }

    @Test("new batches go round robin over the aggregators that are up")
    func roundRobin() {
        var set = Self.allUp(3)
        let chosen = (0..<6).map { _ in set.choose(previous: nil, reason: .new, now: 0) }
        #expect(chosen == [0, 1, 2, 0, 1, 2])
        set.setUp(1, false)
        let without = (0..<4).map { _ in set.choose(previous: nil, reason: .new, now: 0) }
        #expect(without == [0, 2, 0, 2])
    }

    @Test(
        "a batch whose ack is late goes to the next aggregator, which takes the new batches until the late one answers")
    func resendElsewhere() {
        var set = Self.allUp(2)
        #expect(set.choose(previous: 0, reason: .timedOut, now: 10) == 1)
        // Aggregator 0 is in backoff for 1 s: new batches go to 1 only.
        #expect((0..<3).map { _ in set.choose(previous: nil, reason: .new, now: 10.5) } == [1, 1, 1])
        // A retry of a batch last sent to 1 goes to the next one; 0 is still in backoff, so 1 is the only one ready.
        #expect(set.choose(previous: 1, reason: .again, now: 10.5) == 1)
        // After the backoff, 0 gets a batch again (a probe); an answer from it ends its backoff.
        #expect(set.choose(previous: nil, reason: .new, now: 11.1) == 0)
        #expect(set.choose(previous: 0, reason: .timedOut, now: 12) == 1)
        #expect(set.backoffUntil[0] == 14)  // doubled: 2 s
        set.answered(by: 0)
        #expect(set.choose(previous: 1, reason: .again, now: 12) == 0)
    }

    @Test("with one aggregator every send goes to it, timed out or not, and none while it is down")
    func single() {
        var set = GroundSet(count: 1)
        #expect(set.choose(previous: nil, reason: .new, now: 0) == nil)
        #expect(!set.anyUsable)
        set.setUp(0, true)
        #expect(set.choose(previous: nil, reason: .new, now: 0) == 0)
        #expect(set.choose(previous: 0, reason: .timedOut, now: 1) == 0)
        #expect(set.choose(previous: 0, reason: .again, now: 1) == 0)
    }

    @Test("every aggregator in backoff: they share the probing instead of stopping")
    func allInBackoff() {
        var set = Self.allUp(2)
        set.lateAck(from: 0, now: 0)
        set.lateAck(from: 1, now: 0)
        #expect(set.choose(previous: 0, reason: .again, now: 0.5) == 1)
        #expect(set.choose(previous: nil, reason: .new, now: 0.5) != nil)
    }

    @Test("an aggregator that refuses this device gets nothing more; all refusing ends the sync")
    func refusing() {
        var set = Self.allUp(2)
        set.refused(by: 0)
        #expect(!set.allRefusing)
        #expect((0..<3).map { _ in set.choose(previous: nil, reason: .new, now: 0) } == [1, 1, 1])
        #expect(set.choose(previous: 1, reason: .timedOut, now: 0) == 1)
        set.refused(by: 1)
        #expect(set.allRefusing)
        #expect(set.choose(previous: nil, reason: .new, now: 0) == nil)
    }

    // MARK: The window's part

    static func window() -> SyncWindow {
        var window = SyncWindow(
            acknowledgedThrough: 0,
            limits: SyncWindow.Limits(batchRecords: 10, batchBytes: 1 << 20, window: 8, ackTimeout: 1, jitter: 0),
            seed: 1)
        let records = (1...30).map { SyncWindow.Record(sequence: UInt64($0), payload: Data([UInt8($0)])) }
        for start in stride(from: 0, to: 30, by: 10) { window.add(read: Array(records[start..<start + 10]), now: 0) }
        return window
    }

    static func stored(_ first: UInt64, _ last: UInt64) -> Ack {
        Ack(device: "cart-1", first: first, last: last, status: .stored, new: 10, duplicates: 0)
    }

    @Test("a late ack from the first aggregator finishes the batch once; the second one's ack is then ignored")
    func lateAckCountsOnce() throws {
        var window = Self.window()
        var set = Self.allUp(2)
        let first = window.batches[0].id
        let route = set.choose(previous: nil, reason: .new, now: 0)
        window.sent(batchID: first, now: 0, route: try #require(route))
        #expect(window.batch(id: first)?.route == 0)
        // No ack within the timeout: the batch is due, and goes to the other aggregator.
        #expect(window.batchesToSend(now: 1.5).contains(first))
        let target = set.choose(previous: 0, reason: .timedOut, now: 1.5)
        #expect(target == 1)
        window.sent(batchID: first, now: 1.5, route: 1)
        // The first aggregator's ack arrives late: true (the batch is durable), and counted.
        #expect(window.apply(Self.stored(1, 10), now: 1.6, from: 0) == .stored(records: 10, new: 10, duplicates: 0))
        #expect(window.acknowledgedThrough == 10)
        // The second aggregator's answer to the resend counts for nothing more.
        #expect(window.apply(Self.stored(1, 10), now: 1.7, from: 1) == .ignored)
        #expect(window.acknowledgedThrough == 10)
    }

    @Test("retry, limited and rejected count only from the aggregator the batch was last sent to")
    func staleAnswersIgnored() {
        var window = Self.window()
        let id = window.batches[0].id
        window.sent(batchID: id, now: 0, route: 0)
        window.sent(batchID: id, now: 2, route: 1)
        for status in [Ack.Status.retry, .limited] {
            let ack = Ack(device: "cart-1", first: 1, last: 10, status: status, reason: "busy")
            #expect(window.apply(ack, now: 2.1, from: 0) == .ignored)
        }
        let rejected = Ack(device: "cart-1", first: 1, last: 10, status: .rejected, index: 3, reason: "record 3: bad")
        #expect(window.apply(rejected, now: 2.1, from: 0) == .ignored)
        #expect(window.setAside.isEmpty)
        // The same answer from the aggregator that has the batch now applies.
        if case .retryLater = window.apply(Ack(device: "cart-1", first: 1, last: 10, status: .retry), now: 2.2, from: 1)
        {
        } else {
            Issue.record("a retry from the batch's aggregator schedules it")
        }
    }

    @Test("batches overtaken on a faster aggregator are not resent at once: only the same aggregator's count")
    func overtakingIsPerAggregator() {
        var window = Self.window()
        let ids = window.batches.map(\.id)
        window.sent(batchID: ids[0], now: 0, route: 0)  // to the slow aggregator
        window.sent(batchID: ids[1], now: 0.1, route: 1)
        window.sent(batchID: ids[2], now: 0.2, route: 1)
        let records = (31...60).map { SyncWindow.Record(sequence: UInt64($0), payload: Data([1])) }
        window.add(read: Array(records[0..<10]), now: 0.3)
        let fourth = window.batches.last!.id
        window.sent(batchID: fourth, now: 0.3, route: 1)
        _ = window.apply(Self.stored(11, 20), now: 0.4, from: 1)
        _ = window.apply(Self.stored(21, 30), now: 0.45, from: 1)
        _ = window.apply(Self.stored(31, 40), now: 0.5, from: 1)
        // Three later batches stored, but on another aggregator: batch 1…10 is not taken for lost.
        #expect(!window.batchesToSend(now: 0.5).contains(ids[0]))
    }

    @Test("batches waiting for an aggregator whose link is down are due again, and only those")
    func sendAgainByRoute() {
        var window = Self.window()
        let ids = window.batches.map(\.id)
        window.sent(batchID: ids[0], now: 0, route: 0)
        window.sent(batchID: ids[1], now: 0, route: 1)
        window.sent(batchID: ids[2], now: 0, route: 0)
        #expect(window.sendAgain(now: 0.1) { $0.route == 0 } == 2)
        #expect(Set(window.batchesToSend(now: 0.1)) == [ids[0], ids[2]])
    }
}
