import Foundation

/// A value behind a lock, for the little state the aggregator's threads share. NSLock rather than `Mutex`: the
/// package supports macOS 14.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Starts a named thread. The name is also set on the OS thread (`top -H`, `/proc/<pid>/task/*/comm`), which
/// Foundation's `Thread.name` does not do on Linux; at most 15 characters are kept.
func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
    let thread = Thread {
        #if os(Linux)
            // pthread_setname_np is not exported by Glibc's Swift module; the kernel takes the name here too.
            try? Data(name.prefix(15).utf8).write(to: URL(fileURLWithPath: "/proc/thread-self/comm"))
        #endif
        body()
    }
    thread.name = name
    thread.start()
}
