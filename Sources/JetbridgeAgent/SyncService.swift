public import Logging
public import ServiceLifecycle
import Synchronization

/// `jetbridge-agent sync` as a swift-service-lifecycle `Service`: sends the queue to the ground and advances it over
/// what the ground acknowledged (docs/PROTOCOL.md, Delivery).
///
/// Graceful shutdown (SIGTERM/SIGINT through the `ServiceGroup` that `@main` runs it in, as service-lifecycle
/// intends) or cancellation stops sending, waits briefly for acks of batches already sent, acknowledges the queue
/// over what was confirmed, closes the sockets with a short linger and ends `run()`; ``outcome`` then says how it
/// ended and with which exit code. The sockets and the queue live on a thread of their own.
public final class SyncService: Service, Sendable {
    private let engine: SyncEngine
    private let result = Mutex<SyncOutcome?>(nil)

    /// - Parameters:
    ///   - configuration: The agent's configuration (queue, device, batch limits, window, ack timeout).
    ///   - options: Endpoints, keys, and when to end.
    ///   - logger: Diagnostics.
    ///   - progress: Called on the sync thread at most ten times a second with where the run stands.
    public init(
        configuration: AgentConfiguration, options: SyncOptions, logger: Logger,
        progress: (@Sendable (SyncProgress) -> Void)? = nil
    ) {
        engine = SyncEngine(configuration: configuration, options: options, logger: logger, progress: progress)
    }

    /// Runs until drained (with `untilDrained`), the timeout, a fatal answer from the ground, or shutdown.
    ///
    /// Never throws for a sync that ends badly: that is in ``outcome``.
    public func run() async throws {
        let engine = self.engine
        let outcome = await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await engine.run()
            } onCancel: {
                engine.requestStop()
            }
        } onGracefulShutdown: {
            engine.requestStop()
        }
        result.withLock { $0 = outcome }
    }

    /// How the run ended; `nil` until ``run()`` returns.
    public var outcome: SyncOutcome? { result.withLock { $0 } }
}
