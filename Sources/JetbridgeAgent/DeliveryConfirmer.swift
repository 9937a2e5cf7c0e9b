import JetbridgeProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Proof of delivery as a pure value type (docs/AGENT.md, "Proof of delivery"), like ``SyncWindow``: which flights
/// to ask the ground about, what its answers mean, when to send a flight again and when to give up. The sync loop
/// does the I/O: it sends the summaries this asks for, re-appends a flight's records to the queue when this says
/// `resend`, and records confirmations.
struct DeliveryConfirmer: Sendable {
    struct Limits: Sendable {
        /// Seconds without an answer before a summary is asked again (of the next aggregator).
        var askAgain = 3.0
        /// Seconds without any answer before the flight is given up for this run (an old ground ignores summaries, or
        /// none is reachable), counted on the ``waited`` clock: while the link is lost the wait pauses, so a cut of any
        /// length is ridden out as the batches ride it out (Tests/netlab's `cut30`: its devices that had everything
        /// acknowledged before the cut gave up at 15 s; a wait that counted the cut still gave up on one past a
        /// minute). Long enough for the up to 20 s the agent takes to notice a cut link (`TCP_MAXRT`, the heartbeat's
        /// timeout), which still count.
        var giveUp = 60.0
        /// Resends of a flight after `mismatch`, at most, in one run.
        var maxResends = 3
        /// Seconds before asking again after `retry`.
        var retryDelay = 1.0
    }

    enum State: Sendable, Hashable {
        /// To be asked.
        case unasked
        /// Asked at `at` (the caller's clock), `asks` times; first asked when the ``waited`` clock read `since`.
        case asking(since: Double, at: Double, asks: Int)
        /// Confirmed by the ground (now or in an earlier run).
        case confirmed
        /// Its records were appended to the queue again after a `mismatch`; asked again once they are acknowledged.
        case resending
        /// Not confirmed in this run, and why.
        case gaveUp(String)
    }

    struct Flight: Sendable, Hashable {
        var summary: DeliverySummary
        var state: State
        var resends = 0
        /// The ground's count in its last `mismatch`.
        var groundCount: Int?
        /// When asked again because records of the flight were acknowledged after the summary was computed: when
        /// the asking began (the ``waited`` clock), so the give-up wait goes on from there; nil when not asked again.
        var reaskedSince: Double?
        /// The ground's last answer was `retry` (busy): the wait that runs out was not silence.
        var retried = false
        /// The summaries asked of the ground for this flight in this run, the current one included.
        var asked: Set<DeliverySummary> = []
    }

    /// What the loop does after an answer.
    enum Action: Sendable, Hashable {
        case none
        /// Record the confirmation of `summary` for `flight`.
        case confirmed(flight: String, summary: DeliverySummary)
        /// Append the flight's acknowledged records to the queue again.
        case resend(flight: String, groundCount: Int)
        /// The answer counts records acknowledged after the summary was computed: the flight is asked again with
        /// the new summary, and nothing is sent again.
        case askAgain(flight: String, groundCount: Int)
        case gaveUp(flight: String, reason: String)
    }

    /// The aggregators as the loop sees them when it asks what is due.
    enum Ground: Sendable, Hashable {
        /// At least one aggregator is usable: summaries go out, and the wait runs.
        case usable
        /// An aggregator was usable in this run and none is now (a cut link, a ground restarting): nothing is sent and
        /// the wait pauses, so a cut longer than ``Limits/giveUp`` does not end the run with flights not confirmed.
        case lost
        /// No aggregator has been usable yet in this run: nothing is sent, but the wait runs, so a sync with no ground
        /// at all ends (`--until-drained` exits 75 after ``Limits/giveUp``).
        case unreached
    }

    var limits = Limits()
    private(set) var flights: [String: Flight] = [:]
    /// Seconds the give-up wait has counted: the time between calls of ``due(now:ground:)`` that began with the ground
    /// usable or not yet reached, and not the time it was lost.
    private(set) var waited = 0.0
    /// The previous call of ``due(now:ground:)``: when, and whether the time since counts.
    private var lastDue: (at: Double, counts: Bool)?
    /// Whether an aggregator was reached in this run (the reason a flight is given up says which wait it was).
    private var reached = false

    /// Takes what the device holds acknowledged now. Every flight is asked about once per run, also one the ground
    /// confirmed in an earlier run: the ground may have lost rows since (a failover, a restore), and the device still
    /// holds what repairs it. A flight asked about in this run keeps its state while its summary stays the same.
    /// - Parameter held: Per flight, the summary of its acknowledged records.
    mutating func refresh(held: [String: DeliverySummary]) {
        for (flight, summary) in held {
            guard var entry = flights[flight], entry.summary == summary || entry.state == .resending else {
                flights[flight] = Flight(
                    summary: summary, state: .unasked, reaskedSince: flights[flight]?.reaskedSince,
                    asked: flights[flight]?.asked ?? [])
                continue
            }
            if entry.state == .resending || entry.state == .confirmed { entry.state = .unasked }
            entry.summary = summary
            flights[flight] = entry
        }
    }

    /// Whether a flight waits for its resend to be acknowledged.
    var isResending: Bool { flights.values.contains { $0.state == .resending } }

    /// Flights to ask about now (first asks, asks again after a silence); gives up those silent too long.
    /// - Parameters:
    ///   - t: Now, in seconds on the caller's clock (called every turn of the loop while it waits for answers).
    ///   - ground: Whether an aggregator is usable now, was lost, or was never reached in this run. Without one nothing
    ///     is due; the time to give up pauses while the ground is lost and runs until it is first reached.
    mutating func due(now t: Double, ground: Ground = .usable) -> [(
        flight: String, summary: DeliverySummary, asks: Int
    )] {
        if let lastDue, lastDue.counts { waited += max(0, t - lastDue.at) }
        lastDue = (t, ground != .lost)
        if ground != .unreached { reached = true }
        let canSend = ground == .usable
        var due: [(String, DeliverySummary, Int)] = []
        for flight in flights.keys.sorted() {
            guard var entry = flights[flight] else { continue }
            switch entry.state {
            case .unasked where !canSend:
                entry.state = .asking(since: entry.reaskedSince ?? waited, at: -.infinity, asks: 0)
            case .unasked:
                entry.state = .asking(since: entry.reaskedSince ?? waited, at: t, asks: 1)
                entry.asked.insert(entry.summary)
                due.append((flight, entry.summary, 1))
            case .asking(let since, _, _) where waited - since >= limits.giveUp:
                let reasked = entry.reaskedSince != nil
                entry.reaskedSince = nil
                entry.state = .gaveUp(
                    entry.retried
                        ? "the ground answered retry (busy) to its summary for \(Int(limits.giveUp)) s of usable link"
                        : reasked
                            ? "records of the flight kept being acknowledged after each ask for \(Int(limits.giveUp)) s (captures still arriving): asked again at the next sync"
                        : reached
                            ? "the ground did not answer its summary in \(Int(limits.giveUp)) s of usable link (an aggregator that predates proof of delivery?)"
                            : "no aggregator was reachable in \(Int(limits.giveUp)) s")
            case .asking(let since, let at, let asks) where canSend && t - at >= limits.askAgain:
                entry.state = .asking(since: since, at: t, asks: asks + 1)
                entry.asked.insert(entry.summary)
                due.append((flight, entry.summary, asks + 1))
            default: break
            }
            flights[flight] = entry
        }
        return due
    }

    /// Applies the ground's answer.
    /// - Parameter changedSinceAsked: Records of the flight were acknowledged after the summary asked was computed.
    ///   The ground may count them already, so an answer that differs asks again with the new summary (until the
    ///   give-up wait ends) instead of sending the whole flight again: before, a capture acknowledged while its
    ///   flight's summary was out (scans at arrival while sync runs) made the device send every record of the flight
    ///   again, up to ``Limits/maxResends`` times.
    mutating func apply(_ answer: SummaryAnswer, now t: Double, changedSinceAsked: Bool = false) -> Action {
        guard var entry = flights[answer.flight], case .asking(let since, _, let asks) = entry.state else {
            return .none
        }
        defer { flights[answer.flight] = entry }
        // The ground holds exactly what an earlier ask of this run counted: the late answer to that ask, not to the
        // one out now (its records acknowledged since were stored before their acks). Before, it read as a mismatch
        // and the whole flight was sent again. The answer to the current ask follows; should the ground really hold
        // only that earlier summary (acknowledged rows lost since), the flight is given up in this run and the next
        // sync asks again and repairs it.
        if let held = answer.held, held != entry.summary, entry.asked.contains(held),
            answer.status == .confirmed || answer.status == .mismatch
        {
            return .none
        }
        switch answer.status {
        case .confirmed where answer.held == entry.summary:
            entry.state = .confirmed
            entry.reaskedSince = nil
            return .confirmed(flight: answer.flight, summary: entry.summary)
        case .confirmed where changedSinceAsked, .mismatch where changedSinceAsked:
            entry.retried = false
            entry.groundCount = answer.held?.count ?? 0
            entry.state = .unasked
            entry.reaskedSince = since
            return .askAgain(flight: answer.flight, groundCount: entry.groundCount ?? 0)
        case .confirmed, .mismatch:
            let count = answer.held?.count ?? 0
            entry.groundCount = count
            entry.reaskedSince = nil
            entry.retried = false
            guard entry.resends < limits.maxResends else {
                let reason =
                    "the ground holds \(count) of this device's \(entry.summary.count) records of the flight (or other revisions) after \(entry.resends) resends"
                entry.state = .gaveUp(reason)
                return .gaveUp(flight: answer.flight, reason: reason)
            }
            entry.resends += 1
            entry.state = .resending
            return .resend(flight: answer.flight, groundCount: count)
        case .retry:
            entry.retried = true
            entry.state = .asking(since: since, at: t - limits.askAgain + limits.retryDelay, asks: asks)
            return .none
        case .rejected, .forbidden, .unsupportedVersion:
            entry.retried = false
            let reason = "the ground refused the summary (\(answer.status.rawValue)): \(SummaryAnswer.shown(answer.reason))"
            entry.state = .gaveUp(reason)
            return .gaveUp(flight: answer.flight, reason: reason)
        }
    }

    /// No summary waits for an answer or a resend: every flight is confirmed or given up for this run.
    var isSettled: Bool {
        flights.values.allSatisfy {
            switch $0.state {
            case .confirmed, .gaveUp: true
            default: false
            }
        }
    }

    /// Flights not confirmed, with why (those given up; those still in progress when the run ended).
    var unconfirmed: [String: String] {
        flights.compactMapValues { entry in
            switch entry.state {
            case .confirmed: nil
            case .gaveUp(let reason): reason
            case .resending: "its records were being sent again when the sync ended"
            case .asking, .unasked: "not confirmed yet when the sync ended"
            }
        }
    }

    var confirmedFlights: [String] { flights.filter { $0.value.state == .confirmed }.keys.sorted() }
}

extension SummaryAnswer {
    /// A reason from the ground as a device shows it (bounded, like an ack's).
    static func shown(_ reason: String?) -> String {
        reason.map { Ack.bounded($0, scalars: Ack.maxReasonScalars) } ?? "no reason given"
    }
}
