import Foundation
import JetbridgeModel
import JetbridgeTestKit
import Logging
import Synchronization
import SystemSupport
import Testing
import ZeroMQ

@testable import JetbridgeAgent

/// How sync reacts to the link: a key refused and then allowed, a wrong server key, a ground nobody answers at.
@Suite("Sync and the link to the ground", .serialized)
struct LinkTests {
    @Test("a key the ground refused is picked up within seconds once allowed, without restarting sync")
    func refusedThenAllowed() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(30)
        let ground = try TestGround(allowed: false)
        defer { ground.stop() }
        // The timeout only bounds a hang: 20 s ran out once in a loaded full run (83 s) before the key was allowed.
        let sync = Task { try await sandbox.sync(ground, timeout: 120) }
        // Both channels refused at least once: libzmq gives up on such a connection for good. The bound only stops a
        // hang: a run beside three compilers on two cores saw no refusal within 60 s.
        try await waitUntil(seconds: 180) { ground.refusals.value >= 2 }
        ground.allowDevice()
        let outcome = try await sync.value
        #expect(outcome.exitCode == 0, "\(outcome.result) \(outcome.problem ?? "")")
        #expect(outcome.statistics.acknowledged == 30)
        #expect(ground.delivered.withLock { $0.records.count } == 30)
    }

    @Test("a wrong server key is named as such")
    func wrongServerKey() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(5)
        let ground = try TestGround()
        defer { ground.stop() }
        let other = try CurveKeyPair.generate()
        let options = SyncOptions(
            dataEndpoint: ground.dataEndpoint, ackEndpoint: ground.ackEndpoint,
            security: .curve(ground.deviceKeys, serverPublicKey: other.publicKey), untilDrained: true, timeout: 1.5,
            stopGrace: 0.2)
        let outcome = try await run(sandbox, options)
        #expect(outcome.exitCode == 75)
        #expect(
            outcome.problem?.contains("the ground's key does not match ground.serverPublicKey") == true,
            "\(outcome.problem ?? "no problem")")
        #expect(ground.delivered.withLock { $0.deliveries.isEmpty })
    }

    @Test("a ground nobody answers at: 'cannot reach tcp://…; retrying'")
    func unreachable() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(5)
        // Two ports that were just free: nothing listens there.
        let context = try ZeroMQContext()
        let probe = try context.socket(.pull)
        try probe.bind("tcp://127.0.0.1:*")
        let data = try probe.lastEndpoint
        try probe.unbind(data)
        try probe.bind("tcp://127.0.0.1:*")
        let acks = try probe.lastEndpoint
        try probe.close(linger: .zero)
        await context.terminate()
        let options = SyncOptions(
            dataEndpoint: data, ackEndpoint: acks,
            security: .curve(try CurveKeyPair.generate(), serverPublicKey: try CurveKeyPair.generate().publicKey),
            untilDrained: true, timeout: 1.5, stopGrace: 0.2)
        let lines = Lines()
        let outcome = try await run(sandbox, options) { lines.append(ProgressReporter.line($0, rate: 0)) }
        #expect(outcome.exitCode == 75)
        #expect(outcome.problem?.contains("cannot reach \(data)") == true, "\(outcome.problem ?? "no problem")")
        // The final word of a sync that is ending does not say it is retrying; the progress line while it ran did.
        #expect(outcome.problem?.hasSuffix("; retrying") == false, "\(outcome.problem ?? "no problem")")
        let last = try #require(lines.all.last)
        #expect(last.contains("cannot reach") && last.hasSuffix("; retrying"), "\(last)")
        #expect(!last.contains("in flight"), "\(last)")
    }

    @Test("while the ground is away nothing piles up: after it returns each unacknowledged batch arrives once")
    func noResendsWhileDown() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(80)
        // The first ground takes the window's batches and answers nothing, then goes away (its sockets closed).
        let first = try TestGround { _, _ in .drop }
        // An ack timeout of 1 s: after the ground returns, an ack slower than it is resent legitimately, and a CI run
        // on two loaded cores saw acks slower than the 0.2 s this test used (4 batches twice).
        let configuration = try sandbox.configuration(batchRecords: 10, window: 4, ackTimeout: 1)
        let sync = Task { try await sandbox.sync(first, configuration: configuration, timeout: 60) }
        try await waitUntil { first.delivered.withLock { $0.deliveries.count } >= 4 }
        first.stop()
        // Down for 6 s: 6 ack timeouts of 1 s, each of which used to queue resends in the socket.
        try await Task.sleep(for: .seconds(6))
        let second = try TestGround(replacing: first)
        defer { second.stop() }
        let outcome = try await sync.value
        #expect(outcome.exitCode == 0, "\(outcome.result)")
        let delivered = second.delivered.withLock { $0 }
        #expect(delivered.records.count == 80)
        // Nothing piled up: before, every ack timeout while the ground was away queued one more copy of each batch in
        // flight (one a second here, 6 in the outage). At most one extra copy of a batch in flight at the cut is allowed: on a loaded machine
        // the link monitor can report the cut after one ack timeout has already resent the window into the socket,
        // and that copy arrives besides the resend on reconnect (the ground counts it a duplicate).
        #expect(delivered.deliveries.values.allSatisfy { $0 <= 2 }, "\(delivered.deliveries)")
        #expect(delivered.storedOffers <= 80 + 4 * 10, "\(delivered.deliveries)")
    }

    /// Issue 25: a link cut while the device waits for the ground's confirmation, for longer than the wait to give up
    /// (shortened here to 5 s; 60 s for users), used to end `sync --until-drained` with the flight not confirmed (75).
    /// The wait counts from the summary's send, so it must outlast this test's own delay in stopping the ground on a
    /// loaded machine: 1.5 s once ran out in CI before the cut began.
    @Test("the wait for a confirmation pauses while the link is down: a cut longer than it ends confirmed")
    func confirmationWaitsOutACut() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(20)
        // The first ground stores the batches and leaves the summaries unanswered; it goes away while the device waits.
        let first = try TestGround(answersSummaries: false)
        var limits = DeliveryConfirmer.Limits()
        // 5 s: the time until the link monitor sees the cut counts as usable link, and under a loaded full run 3 s
        // ran out before it did ("sync ended while the link was down").
        limits.giveUp = 5
        limits.askAgain = 0.5
        let ended = Counter()
        let sync = Task {
            defer { ended.add() }
            return try await sandbox.sync(first, timeout: 30, confirmLimits: limits)
        }
        try await waitUntil { first.delivered.withLock { $0.ignoredSummaries } >= 1 }
        let stored = first.delivered.withLock { $0.records }
        #expect(stored.count == 20)
        first.stop()
        // Down for twice the wait (the outage's length is what is tested, not an event to wait for).
        try await Task.sleep(for: .seconds(10))
        #expect(ended.value == 0, "sync ended while the link was down")
        // The ground returns with its store.
        let second = try TestGround(replacing: first, holding: stored)
        defer { second.stop() }
        let outcome = try await sync.value
        #expect(outcome.exitCode == 0, "\(outcome.result) \(outcome.unconfirmed)")
        #expect(outcome.confirmedFlights == [FlightID.example.rawValue])
        #expect(outcome.statistics.resentForProof == 0)
        #expect(second.delivered.withLock { $0.summaries } >= 1)
    }

    /// The other side of the pause: a sync that never reaches a ground still ends, as before (exit 75 after the wait).
    @Test("with no ground at all, a flight waiting for its confirmation is given up after the wait")
    func noGroundStillEnds() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(5)
        let ground = try TestGround()
        let delivered = try await sandbox.sync(ground)
        #expect(delivered.exitCode == 0 && delivered.confirmedFlights.count == 1, "\(delivered.result)")
        ground.stop()
        var limits = DeliveryConfirmer.Limits()
        limits.giveUp = 2
        let outcome = try await sandbox.sync(ground, timeout: 30, confirmLimits: limits)
        #expect(outcome.exitCode == 75, "\(outcome.result)")
        #expect(outcome.statistics.elapsed < 10)
        #expect(
            outcome.unconfirmed[FlightID.example.rawValue] == "no aggregator was reachable in 2 s",
            "\(outcome.unconfirmed)")
    }

    /// `sync --until-drained --timeout S` that ends in the wait for a confirmation, everything acknowledged, is 75
    /// like a drained run that gave the flight up: a script's `sync … && hand back` must not go on. Before, it was 0.
    @Test func anUntilDrainedRunThatTimesOutWaitingForAConfirmationIsNotSuccess() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(5)
        let ground = try TestGround(answersSummaries: false)
        defer { ground.stop() }
        let outcome = try await sandbox.sync(ground, timeout: 2)
        #expect(outcome.remaining == 0, "\(outcome.result)")
        #expect(outcome.result == "timed out, all acknowledged")
        #expect(outcome.unconfirmed[FlightID.example.rawValue] != nil, "\(outcome.unconfirmed)")
        #expect(outcome.exitCode == 75)
        // Without --until-drained (a service's run, stopped), the same ending is not a failure.
        var service = outcome
        service.untilDrained = false
        #expect(service.exitCode == 0)
    }

    private func run(
        _ sandbox: SyncSandbox, _ options: SyncOptions, progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) async throws -> SyncOutcome {
        let service = SyncService(
            configuration: try sandbox.configuration(), options: options, logger: Logger(label: "test.link"),
            progress: progress)
        try await service.run()
        return try #require(service.outcome)
    }
}

final class Lines: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}

/// Polls `condition` every 10 ms for up to `seconds` (a bound on a hang: the full suite can keep a task waiting for
/// the cooperative pool for many seconds); fails the test if it never holds.
func waitUntil(
    seconds: Double = 60, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () throws -> Bool
) async throws {
    do {
        try await JetbridgeTestKit.waitUntil("the condition", timeout: .seconds(seconds), condition)
    } catch is TimedOut {
        Issue.record("condition not met within \(seconds) s", sourceLocation: sourceLocation)
        throw CancellationError()
    }
}
