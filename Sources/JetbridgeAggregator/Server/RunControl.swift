import Logging
import SystemSupport

/// Whether the server should stop or reload, why it failed, and who waits for its end: the one piece of run state
/// the server, its loops and its lifecycle thread share (each loop gets it explicitly).
final class RunControl: Sendable {
    private struct State {
        var stopRequested = false
        var reloadRequested = false
        var finished = false
        var failure: AggregatorError?
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Begins a graceful stop; returns at once.
    func stop() {
        let first = state.withLock { state in
            defer { state.stopRequested = true }
            return !state.stopRequested
        }
        if first { logger.info("aggregator stopping: committing and acking the batches in hand") }
    }

    /// Records a failure that stops the server; ``failure`` returns it.
    func fail(_ error: AggregatorError) {
        logger.critical("aggregator failed: \(error.message)")
        state.withLock { if $0.failure == nil { $0.failure = error } }
        stop()
    }

    /// Asks the network thread to reload the allow list at its next turn.
    func requestReload() { state.withLock { $0.reloadRequested = true } }

    /// Whether a reload was asked for since the last call (and clears the request).
    func takeReloadRequest() -> Bool {
        state.withLock { state in
            defer { state.reloadRequested = false }
            return state.reloadRequested
        }
    }

    var stopRequested: Bool { state.withLock { $0.stopRequested } }

    /// Whether a stop has begun or is complete.
    var stoppingOrFinished: Bool { state.withLock { $0.stopRequested || $0.finished } }

    /// The failure that stopped the server, if one did.
    var failure: AggregatorError? { state.withLock { $0.failure } }

    /// Marks the stop complete and wakes whoever waits in ``finished()``.
    func finish() {
        let waiters = state.withLock { state in
            state.finished = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Waits until ``finish()``.
    func finished() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let done = state.withLock { state in
                if state.finished { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }
}
