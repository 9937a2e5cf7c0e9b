import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small file-system helpers; every failure becomes an ``AgentError`` with the path and the system's reason.
enum Files {
    /// Runs a system call, retrying on `EINTR`.
    @discardableResult
    static func syscall(_ what: String, _ path: String, _ call: () -> Int32) throws(AgentError) -> Int32 {
        while true {
            let result = call()
            if result >= 0 { return result }
            let code = errno
            if code == EINTR { continue }
            throw error(what, path, code)
        }
    }

    static func error(_ what: String, _ path: String, _ code: Int32) -> AgentError {
        let reason = String(cString: strerror(code))
        let full = code == ENOSPC || code == EDQUOT
        return AgentError(
            full ? .tryAgain : .failure,
            "cannot \(what) \(path): \(reason)" + (full ? "; free some space and try again" : ""))
    }

    /// Creates a directory and its parents, owner-only (0700): the agent's files hold passengers' data.
    static func makeDirectory(_ url: URL) throws(AgentError) {
        do {
            try FileManager.default.createDirectory(
                at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw AgentError(.failure, "cannot create the directory \(url.path): \(error.localizedDescription)")
        }
    }

    /// Replaces `url` with `data` so that a reader or a crash sees the old or the new contents, never a mix:
    /// write a temporary file, `fsync` it, `rename` it over, `fsync` the directory.
    static func writeAtomically(_ data: Data, to url: URL) throws(AgentError) {
        let path = url.path
        let temporary = path + ".tmp-\(getpid())"
        let fd = try syscall("create", temporary) { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        do throws(AgentError) {
            defer { close(fd) }
            // Data's closure methods rethrow untyped errors, so the errno travels out as a return value.
            let failure = data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> Int32 in
                var offset = 0
                while offset < buffer.count {
                    let written = write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return errno
                    }
                    offset += written
                }
                return 0
            }
            if failure != 0 { throw error("write", temporary, failure) }
            try syscall("sync", temporary) { fsync(fd) }
        } catch {
            unlink(temporary)
            throw error
        }
        do {
            try syscall("rename into place", path) { rename(temporary, path) }
        } catch {
            unlink(temporary)
            throw error
        }
        try syncDirectory(url.deletingLastPathComponent())
    }

    /// Makes a directory's entries (a rename, a new or removed file) durable.
    static func syncDirectory(_ url: URL) throws(AgentError) {
        let path = url.path
        let fd = try syscall("open", path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try syscall("sync", path) { fsync(fd) }
    }

    /// Removes a file if it exists and makes the removal durable.
    static func remove(_ url: URL) throws(AgentError) {
        let path = url.path
        if unlink(path) != 0 {
            if errno == ENOENT { return }
            throw error("remove", path, errno)
        }
        try syncDirectory(url.deletingLastPathComponent())
    }
}

/// An exclusive `flock(2)` on a file, held until ``unlock()`` or the process exits (so a killed holder never
/// leaves it stuck).
final class FileLock {
    private let fd: Int32
    let path: String

    /// Takes the lock, waiting up to `timeout` seconds for another holder.
    /// - Throws: ``AgentError`` `tryAgain` when the lock stays busy.
    init(path: String, timeout: Double, purpose: String) throws(AgentError) {
        self.path = path
        fd = try Files.syscall("open", path) { open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600) }
        let deadline = Date().addingTimeInterval(timeout)
        var pause: useconds_t = 1_000
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            guard code == EWOULDBLOCK else {
                close(fd)
                throw Files.error("lock", path, code)
            }
            guard Date() < deadline else {
                close(fd)
                throw AgentError(
                    .tryAgain,
                    "\(purpose): the lock \(path) stayed busy for \(Int(timeout)) s (another jetbridge-agent is using it); try again"
                )
            }
            usleep(pause)
            pause = min(pause * 2, 50_000)
        }
    }

    func unlock() {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
