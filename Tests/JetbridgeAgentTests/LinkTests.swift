import Foundation
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
        let configuration = try sandbox.configuration(batchRecords: 10, window: 4, ackTimeout: 0.2)
        let sync = Task { try await sandbox.sync(first, configuration: configuration, timeout: 30) }
        try await waitUntil { first.delivered.withLock { $0.deliveries.count } >= 4 }
        first.stop()
        // Down for 3 s: 15 ack timeouts of 0.2 s, each of which used to queue resends in the socket.
        try await Task.sleep(for: .seconds(3))
        let second = try TestGround(replacing: first)
        defer { second.stop() }
        let outcome = try await sync.value
        #expect(outcome.exitCode == 0, "\(outcome.result)")
        let delivered = second.delivered.withLock { $0 }
        #expect(delivered.records.count == 80)
        #expect(delivered.deliveries.values.allSatisfy { $0 == 1 }, "\(delivered.deliveries)")
        #expect(delivered.storedOffers == 80)
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
