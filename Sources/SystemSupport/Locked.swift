/// A value behind a lock, for the little state threads share (NIOConcurrencyHelpers' `NIOLockedValueBox`).
///
/// A pthread mutex (``ConditionLock``) rather than `Synchronization.Mutex`: a `Mutex` wants its value and results
/// *sent* in and out (`sending`), which state holding file descriptors and buffers is not. Sendable because every access to the value
/// goes through ``withLock(_:)``.
///
/// Never a bare function type (or an optional one) as `Value`: each `inout` access reabstracts it, wrapping the stored
/// closure in two more thunks, so calls through it grow slower and deeper with every access until the stack
/// overflows. Put the function in a struct (`MetricsServer`'s responder once crashed `serve` that way).
package final class Locked<Value>: @unchecked Sendable {
    private let lock = ConditionLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value while holding the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
