import SystemSupport

/// The calls in progress on one store and when each began, so that readiness can tell a store that hangs (a frozen
/// PostgreSQL server, a file system that stopped answering) from one that is merely busy: ``StoreReader/busySince``
/// is the oldest start. Several threads may call one store at once (the store thread, the status thread, the
/// network thread's limit counts), so each call has its own entry.
final class StoreCalls: Sendable {
    private let calls = Locked<(next: UInt64, started: [UInt64: ContinuousClock.Instant])>((0, [:]))

    /// Runs `body` as one call: from now until it returns or throws.
    func measure<T>(_ body: () throws -> T) rethrows -> T {
        let token = calls.withLock { calls in
            calls.next &+= 1
            calls.started[calls.next] = .now
            return calls.next
        }
        defer { _ = calls.withLock { $0.started.removeValue(forKey: token) } }
        return try body()
    }

    /// When the oldest call still in progress began, or nil when none is.
    var oldest: ContinuousClock.Instant? { calls.withLock { $0.started.values.min() } }
}
