import CSystemCalls

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Starts a named thread for blocking work (a socket loop, a store writer), which must never run on the cooperative
/// pool.
///
/// The name is also set on the OS thread (`top -H`, `/proc/<pid>/task/*/comm`); the kernel keeps at most 15
/// characters. A detached pthread with the default attributes (the stack `ulimit -s` gives), as Foundation's
/// `Thread` made it.
/// - Parameters:
///   - name: The thread's name.
///   - body: What it runs; the thread ends when `body` returns.
package func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let start = Unmanaged.passRetained(ThreadStart(name: name, body: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(&thread, &attributes, { argument in
        let start = Unmanaged<ThreadStart>.fromOpaque(argument!).takeRetainedValue()
        _ = jb_set_thread_name(start.name)
        start.body()
        return nil
    }, start)
    // Only a process out of threads or memory gets here; the work it was to do cannot be done without its thread.
    guard result == 0 else {
        Unmanaged<ThreadStart>.fromOpaque(start).release()
        fatalError("cannot start thread \(name): \(String(cString: strerror(result)))")
    }
}

/// What ``startThread(_:_:)`` hands its new thread.
private final class ThreadStart {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// Runs `body` on a new named thread (``startThread(_:_:)``) and suspends the calling task, without holding one of
/// the cooperative pool's threads, until it returns: how a swift-service-lifecycle `Service` whose work blocks (a
/// socket loop, a store writer) owns its thread from its `run()`.
///
/// Cancelling the calling task does not stop `body`: the service tells its loop to stop (a graceful-shutdown or
/// cancellation handler), and this returns once the loop has.
/// - Parameters:
///   - name: The thread's name.
///   - body: The blocking work.
/// - Returns: What `body` returns.
/// - Throws: What `body` throws.
package func runOnOwnThread<T: Sendable>(
    _ name: String, _ body: @escaping @Sendable () throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        startThread(name) { continuation.resume(with: Result { try body() }) }
    }
}

/// ``runOnOwnThread(_:_:)`` for work that cannot fail.
package func runOnOwnThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
        startThread(name) { continuation.resume(returning: body()) }
    }
}

/// A `TaskExecutor` with a thread of its own: the tasks that prefer it (`withTaskExecutorPreference`, and their child
/// tasks) run there instead of on the cooperative pool, which is two threads on a two-core machine and which blocking
/// code elsewhere in the process (a test beside a server, a library) can hold for seconds. `serve` runs its
/// `ServiceGroup` on one, so its start and its shutdown never wait for the pool.
///
/// The thread runs jobs one at a time, in order; it ends after ``finish()`` once no job is waiting, and a job that
/// comes later starts a new one.
package final class ThreadTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let name: String
    private let condition = ConditionLock()
    private var jobs: [UnownedJob] = []
    private var running = false
    private var finishing = false

    /// - Parameter name: The thread's name (``startThread(_:_:)``).
    package init(name: String) {
        self.name = name
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let start = !running
        running = true
        condition.signal()
        condition.unlock()
        if start { startThread(name) { [self] in drain() } }
    }

    /// Lets the thread end once it has nothing to do.
    package func finish() {
        condition.lock()
        finishing = true
        condition.signal()
        condition.unlock()
    }

    private func drain() {
        while true {
            condition.lock()
            while jobs.isEmpty && !finishing { condition.wait() }
            guard !jobs.isEmpty else {
                running = false
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
