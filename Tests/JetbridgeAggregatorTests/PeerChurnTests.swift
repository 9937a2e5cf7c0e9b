import Foundation
import JetbridgeAggregator
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 23 item 2: a device that goes away while `serve` is not reading its connection must not abort `serve`.
///
/// With ZMTP heartbeats on the data socket, libzmq 4.3.4 (and later releases: zeromq/libzmq#4364 is not fixed
/// upstream) aborts the process when a peer whose pipe is full (the store is slow, so the network thread stops
/// reading) closes its connection: the heartbeat timer writes to a connection already failed, and
/// `Assertion failed: !_io_error (src/stream_engine_base.cpp:331)` ends the process 5–10 s later. Dead peers are now
/// found by TCP keepalive and `TCP_USER_TIMEOUT` instead.
///
/// Real parts: a `serve` process on a PostgreSQL cluster of the test's own, frozen with SIGSTOP so the store thread
/// waits and the one-batch queue fills; a peer that fills its pipe (five small messages against a receive high-water
/// mark of four) and closes.
@Suite(
    "Peer churn: a full pipe's peer going away does not abort serve",
    .enabled(
        if: TestPostgres.enabled,
        "JETBRIDGE_TEST_POSTGRES is not set (start one with: eval \"$(Tests/postgres/start-throwaway.sh)\")")
)
struct PeerChurnTests {
    @Test func aPeerClosingWithAFullPipeWhileTheStoreStallsDoesNotAbortServe() async throws {
        let cluster = try await onOwnThread { try OwnPostgresCluster() }
        defer { cluster.remove() }
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = fixture.directory.appendingPathComponent("a")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        // One batch in hand is enough to stop the network thread reading the data socket.
        try Data(#"{"queueMaxBatches": 1}"#.utf8).write(to: home.appendingPathComponent("aggregator.json"))
        let serve = try await ServeProcess(store: cluster.url, in: fixture.directory, name: "a")
        let device = try RawDevice(id: "cart-1", to: serve)
        defer { device.close() }
        let first = try await onOwnThread {
            try device.send(try outgoing("cart-1", 1, (0..<5).map { order($0, seat: "\($0 + 1)A") }))
            return try device.ack()
        }
        #expect(first?.status == .stored)

        // The database freezes: the store thread waits in its transaction with batch 2, batch 3 fills the queue.
        try cluster.signalAll(SIGSTOP)
        var frozen = true
        defer { if frozen { _ = try? cluster.signalAll(SIGCONT) } }
        try device.send(try outgoing("cart-1", 6, (5..<10).map { order($0, seat: "\($0 + 1)A") }))
        // Batch 2 alone in the store thread's group (it waits a few milliseconds for more), then batch 3 queued.
        try await Task.sleep(for: .milliseconds(500))
        try device.send(try outgoing("cart-1", 11, (10..<15).map { order($0, seat: "\($0 + 1)A") }))
        try await Task.sleep(for: .milliseconds(500))

        // A peer fills its own pipe (high-water mark 4, a fifth message stops the input) and goes away.
        let context = try ZeroMQContext()
        let peer = try context.socket(.push)
        try peer.set(.linger, .zero)
        try peer.connect(serve.dataEndpoint)
        for n in 0..<5 {
            try peer.send([Data(repeating: UInt8(n), count: 10), Data(repeating: 0x20, count: 1_000)])
        }
        try await Task.sleep(for: .milliseconds(500))
        try peer.close(linger: .zero)
        await context.terminate()

        // With heartbeats the abort came 10 s after the connect; give it 15.
        let process = serve.process
        let deadline = ContinuousClock.now + .seconds(15)
        while ContinuousClock.now < deadline && process.isRunning { try await Task.sleep(for: .milliseconds(200)) }
        #expect(process.isRunning, "serve ended (status \(process.terminationStatus)): \(serve.logText.suffix(1_500))")

        // The database comes back: both waiting batches are answered, stored or `retry` (the frozen transaction may
        // have run into PostgreSQL's timeouts), a retried one is stored when sent again, and serve stops cleanly.
        try cluster.signalAll(SIGCONT)
        frozen = false
        let acks = try await onOwnThread { [try device.ack(timeout: .seconds(60)), try device.ack(timeout: .seconds(60))] }
        #expect(
            acks.allSatisfy { $0?.status == .stored || $0?.status == .retry }, "\(acks): \(serve.logText.suffix(3_000))")
        for case let ack? in acks where ack.status == .retry {
            // Batch 2 holds orders 5..<10 from sequence 6, batch 3 orders 10..<15 from 11.
            let orders = Int(ack.first) - 1..<Int(ack.first) + 4
            let again = try await onOwnThread {
                try device.send(try outgoing("cart-1", ack.first, orders.map { order($0, seat: "\($0 + 1)A") }))
                return try device.ack(timeout: .seconds(60))
            }
            #expect(again?.status == .stored, "\(String(describing: again)): \(serve.logText.suffix(3_000))")
        }
        try await serve.stop()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
    }
}
