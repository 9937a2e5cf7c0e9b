import Foundation
import Logging
import ServiceLifecycle
import SystemSupport

// The services of `serve`, run in one `ServiceGroup` by ``AggregatorServer/run()``. Each owns its thread through
// SystemSupport's `runOnOwnThread` (every call it makes blocks: ZeroMQ, SQLite, PostgreSQL futures, files) and turns
// graceful shutdown and cancellation into its loop's stop. The group starts them in the order of
// ``AggregatorServer/services`` and shuts them down in reverse, one after the other:
//
//   ingress   stops reading batches and closes the queue, then keeps sending answers until the store is done
//   store     commits and answers what was queued, then ends (the queue is closed and drained)
//   receipts  refreshes at most one more group of seats
//   status    writes no more status files and removes the last one
//   bags      reads the flights' bags no more (`jetbridge_flight_bags` keeps its last reading) and closes its reader
//   console   stops answering HTTP, closes its read pool and its store reader
//   metrics   stops answering HTTP (`/readyz` says "stopping" until then)
//
// A service that fails (a socket or store thread that cannot go on) cancels the group: every loop stops at once, and
// nothing is acked that was not committed.

/// The network thread (``NetworkLoop``): data and ack sockets.
struct IngressService: Service, CustomStringConvertible {
    var description: String { "ingress (the network thread)" }
    let loop: NetworkLoop

    func run() async throws {
        let loop = loop
        try await runUntilStopped("jb-network", { try loop.run() }, stop: { loop.requestStop() })
    }
}

/// Runs `body` on a thread of its own (SystemSupport's `runOnOwnThread`) until it returns; graceful shutdown and
/// cancellation both call `stop`, after which `body` must return soon.
private func runUntilStopped(
    _ thread: String, _ body: @escaping @Sendable () throws -> Void, stop: @escaping @Sendable () -> Void
) async throws {
    try await withTaskCancellationHandler {
        try await withGracefulShutdownHandler {
            try await runOnOwnThread(thread, body)
        } onGracefulShutdown: {
            stop()
        }
    } onCancel: {
        stop()
    }
}

/// The store thread (``StoreLoop``): ends once the ingress closed the queue and the store answered what was in it.
struct StoreService: Service, CustomStringConvertible {
    var description: String { "store (the store thread)" }
    let loop: StoreLoop
    let queue: BatchQueue

    func run() async throws {
        let loop = loop
        // Graceful shutdown needs nothing here: the ingress, shut down first, closes the queue. Cancellation (another
        // service failed) closes it from this side.
        await withTaskCancellationHandler {
            await runOnOwnThread("jb-store") { loop.run() }
        } onCancel: { [queue] in
            queue.close()
        }
        // The loop ends while the ingress is still shutting down (it sends the last answers after this): the group
        // wants each service to end in its turn, which comes next.
        try? await gracefulShutdown()
    }
}

/// The receipts thread (``ReceiptWorker``).
struct ReceiptsService: Service, CustomStringConvertible {
    var description: String { "receipts (the receipts thread)" }
    let worker: ReceiptWorker

    func run() async throws {
        let worker = worker
        try await runUntilStopped("jb-receipts", { worker.run() }, stop: { worker.requestStop() })
    }
}

/// The status thread: reads the receipts backlog and rewrites `<home>/status.json` every
/// ``ServeStatus/writeInterval``; removes the file when it stops (no status is better than a stale one).
struct StatusService: Service, CustomStringConvertible {
    var description: String { "status (the status thread)" }
    let server: AggregatorServer

    func run() async throws {
        let server = server
        let stop = Locked(false)
        try await runUntilStopped(
            "jb-status", { server.writeStatus(until: { stop.withLock { $0 } }) }, stop: { stop.withLock { $0 = true } })
    }
}

/// The flight-bags thread (``FlightBagsReader``): each recent flight's bags for `jetbridge_flight_bags`, read every
/// 30 s from a store reader of its own; closes that reader when it stops.
struct FlightBagsService: Service, CustomStringConvertible {
    var description: String { "flight bags (the flight-bags thread)" }
    let reader: FlightBagsReader

    func run() async throws {
        let reader = reader
        let stop = Locked(false)
        try await runUntilStopped(
            "jb-flight-bags", { reader.run(until: { stop.withLock { $0 } }) }, stop: { stop.withLock { $0 = true } })
        reader.close()
    }
}

/// `/metrics`, `/healthz` and `/readyz` (``MetricsServer``, bound by the builder): answers from the start of the group
/// to the end of its shutdown, last of all.
struct MetricsService: Service, CustomStringConvertible {
    var description: String { "metrics (the HTTP endpoint)" }
    let server: MetricsServer

    func run() async throws {
        // Answering since ``AggregatorServer/run()`` started it, before it logged `aggregator serving`.
        // Until graceful shutdown or cancellation; then the listening socket closes.
        try? await gracefulShutdown()
        let server = server
        await runOnOwnThread("jb-metrics-stop") { server.shutdown() }
    }
}

/// The operator's console (``ConsoleServer``, bound by the builder, started by ``AggregatorServer/run()``): answers
/// until its shutdown, just before the metrics endpoint's.
struct ConsoleService: Service, CustomStringConvertible {
    var description: String { "console (the console's HTTP endpoint)" }
    let server: ConsoleServer

    func run() async throws {
        // Answering since ``AggregatorServer/run()`` started it, before it logged `aggregator serving`.
        try? await gracefulShutdown()
        let server = server
        await runOnOwnThread("jb-console-stop") { server.shutdown() }
    }
}
