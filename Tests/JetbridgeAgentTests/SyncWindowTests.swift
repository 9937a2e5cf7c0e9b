import FileQueue
import Foundation
import JetbridgeProtocol
import JetbridgeTestKit
import SystemSupport
import Testing

@testable import JetbridgeAgent

@Suite("SyncWindow")
struct SyncWindowTests {
    static func limits(records: Int = 3, window: Int = 4, timeout: Double = 10, jitter: Double = 0) -> SyncWindow.Limits
    {
        SyncWindow.Limits(
            batchRecords: records, batchBytes: 1 << 20, window: window, ackTimeout: timeout, jitter: jitter)
    }

    static func records(_ sequences: ClosedRange<UInt64>) -> [SyncWindow.Record] {
        sequences.map { SyncWindow.Record(sequence: $0, payload: Data("r\($0)".utf8)) }
    }

    static func ack(_ batch: SyncWindow.Batch, _ status: Ack.Status, index: Int? = nil) -> Ack {
        Ack(
            device: "cart-1", first: batch.first, last: batch.last, status: status,
            new: status == .stored ? batch.records.count : nil, duplicates: status == .stored ? 0 : nil, index: index,
            reason: status == .stored ? nil : "test")
    }

    @Test("stored acks advance only over the contiguous prefix")
    func contiguousPrefix() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(), seed: 1)
        let result1 = window.add(read: Self.records(1...3), now: 0)
        let a = try #require(result1)
        let result2 = window.add(read: Self.records(4...6), now: 0)
        let b = try #require(result2)
        let result3 = window.add(read: Self.records(7...9), now: 0)
        let c = try #require(result3)
        #expect(window.batchesToSend(now: 0) == [a, b, c])
        for id in [a, b, c] { window.sent(batchID: id, now: 0) }
        #expect(window.batchesToSend(now: 1).isEmpty)

        let batchB = try #require(window.batch(id: b))
        let result4 = window.apply(Self.ack(batchB, .stored), now: 1)
        #expect(result4 == .stored(records: 3, new: 3, duplicates: 0))
        #expect(window.acknowledgedThrough == 0)
        let batchA = try #require(window.batch(id: a))
        let result5 = window.apply(Self.ack(batchA, .stored), now: 1)
        #expect(result5 == .stored(records: 3, new: 3, duplicates: 0))
        #expect(window.acknowledgedThrough == 6)
        // A second answer to a finished batch is late: ignored, changes nothing.
        let result6 = window.apply(Self.ack(batchA, .stored), now: 2)
        #expect(result6 == .ignored)
        #expect(window.unfinishedCount == 1)
        #expect(window.nextSequence == 10)
    }

    @Test("the window bounds unfinished batches")
    func windowBound() {
        var window = SyncWindow(acknowledgedThrough: 10, limits: Self.limits(window: 2), seed: 1)
        window.add(read: Self.records(11...13), now: 0)
        #expect(window.hasRoom)
        window.add(read: Self.records(14...16), now: 0)
        #expect(!window.hasRoom)
    }

    @Test("no ack in time: resent with a doubling timeout capped at 60 s")
    func timeoutBackoff() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(timeout: 10), seed: 1)
        let result7 = window.add(read: Self.records(1...1), now: 0)
        let id = try #require(result7)
        var now = 0.0
        var waits: [Double] = []
        for _ in 0..<6 {
            #expect(window.batchesToSend(now: now) == [id])
            window.sent(batchID: id, now: now)
            guard case .waiting(_, let deadline) = try #require(window.batch(id: id)).state else {
                Issue.record("not waiting")
                return
            }
            #expect(window.batchesToSend(now: deadline - 0.001).isEmpty)
            waits.append(deadline - now)
            now = deadline
        }
        #expect(waits == [10, 20, 40, 60, 60, 60])
        #expect(try #require(window.batch(id: id)).sends == 6)
    }

    @Test("jitter keeps every wait within ±20 %")
    func jitter() throws {
        var window = SyncWindow(
            acknowledgedThrough: 0, limits: Self.limits(window: 256, timeout: 10, jitter: 0.2), seed: 42)
        var seen: Set<Double> = []
        for sequence in UInt64(1)...200 {
            let result8 = window.add(read: Self.records(sequence...sequence), now: 0)
            let id = try #require(result8)
            window.sent(batchID: id, now: 0)
            guard case .waiting(_, let deadline) = try #require(window.batch(id: id)).state else { return }
            #expect((8.0...12.0).contains(deadline))
            seen.insert(deadline)
        }
        #expect(seen.count > 150)
    }

    @Test("retry: sent again after a doubling delay")
    func retry() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(timeout: 10), seed: 1)
        let result9 = window.add(read: Self.records(1...2), now: 0)
        let id = try #require(result9)
        window.sent(batchID: id, now: 0)
        var batch = try #require(window.batch(id: id))
        let result10 = window.apply(Self.ack(batch, .retry), now: 1)
        #expect(result10 == .retryLater(at: 2))
        #expect(window.batchesToSend(now: 1.5).isEmpty)
        #expect(window.batchesToSend(now: 2) == [id])
        window.sent(batchID: id, now: 2)
        batch = try #require(window.batch(id: id))
        let result11 = window.apply(Self.ack(batch, .retry), now: 3)
        #expect(result11 == .retryLater(at: 5))
        // A stored ack while it waits for its retry still finishes it.
        let result12 = window.apply(Self.ack(batch, .stored), now: 4)
        #expect(result12 == .stored(records: 2, new: 2, duplicates: 0))
        #expect(window.acknowledgedThrough == 2)
    }

    @Test("a rejected record is set aside; the rest go again under new names")
    func setAsideMiddle() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(records: 5), seed: 1)
        let result13 = window.add(read: Self.records(1...5), now: 0)
        let id = try #require(result13)
        window.sent(batchID: id, now: 0)
        let batch = try #require(window.batch(id: id))
        let outcome = window.apply(Self.ack(batch, .rejected, index: 2), now: 1)
        #expect(outcome == .setAside(SyncWindow.Record(sequence: 3, payload: Data("r3".utf8)), reason: "test"))
        #expect(window.setAside == [3])
        let parts = window.batches
        #expect(parts.map { $0.records.map(\.sequence) } == [[1, 2], [4, 5]])
        #expect(parts.map(\.through) == [3, 5])
        // The refused batch's name is gone: a repeated answer to it is ignored, whatever it says.
        let result14 = window.apply(Self.ack(batch, .rejected, index: 0), now: 1)
        #expect(result14 == .ignored)
        #expect(window.batchesToSend(now: 1) == parts.map(\.id))
        for part in parts { window.sent(batchID: part.id, now: 1) }
        _ = window.apply(Self.ack(parts[1], .stored), now: 2)
        #expect(window.acknowledgedThrough == 0)
        _ = window.apply(Self.ack(parts[0], .stored), now: 2)
        #expect(window.acknowledgedThrough == 5)
    }

    @Test("set aside at either end, and a batch of one")
    func setAsideEnds() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(records: 3), seed: 1)
        let result15 = window.add(read: Self.records(1...3), now: 0)
        let first = try #require(result15)
        let result16 = window.add(read: Self.records(4...4), now: 0)
        let single = try #require(result16)
        window.sent(batchID: first, now: 0)
        window.sent(batchID: single, now: 0)
        // The only record of the second batch: the batch is finished, but waits behind the first.
        _ = window.apply(Self.ack(try #require(window.batch(id: single)), .rejected, index: 0), now: 1)
        #expect(window.acknowledgedThrough == 0)
        _ = window.apply(Self.ack(try #require(window.batch(id: first)), .rejected, index: 2), now: 1)
        let rest = try #require(window.batches.first)
        #expect(rest.records.map(\.sequence) == [1, 2])
        #expect(rest.through == 3)
        window.sent(batchID: rest.id, now: 1)
        _ = window.apply(Self.ack(rest, .rejected, index: 0), now: 2)
        let last = try #require(window.batches.first)
        #expect(last.records.map(\.sequence) == [2])
        #expect(last.first == 2 && last.last == 2)
        window.sent(batchID: last.id, now: 2)
        _ = window.apply(Self.ack(last, .stored), now: 3)
        #expect(window.acknowledgedThrough == 4)
        #expect(window.setAside == [1, 3, 4])
        #expect(window.isIdle)
    }

    @Test("records set aside by an earlier run are skipped when read")
    func skipsKnownSetAside() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(), setAside: [2, 4, 5, 6], seed: 1)
        let result17 = window.add(read: Self.records(1...3), now: 0)
        let id = try #require(result17)
        // The records on either side of a set-aside one go in separate batches, named by what they carry.
        #expect(try #require(window.batch(id: id)).records.map(\.sequence) == [1])
        #expect(try #require(window.batch(id: id + 1)).records.map(\.sequence) == [3])
        let result18 = window.add(read: Self.records(4...6), now: 0)
        #expect(result18 == nil)
        #expect(window.acknowledgedThrough == 0)
        for batch in [id + 1, id] {
            window.sent(batchID: batch, now: 0)
            _ = window.apply(Self.ack(try #require(window.batch(id: batch)), .stored), now: 1)
        }
        #expect(window.acknowledgedThrough == 6)
    }

    /// The ground holds a device's late answers up to a minute and hands them to its next run. The last run's
    /// ten-record batch #1…10 was answered `rejected, index 3` (record 4, set aside) and, late, once more; the next
    /// run must not take that second answer for a batch of its own. Before, it cut #1…10 again without record 4, nine
    /// records under the same name, and the late answer set record 5 aside with record 4's reason.
    @Test func aLateAnswerToTheLastRunsBatchNeverMeetsABatchOfOtherRecordsUnderItsName() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(records: 10), setAside: [4], seed: 1)
        let added = window.add(read: Self.records(1...10), now: 0)
        let first = try #require(added)
        #expect(window.batches.map { "\($0.first)…\($0.last)" } == ["1…3", "5…10"])
        for batch in window.batches { window.sent(batchID: batch.id, now: 0) }
        let late = Ack(device: "cart-1", first: 1, last: 10, status: .rejected, index: 3, reason: "record 3: menu")
        #expect(window.apply(late, now: 1) == .ignored)
        #expect(window.setAside == [4])
        // Record 5 is stored with its batch; the position moves over record 4 once both batches are.
        _ = window.apply(Self.ack(try #require(window.batch(id: first + 1)), .stored), now: 1)
        #expect(window.batch(id: first + 1)?.records.isEmpty == true)  // its records are the caller's now
        _ = window.apply(Self.ack(try #require(window.batch(id: first)), .stored), now: 1)
        #expect(window.acknowledgedThrough == 10 && window.isIdle)
    }

    /// Batches stored behind one held back (`limited` for minutes) wait in the window until it is stored, and only
    /// unfinished ones count against it; they keep no records, so reading on does not hold the queue in memory.
    @Test func batchesStoredBehindAHeldBackOneKeepNoRecords() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(records: 3, window: 2), seed: 1)
        let added = window.add(read: Self.records(1...3), now: 0)
        let held = try #require(added)
        window.sent(batchID: held, now: 0)
        #expect(window.apply(Self.ack(try #require(window.batch(id: held)), .limited), now: 0) != .ignored)
        var start: UInt64 = 4
        for _ in 0..<50 {
            #expect(window.hasRoom)
            let next = window.add(read: Self.records(start...(start + 2)), now: 0)
            let id = try #require(next)
            window.sent(batchID: id, now: 0)
            _ = window.apply(Self.ack(try #require(window.batch(id: id)), .stored), now: 0)
            start += 3
        }
        #expect(window.batches.count == 51 && window.acknowledgedThrough == 0)
        #expect(window.batches.dropFirst().allSatisfy { $0.isDone && $0.records.isEmpty })
        #expect(window.recordsInFlight == 3)
    }

    @Test("malformed three times in a row ends the sync with 65; a rebuild resends at once")
    func malformed() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(), seed: 1)
        let result19 = window.add(read: Self.records(1...3), now: 0)
        let id = try #require(result19)
        for round in 1...3 {
            window.sent(batchID: id, now: Double(round))
            let outcome = window.apply(Self.ack(try #require(window.batch(id: id)), .rejected, index: -1), now: 1)
            if round < 3 {
                #expect(outcome == .rebuild(batchID: id, sequences: [1, 2, 3]))
                window.replaceRecords(ofBatch: id, with: Self.records(1...3), now: Double(round))
                #expect(window.batchesToSend(now: Double(round)) == [id])
            } else {
                guard case .fatal(let error) = outcome else {
                    Issue.record("expected fatal, got \(outcome)")
                    return
                }
                #expect(error.code.exitCode == 65)
            }
        }
        #expect(window.acknowledgedThrough == 0)
    }

    @Test("forbidden ends with 65, unsupported-version with 69")
    func fatalStatuses() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(), seed: 1)
        let result20 = window.add(read: Self.records(1...3), now: 0)
        let id = try #require(result20)
        window.sent(batchID: id, now: 0)
        let batch = try #require(window.batch(id: id))
        guard case .fatal(let forbidden) = window.apply(Self.ack(batch, .forbidden), now: 1),
            case .fatal(let unsupported) = window.apply(Self.ack(batch, .unsupportedVersion), now: 1)
        else {
            Issue.record("expected fatal outcomes")
            return
        }
        #expect(forbidden.code.exitCode == 65)
        #expect(unsupported.code.exitCode == 69)
        #expect(window.acknowledgedThrough == 0)
    }

    /// A ground that answers in any order, repeats answers and answers long after: the position only ever moves
    /// forward, never past a batch the ground has not stored or a record not set aside, and ends at the last record.
    @Test("random ack orders with duplicates and late acks", arguments: 0..<40)
    func randomOrders(seed: UInt64) throws {
        var random = JetbridgeTestKit.SplitMix(state: seed &+ 1000)
        let count = UInt64(20 + Int(random.next() % 200))
        var window = SyncWindow(
            acknowledgedThrough: 0,
            limits: Self.limits(records: 1 + Int(random.next() % 7), window: 1 + Int(random.next() % 8)),
            seed: seed)
        var confirmed: Set<UInt64> = []  // sequences the "ground" stored or had set aside
        var answers: [Ack] = []  // every answer ever sent, replayed at random later
        var now = 0.0
        var steps = 0
        while window.acknowledgedThrough < count {
            steps += 1
            #expect(steps < 100_000)
            if steps >= 100_000 { return }
            now += 1
            while window.hasRoom, window.nextSequence <= count {
                let upper = min(count, window.nextSequence + UInt64(window.limits.batchRecords) - 1)
                window.add(read: Self.records(window.nextSequence...upper), now: now)
            }
            for id in window.batchesToSend(now: now) { window.sent(batchID: id, now: now) }
            let waiting = window.batches.filter {
                if case .waiting = $0.state { return true }
                return false
            }
            // Answer one waiting batch (or replay an old answer); some sends are "lost" and time out.
            if let batch = waiting.randomElement(using: &random), random.next() % 4 != 0 {
                let roll = random.next() % 10
                let ack: Ack
                if roll < 7 {
                    ack = Self.ack(batch, .stored)
                } else if roll < 8 {
                    ack = Self.ack(batch, .retry)
                } else {
                    ack = Self.ack(batch, .rejected, index: Int(random.next() % UInt64(batch.records.count)))
                }
                let before = window.acknowledgedThrough
                let outcome = window.apply(ack, now: now)
                switch outcome {
                case .stored: confirmed.formUnion(batch.records.map(\.sequence))
                case .setAside(let record, _): confirmed.insert(record.sequence)
                default: break
                }
                #expect(window.acknowledgedThrough >= before)
                answers.append(ack)
            }
            if !answers.isEmpty, random.next() % 3 == 0 {
                // A late or repeated answer: it either names a batch in flight with the same records (harmless) or
                // is ignored.
                let old = answers.randomElement(using: &random)!
                let match = window.batches.first { !$0.isDone && $0.first == old.first && $0.last == old.last }
                switch window.apply(old, now: now) {
                case .stored: confirmed.formUnion(match?.records.map(\.sequence) ?? [])
                case .setAside: Issue.record("a repeated rejection was applied to the batch that replaced it")
                default: break
                }
            }
            now += Double(random.next() % 30)
            // Never acknowledged past anything unconfirmed.
            for sequence in UInt64(1)...max(1, window.acknowledgedThrough) where window.acknowledgedThrough > 0 {
                #expect(
                    confirmed.contains(sequence),
                    "acknowledged through \(window.acknowledgedThrough) but \(sequence) unconfirmed")
                if !confirmed.contains(sequence) { return }
            }
        }
        #expect(window.acknowledgedThrough == count)
        #expect(window.isIdle)
    }

    // MARK: The ack timeout follows the round trip (issue 17)

    /// Cuts and sends `count` one-record batches at `now`; returns their ids.
    static func sendBatches(_ count: Int, into window: inout SyncWindow, now: Double) -> [Int] {
        (0..<count).map { _ in
            let sequence = window.nextSequence
            let id = window.add(read: records(sequence...sequence), now: now)!
            window.sent(batchID: id, now: now)
            return id
        }
    }

    static func store(_ id: Int, in window: inout SyncWindow, now: Double) {
        guard let batch = window.batch(id: id) else { return }
        _ = window.apply(ack(batch, .stored), now: now)
    }

    @Test("the timeout is SRTT + 4 × RTTVAR from the measured round trips, within its bounds")
    func roundTripTimeout() {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(window: 64, timeout: 10), seed: 1)
        #expect(window.timeout == 10)  // nothing measured yet
        let a = Self.sendBatches(1, into: &window, now: 0)
        Self.store(a[0], in: &window, now: 2)
        // First sample R = 2: SRTT = 2, RTTVAR = 1 → 2 + 4.
        #expect(window.smoothedRoundTrip == 2)
        #expect(window.roundTripVariation == 1)
        #expect(window.timeout == 6)
        let b = Self.sendBatches(1, into: &window, now: 10)
        Self.store(b[0], in: &window, now: 11)
        // R = 1: RTTVAR = 0.75 + 0.25 = 1, SRTT = 1.75 + 0.125 = 1.875.
        #expect(window.smoothedRoundTrip == 1.875)
        #expect(window.roundTripVariation == 1)
        // Many fast round trips: the floor (1 s) holds.
        for step in 0..<50 {
            let ids = Self.sendBatches(1, into: &window, now: 20 + Double(step))
            Self.store(ids[0], in: &window, now: 20.001 + Double(step))
        }
        #expect(window.timeout == 1)
        // Many slow ones: the ceiling (60 s) holds.
        for step in 0..<50 {
            let ids = Self.sendBatches(1, into: &window, now: 100 + 200 * Double(step))
            Self.store(ids[0], in: &window, now: 100 + 200 * Double(step) + 150)
        }
        #expect(window.timeout == 60)
    }

    @Test("Karn's rule: the ack of a resent batch gives no round-trip sample")
    func karn() {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(timeout: 2), seed: 1)
        let ids = Self.sendBatches(1, into: &window, now: 0)
        #expect(window.batchesToSend(now: 2) == ids)
        window.sent(batchID: ids[0], now: 2)
        #expect(window.backoffs == 1)
        Self.store(ids[0], in: &window, now: 2.01)
        #expect(window.smoothedRoundTrip == nil)
        #expect(window.backoffs == 0)
        #expect(window.timeout == 2)
    }

    @Test("silence: one batch at a time probes, each wait twice the last; the others are not resent")
    func oneProbeAtATime() {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(window: 8, timeout: 1), seed: 1)
        let ids = Self.sendBatches(8, into: &window, now: 0)
        var probes: [(Double, Int)] = []
        var now = 0.0
        while now < 40 {
            now += 0.05
            for id in window.batchesToSend(now: now) {
                probes.append((now, id))
                window.sent(batchID: id, now: now)
            }
        }
        // At about 1, 3, 7, 15, 31 s: five sends in 40 s instead of 8 × 5.
        #expect(probes.count == 5, "\(probes)")
        #expect(Set(probes.map(\.1)).count == 1)
        #expect(probes.first?.1 == ids[0])
    }

    @Test("a slow link: batches queued behind others are not resent while acks keep coming (< 5 % spurious)")
    func queuedBehindOthers() {
        // 1 Mbit/s, 300 ms each way, 200 KB batches: 1.6 s on the wire each, a window of 8 sent at once, so the last
        // one's ack comes 13 s after its send — longer than the configured 10 s.
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(window: 8, timeout: 10, jitter: 0.2), seed: 7)
        let serialisation = 1.6
        let roundTrip = 0.6
        var sends = 0
        var resends = 0
        var wire: [(arrives: Double, id: Int)] = []  // acks on their way back
        var linkFreeAt = 0.0
        var now = 0.0
        var stored = 0
        while stored < 100, now < 1000 {
            while window.hasRoom, window.nextSequence <= 100 {
                let sequence = window.nextSequence
                window.add(read: Self.records(sequence...sequence), now: now)
            }
            for id in window.batchesToSend(now: now) {
                if window.batch(id: id)!.sends > 0 { resends += 1 }
                sends += 1
                window.sent(batchID: id, now: now)
                linkFreeAt = max(linkFreeAt, now) + serialisation
                wire.append((linkFreeAt + roundTrip, id))
            }
            for arrived in wire.filter({ $0.arrives <= now }) {
                if let batch = window.batch(id: arrived.id), !batch.isDone {
                    if case .stored = window.apply(Self.ack(batch, .stored), now: now) { stored += 1 }
                }
            }
            wire.removeAll { $0.arrives <= now }
            now += 0.05
        }
        #expect(stored == 100)
        #expect(Double(resends) < 0.05 * Double(sends), "\(resends) resends of \(sends) sends")
    }

    @Test("a batch overtaken by three stored batches is sent again at once")
    func fastResend() {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(window: 8, timeout: 10), seed: 1)
        let first = Self.sendBatches(1, into: &window, now: 0)
        let later = Self.sendBatches(3, into: &window, now: 0.1)
        Self.store(later[0], in: &window, now: 0.5)
        Self.store(later[1], in: &window, now: 0.6)
        #expect(window.batchesToSend(now: 0.7).isEmpty)
        Self.store(later[2], in: &window, now: 0.7)
        #expect(window.batchesToSend(now: 0.7) == first)
        window.sent(batchID: first[0], now: 0.7)
        #expect(window.batchesToSend(now: 0.8).isEmpty)
        #expect(window.backoffs == 0)
    }

    @Test("the link returns: every batch still waiting is due once, at once, and the backoff ends")
    func linkRestored() {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(window: 8, timeout: 1), seed: 1)
        let ids = Self.sendBatches(4, into: &window, now: 0)
        Self.store(ids[1], in: &window, now: 0.5)
        for id in window.batchesToSend(now: 2) { window.sent(batchID: id, now: 2) }
        #expect(window.backoffs == 1)
        #expect(window.linkRestored(now: 3) == 3)
        #expect(window.backoffs == 0)
        #expect(window.batchesToSend(now: 3) == [ids[0], ids[2], ids[3]])
        for id in window.batchesToSend(now: 3) { window.sent(batchID: id, now: 3) }
        #expect(window.batchesToSend(now: 3.1).isEmpty)
    }

    @Test("limited: sent again no sooner than the ground's retryAfter, never set aside or rejected")
    func limited() throws {
        var window = SyncWindow(acknowledgedThrough: 0, limits: Self.limits(timeout: 10), seed: 1)
        let ids = Self.sendBatches(1, into: &window, now: 0)
        let batch = try #require(window.batch(id: ids[0]))
        var ack = Self.ack(batch, .limited)
        ack.retryAfter = 7
        #expect(window.apply(ack, now: 1) == .limited(at: 8))
        #expect(window.batchesToSend(now: 7.9).isEmpty)
        #expect(window.batchesToSend(now: 8) == ids)
        #expect(window.setAside.isEmpty)
        #expect(window.acknowledgedThrough == 0)
    }
}
