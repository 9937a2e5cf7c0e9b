import Foundation

/// State guarded by a lock, for the one writer and one reader state of a ``FileQueue``.
///
/// `Synchronization.Mutex` would do, but needs macOS 15 and the package supports macOS 14; `NSLock` works
/// everywhere. Sendable because every access to `state` goes through `withLock`.
final class Locked<State>: @unchecked Sendable {
    private let lock = NSLock()
    private var state: State

    init(_ state: State) {
        self.state = state
    }

    func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}
