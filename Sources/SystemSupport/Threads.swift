import Foundation

/// Starts a named thread for blocking work (a socket loop, a store writer), which must never run on the cooperative
/// pool.
///
/// The name is also set on the OS thread (`top -H`, `/proc/<pid>/task/*/comm`), which Foundation's `Thread.name`
/// does not do on Linux; the kernel keeps at most 15 characters.
/// - Parameters:
///   - name: The thread's name.
///   - body: What it runs; the thread ends when `body` returns.
package func startThread(_ name: String, _ body: @escaping @Sendable () -> Void) {
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
