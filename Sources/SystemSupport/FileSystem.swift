#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#endif

/// The file-system calls every layer needs, each failure a ``SystemError`` naming the operation and the path.
package enum FileSystem {
    /// Names of the entries of `directory`, without `.` and `..`.
    /// - Throws: ``SystemError`` when it cannot be opened, or when reading it fails part-way (`readdir` tells the end
    ///   from an error only by `errno`): a partial listing is never returned as the whole.
    package static func list(_ directory: String) throws(SystemError) -> [String] {
        guard let dir = opendir(directory) else { throw SystemError("opendir", path: directory, errno: errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(dir) else {
                if errno != 0 { throw SystemError("read the directory", path: directory, errno: errno) }
                break
            }
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    package static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    /// Whether `path` exists: false only when it does not (`ENOENT`). Any other failure (no permission on a directory
    /// of the path, a file where a directory of it belongs) throws, so a reader never takes what it may not see for
    /// nothing (`FileManager.fileExists` answers false to both).
    package static func isPresent(_ path: String) throws(SystemError) -> Bool {
        var info = stat()
        return try syscall("examine", path: path, tolerating: ENOENT) { stat(path, &info) } != nil
    }

    /// ``list(_:)``, with a directory that does not exist listed as empty; any other failure throws.
    package static func listIfPresent(_ directory: String) throws(SystemError) -> [String] {
        do {
            return try list(directory)
        } catch where error.errno == ENOENT {
            return []
        }
    }

    package static func fileSize(_ path: String) throws(SystemError) -> Int64 {
        var info = stat()
        try syscall("stat", path: path) { stat(path, &info) }
        return Int64(info.st_size)
    }

    /// Removes `path`; a file that is already gone is not an error, because deletion steps must be repeatable.
    package static func unlinkIfExists(_ path: String) throws(SystemError) {
        try syscall("unlink", path: path, tolerating: ENOENT) { unlink(path) }
    }

    /// Renames `from` to `to`, replacing `to` atomically.
    package static func rename(_ from: String, to: String) throws(SystemError) {
        #if canImport(Glibc)
            try syscall("rename into place", path: to) { Glibc.rename(from, to) }
        #else
            try syscall("rename into place", path: to) { Musl.rename(from, to) }
        #endif
    }

    /// Creates `path` and its missing parents with `mode` (owner-only by default: what the agent and the queue keep
    /// holds passengers' data); existing directories (or links to one) are left as they are. Something else in the
    /// way, such as a file, is `ENOTDIR` naming it (before, it passed, and the first file made below it failed with
    /// a less clear error). Each directory it creates is made durable in its parent (`fsync` of the parent), so a
    /// power cut cannot take away a new queue's directory with the records a caller was told are stored in it.
    package static func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(SystemError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            let parent = current.isEmpty ? "/" : current
            current += "/" + component
            if mkdir(current, mode) == 0 {
                // A parent we may write but not read (mode -wx) cannot be opened to sync: the one case left to
                // the file system's own commit.
                let fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                if fd >= 0 {
                    defer { close(fd) }
                    try syscall("fsync", path: parent) { fsync(fd) }
                } else if errno != EACCES {
                    throw SystemError("open", path: parent, errno: errno)
                }
            } else {
                let code = errno
                if code != EEXIST { throw SystemError("mkdir", path: current, errno: code) }
                var info = stat()
                guard stat(current, &info) == 0 else { throw SystemError("mkdir", path: current, errno: errno) }
                if info.st_mode & S_IFMT != S_IFDIR { throw SystemError("mkdir", path: current, errno: ENOTDIR) }
            }
        }
    }

    /// Takes a `flock(2)` on `fd` without waiting.
    /// - Returns: false when another holder has a conflicting lock (`EWOULDBLOCK`).
    package static func tryLock(_ fd: Int32, exclusive: Bool = true, path: String) throws(SystemError) -> Bool {
        let operation = (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB
        return try syscall("lock", path: path, tolerating: EWOULDBLOCK) { flock(fd, operation) } != nil
    }

    /// Makes a directory's entries (a rename, a new or removed file) durable.
    package static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try syscall("open", path: path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { close(fd) }
        try syscall("fsync", path: path) { fsync(fd) }
    }

    /// Reads from `fd` until `buffer` is full or the file ends, continuing after short reads.
    /// - Returns: The number of bytes read (less than `buffer.count` only at the end of the file).
    package static func readFully(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, path: String? = nil
    ) throws(SystemError) -> Int {
        var filled = 0
        while filled < buffer.count {
            let count = try syscall("read", path: path) {
                read(fd, buffer.baseAddress! + filled, buffer.count - filled)
            }
            if count == 0 { break }
            filled += count
        }
        return filled
    }

    /// Writes all of `bytes` to `fd`, continuing after short writes.
    package static func writeFully(
        _ fd: Int32, _ bytes: UnsafeRawBufferPointer, path: String? = nil
    ) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let count = try syscall("write", path: path) { write(fd, bytes.baseAddress! + done, bytes.count - done) }
            // write(2) never returns 0 for a non-empty request on a file or a pipe; if it did, retrying would spin.
            if count == 0 { throw SystemError("write", path: path, errno: EIO) }
            done += count
        }
    }

    /// Opens `path` the one way every layer opens a file: `O_NOFOLLOW | O_CLOEXEC` added to `flags`.
    ///
    /// A symbolic link at `path` is refused, never followed: one planted in a directory another user could write
    /// (`ln -s /etc/shadow <home>/serve.lock`) would otherwise turn a write by a privileged process into a write to
    /// any file. Links in the directories above `path` are followed as usual (the operator chose that path).
    /// `O_CLOEXEC` keeps the descriptor out of child processes.
    /// - Parameters:
    ///   - path: The file.
    ///   - flags: `O_RDONLY`, `O_RDWR | O_CREAT`, … without `O_NOFOLLOW` and `O_CLOEXEC`, which are added.
    ///   - mode: Permissions of a file `O_CREAT` creates.
    ///   - operation: What is attempted, for the error.
    /// - Returns: The descriptor; the caller closes it.
    /// - Throws: ``SystemError``, with ``SystemError/isRefusedLink`` for a link at `path`.
    package static func openFile(
        _ path: String, _ flags: Int32, mode: mode_t = 0o600, operation: String = "open"
    ) throws(SystemError) -> Int32 {
        do {
            return try syscall(operation, path: path) { open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode) }
        } catch where error.errno == ELOOP {
            // O_NOFOLLOW's refusal; ELOOP from the directories above is a real loop, reported as it is.
            var info = stat()
            if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK { throw .refusedLink(operation, path: path) }
            throw error
        }
    }

    /// Throws when `path` is a symbolic link; a missing path or any other file is fine. For files replaced by
    /// `rename(2)`, which replaces a link rather than following it: refusing says that someone put a link where the
    /// caller keeps its file, instead of silently replacing it.
    /// - Throws: ``SystemError`` with ``SystemError/isRefusedLink``.
    package static func refuseSymbolicLink(_ path: String, operation: String = "write") throws(SystemError) {
        var info = stat()
        if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFLNK { throw .refusedLink(operation, path: path) }
    }

    /// Writes `data` to a new file created with `mode` (so a secret is never readable by others, not even for a
    /// moment) and fsyncs it; the file must not exist yet, and a link at `path` is refused (`O_EXCL`,
    /// ``openFile(_:_:mode:operation:)``).
    /// - Parameter sync: `false` leaves the fsync to the caller (``AtomicFileGroup`` flushes a group of files at once).
    package static func writeNewFile(
        _ data: Data, to path: String, mode: mode_t, sync: Bool = true
    ) throws(SystemError) {
        let fd = try openFile(path, O_WRONLY | O_CREAT | O_EXCL, mode: mode)
        var isOpen = true
        defer { if isOpen { close(fd) } }
        // Data's closure methods rethrow untyped errors, so the typed error travels out in a Result.
        try data.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in try writeFully(fd, buffer, path: path) }
        }.get()
        if sync { try syscall("fsync", path: path) { fsync(fd) } }
        isOpen = false
        // close(2) is never retried: on Linux the descriptor is gone even when it reports EINTR.
        if close(fd) != 0 { throw SystemError("close", path: path, errno: errno) }
    }

    /// Replaces (or creates) `path` with `data` so that a reader or a crash sees the old contents or the new, never
    /// a mix: write a temporary file in the same directory with `mode`, `fsync` it, `rename` it over, `fsync` the
    /// directory. The temporary file is removed when a step fails.
    /// - Parameters:
    ///   - data: The new contents.
    ///   - path: The file to replace or create; its directory must exist.
    ///   - mode: Permissions of the new file, set from its creation.
    /// - Throws: ``SystemError`` naming the step and the file.
    package static func writeAtomically(_ data: Data, to path: String, mode: mode_t) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        // Hidden and unique, so listings that pick files by suffix skip it and concurrent writers never collide.
        let temporary = directory + "/.\(name).\(UUID().uuidString).tmp"
        do throws(SystemError) {
            try writeNewFile(data, to: temporary, mode: mode)
            try rename(temporary, to: path)
        } catch {
            _ = unlink(temporary)
            throw error
        }
        try syncDirectory(directory)
    }
}
