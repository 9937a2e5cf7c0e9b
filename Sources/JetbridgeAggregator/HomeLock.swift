import Foundation
import SystemSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The exclusive lock one `serve` holds on its home for its whole life: `flock(2)` on `<home>/serve.lock`, whose
/// contents are the holder's pid.
///
/// The kernel drops a `flock` when its holder exits in any way (`kill -9` too), so a stale lock file never blocks
/// the next start; the pid in it is only read while the lock is held, to name the running process.
public final class HomeLock: Sendable {
    /// The lock file's name in the home.
    public static let fileName = "serve.lock"

    /// The lock file.
    public let path: String
    private let state = Locked<Int32?>(nil)

    /// Takes the lock at once or throws.
    ///
    /// First the home's rule (``AggregatorHome/secure()``), and no symbolic link where `serve` writes its own files
    /// (the lock and `status.json`), so that nothing is written before a planted link is found.
    /// - Parameter home: The home to lock (created if missing).
    /// - Throws: ``AggregatorError``: `.unavailable` naming the home and the running holder's pid when another
    ///   process holds it; `.cannotCreate` (73) for a link at the lock or the status file; what
    ///   ``AggregatorHome/create()`` throws.
    public init(home: AggregatorHome) throws {
        try home.create()
        path = home.directory.appendingPathComponent(Self.fileName).path
        let fd: Int32
        do {
            try FileSystem.refuseSymbolicLink(ServeStatus.url(in: home).path)
            fd = try FileSystem.openFile(path, O_RDWR | O_CREAT, mode: 0o600, operation: "open the lock file")
        } catch {
            throw AggregatorError(.unavailable, error)
        }
        let locked: Bool
        do {
            locked = try FileSystem.tryLock(fd, path: path)
        } catch {
            close(fd)
            throw AggregatorError(.unavailable, error)
        }
        guard locked else {
            let holder = Self.readPID(fd).map { "(pid \($0)) " } ?? ""
            close(fd)
            throw AggregatorError(
                .unavailable,
                "another jetbridge-aggregator serve \(holder)is running on the home \(home.directory.path) "
                    + "(it holds \(path)); stop it first, or give this one another --home")
        }
        let text = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = text.withCString { pwrite(fd, $0, strlen($0), 0) }
        state.withLock { $0 = fd }
    }

    deinit { release() }

    /// Lets the lock go (idempotent); the process keeps running.
    public func release() {
        guard let fd = state.withLock({ state -> Int32? in defer { state = nil }; return state }) else { return }
        _ = ftruncate(fd, 0)
        _ = flock(fd, LOCK_UN)
        close(fd)
    }

    /// The pid of the `serve` that holds the home's lock, or nil when none does (nor when the lock file is a link:
    /// no `serve` holds one).
    /// - Parameter home: The home to look at.
    public static func holder(of home: AggregatorHome) -> Int32? {
        let path = home.directory.appendingPathComponent(fileName).path
        guard let fd = try? FileSystem.openFile(path, O_RDONLY) else { return nil }
        defer { close(fd) }
        // A shared lock is refused only while a `serve` holds the exclusive one.
        if (try? FileSystem.tryLock(fd, exclusive: false, path: path)) == true {
            flock(fd, LOCK_UN)
            return nil
        }
        return readPID(fd) ?? 0
    }

    /// The pid the lock file holds, read through the descriptor that was checked.
    private static func readPID(_ fd: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0, let text = String(validating: bytes[..<count], as: UTF8.self) else { return nil }
        return Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
