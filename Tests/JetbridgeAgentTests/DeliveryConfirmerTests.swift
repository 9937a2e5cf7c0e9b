import Foundation
import JetbridgeProtocol
import Testing

@testable import JetbridgeAgent

/// ``DeliveryConfirmer`` without sockets, as ``SyncWindow`` is tested: when to ask, what the answers mean, when to
/// send a flight again and when to give up.
@Suite("Proof of delivery: the confirmer")
struct DeliveryConfirmerTests {
    static let flight = "ZA101/2026-11-21"

    static func summary(_ count: Int) -> DeliverySummary {
        var summary = DeliverySummary()
        for index in 0..<count { summary.add(scan: UUID(uuidString: String(format: "00000000-0000-0000-0000-%012d", index))!) }
        return summary
    }

    static func answer(_ status: SummaryAnswer.Status, held: DeliverySummary? = nil) -> SummaryAnswer {
        SummaryAnswer(
            device: "cart-1", flight: flight, status: status, count: held?.count, digest: held?.digestBytes,
            reason: held == nil ? "by the test" : nil)
    }

    @Test func aFlightIsAskedOnceThenAgainAfterSilenceAndGivenUpAfterTheWait() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        #expect(confirmer.due(now: 0).map(\.flight) == [Self.flight])
        #expect(confirmer.due(now: 1).isEmpty)
        #expect(confirmer.due(now: 3).map(\.asks) == [2])
        #expect(!confirmer.isSettled)
        #expect(confirmer.due(now: 59).map(\.asks) == [3])
        #expect(!confirmer.isSettled)
        #expect(confirmer.due(now: 60).isEmpty)
        #expect(confirmer.isSettled)
        #expect(confirmer.unconfirmed[Self.flight]?.contains("did not answer") == true)
    }

    @Test func beforeTheGroundIsReachedNothingIsSentButTheWaitRuns() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        #expect(confirmer.due(now: 0, ground: .unreached).isEmpty)
        // The link comes up: asked at once; the second before it counted.
        #expect(confirmer.due(now: 1).map(\.asks) == [1])
        #expect(confirmer.due(now: 59.5).count == 1 && !confirmer.isSettled)
        #expect(confirmer.due(now: 60).isEmpty && confirmer.isSettled)
    }

    /// A sync with no ground at all still ends (`--until-drained` exits 75): the wait runs until a ground is reached.
    @Test func withNoGroundReachedTheFlightIsGivenUpAfterTheWait() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        for t in stride(from: 0.0, through: 59.9, by: 0.1) {
            #expect(confirmer.due(now: t, ground: .unreached).isEmpty)
        }
        #expect(!confirmer.isSettled)
        #expect(confirmer.due(now: 60, ground: .unreached).isEmpty && confirmer.isSettled)
        #expect(confirmer.unconfirmed[Self.flight] == "no aggregator was reachable in 60 s")
    }

    /// Issue 25: a cut longer than the wait, during the wait, used to end the sync with the flight not confirmed.
    @Test func theWaitPausesWhileTheLinkIsLostAndResumesWhenItReturns() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        #expect(confirmer.due(now: 0).map(\.asks) == [1])
        // Lost 10 s later, for two minutes: nothing is sent and the wait stands still.
        #expect(confirmer.due(now: 10, ground: .lost).isEmpty)
        for t in stride(from: 10.0, through: 130, by: 5) {
            #expect(confirmer.due(now: t, ground: .lost).isEmpty)
        }
        #expect(!confirmer.isSettled)
        // Back: asked again at once; 10 s counted before the cut, so 50 s of link are left.
        #expect(confirmer.due(now: 130.5).map(\.asks) == [2])
        #expect(confirmer.due(now: 180).map(\.asks) == [3])
        #expect(!confirmer.isSettled)
        #expect(confirmer.due(now: 181).isEmpty && confirmer.isSettled)
        #expect(
            confirmer.unconfirmed[Self.flight]?.contains("did not answer its summary in 60 s of usable link") == true)
    }

    /// A flight that becomes due while the link is lost waits without counting, and is asked once the link returns.
    @Test func aFlightDueWhileTheLinkIsLostIsAskedWhenItReturns() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        #expect(confirmer.due(now: 0).isEmpty == false)
        #expect(confirmer.apply(Self.answer(.confirmed, held: Self.summary(3)), now: 0.1) != .none)
        // More acknowledged, then the link is lost before the new summary could be asked.
        confirmer.refresh(held: [Self.flight: Self.summary(4)])
        #expect(confirmer.due(now: 1, ground: .lost).isEmpty)
        #expect(confirmer.due(now: 300, ground: .lost).isEmpty && !confirmer.isSettled)
        #expect(confirmer.due(now: 301).map(\.asks) == [1])
        #expect(
            confirmer.apply(Self.answer(.confirmed, held: Self.summary(4)), now: 301.1)
                == .confirmed(flight: Self.flight, summary: Self.summary(4)))
    }

    /// Several cuts: only the time with a usable link adds up to the wait.
    @Test func onlyTimeWithAUsableLinkCounts() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(3)])
        var t = 0.0
        // 20 s up, then 100 s lost, twice: 40 s counted at t = 240.
        for _ in 0..<2 {
            for step in 0..<20 { _ = confirmer.due(now: t + Double(step)) }
            t += 20
            for step in 0..<100 { _ = confirmer.due(now: t + Double(step), ground: .lost) }
            t += 100
        }
        for step in 0..<20 { _ = confirmer.due(now: t + Double(step)) }
        #expect(!confirmer.isSettled)
        // The 60th second of link.
        _ = confirmer.due(now: t + 20)
        #expect(confirmer.isSettled)
    }

    @Test func mismatchResendsAtMostThreeTimesThenGivesUp() {
        var confirmer = DeliveryConfirmer()
        let held = Self.summary(10)
        confirmer.refresh(held: [Self.flight: held])
        for round in 1...3 {
            _ = confirmer.due(now: Double(round))
            #expect(
                confirmer.apply(Self.answer(.mismatch, held: Self.summary(9)), now: Double(round))
                    == .resend(flight: Self.flight, groundCount: 9))
            #expect(confirmer.isResending && !confirmer.isSettled)
            // The resend acknowledged: the same summary, asked again.
            confirmer.refresh(held: [Self.flight: held])
        }
        _ = confirmer.due(now: 4)
        guard case .gaveUp(_, let reason) = confirmer.apply(Self.answer(.mismatch, held: Self.summary(9)), now: 4) else {
            Issue.record("not given up after 3 resends")
            return
        }
        #expect(reason.contains("holds 9 of this device's 10"))
        #expect(confirmer.isSettled && confirmer.confirmedFlights.isEmpty)
    }

    @Test func confirmedOnlyForTheSummaryAskedAndLateAnswersAreIgnored() {
        var confirmer = DeliveryConfirmer()
        let held = Self.summary(4)
        confirmer.refresh(held: [Self.flight: held])
        // An answer before any ask (late, from an earlier run): ignored.
        #expect(confirmer.apply(Self.answer(.confirmed, held: held), now: 0) == .none)
        _ = confirmer.due(now: 0)
        #expect(confirmer.apply(Self.answer(.confirmed, held: held), now: 0.1) == .confirmed(flight: Self.flight, summary: held))
        #expect(confirmer.isSettled && confirmer.confirmedFlights == [Self.flight])
        // More captured and acknowledged: a new summary, asked again.
        confirmer.refresh(held: [Self.flight: Self.summary(5)])
        #expect(!confirmer.isSettled && confirmer.due(now: 1).count == 1)
        // `confirmed` naming the summary asked before is that ask's late answer: no action; naming one never asked in
        // this run, it is not a confirmation of this one.
        #expect(confirmer.apply(Self.answer(.confirmed, held: held), now: 1.1) == .none)
        #expect(
            confirmer.apply(Self.answer(.confirmed, held: Self.summary(3)), now: 1.2)
                == .resend(flight: Self.flight, groundCount: 3))
    }

    @Test func refusalsGiveUpWithTheGroundsReasonAndRetryAsksSoon() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(2)])
        _ = confirmer.due(now: 0)
        #expect(confirmer.apply(Self.answer(.retry), now: 0.5) == .none)
        #expect(confirmer.due(now: 1.4).isEmpty && confirmer.due(now: 1.6).count == 1)
        // `retry` answers do not stop the wait: a ground busy for all of it gives the flight up, saying so.
        var busy = confirmer
        for t in stride(from: 2.0, through: 62, by: 1) {
            _ = busy.apply(Self.answer(.retry), now: t)
            _ = busy.due(now: t)
        }
        #expect(busy.isSettled)
        #expect(busy.unconfirmed[Self.flight]?.contains("answered retry (busy)") == true, "\(busy.unconfirmed)")
        guard case .gaveUp(_, let reason) = confirmer.apply(Self.answer(.forbidden), now: 2) else {
            Issue.record("forbidden did not give up")
            return
        }
        #expect(reason.contains("forbidden") && reason.contains("by the test"))
        #expect(confirmer.isSettled)
    }

    /// A record of the flight acknowledged while its summary was out (a scan at arrival while sync runs): the ground
    /// may count it, so its answer differs from the summary asked. The flight is asked again with the new summary,
    /// nothing is sent again, and the give-up wait goes on from the first ask (asking again cannot go on for ever).
    /// Before, every such answer sent the whole flight again.
    @Test func anAnswerCountingRecordsAcknowledgedSinceTheAskAsksAgainInsteadOfResending() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(10)])
        #expect(confirmer.due(now: 0).map(\.asks) == [1])
        #expect(
            confirmer.apply(Self.answer(.mismatch, held: Self.summary(11)), now: 1, changedSinceAsked: true)
                == .askAgain(flight: Self.flight, groundCount: 11))
        #expect(!confirmer.isResending && !confirmer.isSettled)
        // The summary computed again counts the record: asked at once, and confirmed.
        confirmer.refresh(held: [Self.flight: Self.summary(11)])
        #expect(confirmer.due(now: 2).map(\.summary) == [Self.summary(11)])
        #expect(
            confirmer.apply(Self.answer(.confirmed, held: Self.summary(11)), now: 2.1)
                == .confirmed(flight: Self.flight, summary: Self.summary(11)))

        // Records acknowledged on and on: asked again each time, and given up once the wait from the first ask ends.
        confirmer.refresh(held: [Self.flight: Self.summary(12)])
        _ = confirmer.due(now: 10)
        for (step, count) in (13...15).enumerated() {
            let t = 10 + 20 * Double(step + 1)
            #expect(
                confirmer.apply(Self.answer(.mismatch, held: Self.summary(count)), now: t, changedSinceAsked: true)
                    == .askAgain(flight: Self.flight, groundCount: count))
            confirmer.refresh(held: [Self.flight: Self.summary(count)])
            _ = confirmer.due(now: t)
        }
        #expect(!confirmer.isSettled)
        _ = confirmer.due(now: 71)
        #expect(confirmer.isSettled && confirmer.confirmedFlights.isEmpty)
        #expect(confirmer.unconfirmed[Self.flight]?.contains("kept being acknowledged after each ask") == true)
        // Unchanged since the ask, the same answer sends the flight again, as before.
        confirmer.refresh(held: [Self.flight: Self.summary(16)])
        _ = confirmer.due(now: 100)
        #expect(
            confirmer.apply(Self.answer(.mismatch, held: Self.summary(9)), now: 101, changedSinceAsked: false)
                == .resend(flight: Self.flight, groundCount: 9))
    }

    /// Asked with 10 records; 2 more acknowledged, the summary computed again and asked with 12; then the late
    /// answer to the first ask comes (the ground held the 10 it was asked about). It is not a mismatch of the 12: no
    /// resend; the answer to the current ask confirms.
    @Test func aLateAnswerToAnEarlierAskOfThisRunIsNotAMismatch() {
        var confirmer = DeliveryConfirmer()
        confirmer.refresh(held: [Self.flight: Self.summary(10)])
        _ = confirmer.due(now: 0)
        confirmer.refresh(held: [Self.flight: Self.summary(12)])
        #expect(confirmer.due(now: 0.5).map(\.summary) == [Self.summary(12)])
        #expect(confirmer.apply(Self.answer(.confirmed, held: Self.summary(10)), now: 0.6) == .none)
        #expect(!confirmer.isResending)
        #expect(
            confirmer.apply(Self.answer(.confirmed, held: Self.summary(12)), now: 0.7)
                == .confirmed(flight: Self.flight, summary: Self.summary(12)))
        // A held summary never asked in this run is a mismatch, as before.
        confirmer.refresh(held: [Self.flight: Self.summary(13)])
        _ = confirmer.due(now: 1)
        #expect(
            confirmer.apply(Self.answer(.mismatch, held: Self.summary(11)), now: 1.1)
                == .resend(flight: Self.flight, groundCount: 11))
    }
}
