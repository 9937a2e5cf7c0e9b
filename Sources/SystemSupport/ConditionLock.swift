#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A pthread mutex with a condition variable: what Foundation's `NSCondition` is (and `NSLock`, unused the condition),
/// for ``Locked`` and ``ThreadTaskExecutor``. Ours so that the libraries the agent links import FoundationEssentials
/// only, not Foundation: the whole of Foundation (and ICU with it) made every agent start slower (docs/AGENT.md,
/// "What it costs the device").
package final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        mutex.initialize(to: pthread_mutex_t())
        condition.initialize(to: pthread_cond_t())
        // Only invalid attributes or no memory fail these; neither leaves a usable lock.
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        precondition(pthread_cond_init(condition, nil) == 0, "pthread_cond_init failed")
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }

    package func unlock() { pthread_mutex_unlock(mutex) }

    /// Waits for ``signal()``, the lock held; it is held again on return (which may also come spuriously: wait in a
    /// loop on the condition itself).
    package func wait() { pthread_cond_wait(condition, mutex) }

    /// Wakes one thread in ``wait()``.
    package func signal() { pthread_cond_signal(condition) }

    /// Wakes every thread in ``wait()``.
    package func broadcast() { pthread_cond_broadcast(condition) }
}
