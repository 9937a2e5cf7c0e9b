#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A `flock(2)` on a lock file, exclusive (or shared: several holders at once, none while an exclusive one is held),
/// held until ``release()`` or the end of the process: the kernel drops it however the holder ends (`kill -9` too),
/// so a lock file left behind never blocks anyone.
///
/// The one lock-file type of the project: `serve`'s lock on its home and the agent's sync lock on its home (each
/// waited for up to 2 s, as `status` takes a shared lock for an instant to read the holder; the file holds the
/// holder's pid, which a refused taker and `status` read), and the agent's amend lock (waited for). The file is
/// opened as every file is (SystemSupport's ``FileSystem/openFile(_:_:mode:operation:)``: a symbolic link there is
/// refused, never followed). The receipts directory's lock is taken shared by `serve`'s refreshes on PostgreSQL and
/// exclusive by SQLite's and by a rebuild.
package final class FileLock: Sendable {
    /// Why the lock was not taken.
    package enum Failure: Error, Sendable {
        /// Another process holds it (and still did at the deadline); `holder` is the pid its file names, if any.
        case busy(holder: Int32?)
        /// The lock file could not be opened or locked.
        case system(SystemError)
    }

    /// The lock file.
    package let path: String
    private let descriptor: Locked<Int32?>
    /// Whether this holder wrote its pid into the file (and clears it on release).
    private let recorded: Bool

    /// Takes the lock, creating the file (mode 0600) if needed.
    /// - Parameters:
    ///   - path: The lock file.
    ///   - timeout: How long to wait for another holder (pausing 1 ms, doubling to 50 ms); zero: do not wait.
    ///   - recordingPID: Write this process's pid into the file once it holds the lock (an exclusive one only: the
    ///     holders of a shared lock would write over each other's, and clear it while others still hold it).
    ///   - mode: The new file's mode (0600; 0644 for a lock other users' processes take too, which they then open
    ///     read-only).
    ///   - exclusive: False: a shared lock, which waits only for an exclusive holder (whose pid a refusal names); an
    ///     exclusive taker refused by shared holders is told no pid.
    /// - Throws: ``Failure``.
    package init(
        path: String, waitingUpTo timeout: Duration = .zero, recordingPID: Bool = false, mode: UInt32 = 0o600,
        exclusive: Bool = true
    ) throws(Failure) {
        self.path = path
        var fd: Int32
        var writable = true
        do {
            fd = try FileSystem.openFile(path, O_RDWR | O_CREAT, mode: mode_t(mode), operation: "open the lock file")
        } catch {
            // A lock file another user made (a command run with sudo) that this one may only read: flock(2) works
            // on a read-only descriptor too, only the pid is not written.
            guard error.errno == EACCES,
                let readOnly = try? FileSystem.openFile(path, O_RDONLY, operation: "open the lock file")
            else { throw .system(error) }
            fd = readOnly
            writable = false
        }
        let deadline = ContinuousClock.now + timeout
        var pause: useconds_t = 1_000
        while true {
            let locked: Bool
            do {
                locked = try FileSystem.tryLock(fd, exclusive: exclusive, path: path)
            } catch {
                close(fd)
                throw .system(error)
            }
            if locked { break }
            guard ContinuousClock.now < deadline else {
                // Refused by shared holders (a shared lock is granted: no exclusive one is held), the file names
                // none of them, at most an exclusive holder that has since let go or died.
                let shared = exclusive && (try? FileSystem.tryLock(fd, exclusive: false, path: path)) == true
                let holder = shared ? nil : Self.readPID(fd)
                close(fd)
                throw .busy(holder: holder)
            }
            usleep(pause)
            pause = min(pause * 2, 50_000)
        }
        recorded = recordingPID && writable && exclusive
        if recorded {
            let text = "\(getpid())\n"
            _ = ftruncate(fd, 0)
            _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        }
        descriptor = Locked(fd)
    }

    deinit { release() }

    /// Lets the lock go (idempotent; a recorded pid is cleared first); the process keeps running.
    package func release() {
        guard
            let fd = descriptor.withLock({ fd -> Int32? in
                defer { fd = nil }
                return fd
            })
        else { return }
        if recorded { _ = ftruncate(fd, 0) }
        _ = flock(fd, LOCK_UN)
        close(fd)
    }

    /// Who holds the lock at `path` exclusively: nil when nobody does (shared holders are not seen; nor is anyone when
    /// there is no such file, or a link is there: no holder opens one), else the pid its file names, 0 when it names
    /// none.
    package static func holder(of path: String) -> Int32? {
        guard let fd = try? FileSystem.openFile(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        // A shared lock is refused only while someone holds the exclusive one.
        if (try? FileSystem.tryLock(fd, exclusive: false, path: path)) == true {
            flock(fd, LOCK_UN)
            return nil
        }
        return readPID(fd) ?? 0
    }

    /// The pid the lock file holds, read through the descriptor that was locked or checked.
    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0, let text = String(validating: bytes[..<count], as: UTF8.self) else { return nil }
        return Int32(text.trimmingWhitespace())
    }
}
