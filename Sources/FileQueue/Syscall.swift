#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// Runs a system call, retrying on `EINTR`, and turns a failure into a ``FileQueueError``.
///
/// The one place where `errno` becomes a Swift error, so every failure carries `strerror` text and the path.
@discardableResult
func syscall<T: FixedWidthInteger>(
    _ what: @autoclosure () -> String, path: String? = nil, offset: Int64? = nil, _ body: () -> T
) throws(FileQueueError) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        throw FileQueueError(errno: code, what(), path: path, offset: offset)
    }
}

extension FileQueueError {
    /// An error for a failed system call; `ENOSPC` and `EDQUOT` become ``Code/noSpace``.
    init(errno code: Int32, _ what: String, path: String?, offset: Int64? = nil, sequence: UInt64? = nil) {
        let reason = String(cString: strerror(code))
        if code == ENOSPC || code == EDQUOT {
            self.init(
                .noSpace,
                "\(what) failed: \(reason); nothing was stored — free disk space or acknowledge records so "
                    + "segments can be deleted",
                path: path, offset: offset, sequence: sequence, errno: code)
        } else {
            self.init(.io, "\(what) failed: \(reason)", path: path, offset: offset, sequence: sequence, errno: code)
        }
    }
}

/// An owned file descriptor, closed when dropped.
final class FileDescriptor {
    let fd: Int32
    let path: String

    init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(FileQueueError) -> FileDescriptor {
        let fd = try syscall("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
        return FileDescriptor(fd: fd, path: path)
    }

    /// Opens `path`, or returns nil when it does not exist.
    static func openIfExists(_ path: String, _ flags: Int32) throws(FileQueueError) -> FileDescriptor? {
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC, 0o600)
            if fd >= 0 { return FileDescriptor(fd: fd, path: path) }
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT { return nil }
            throw FileQueueError(errno: code, "open", path: path)
        }
    }

    func size() throws(FileQueueError) -> Int64 {
        var info = stat()
        try syscall("fstat", path: path) { fstat(fd, &info) }
        return Int64(info.st_size)
    }

    /// The file's size, or nil when it has been unlinked from its directory.
    func sizeIfLinked() throws(FileQueueError) -> Int64? {
        var info = stat()
        try syscall("fstat", path: path) { fstat(fd, &info) }
        return info.st_nlink == 0 ? nil : Int64(info.st_size)
    }

    /// Reads `buffer.count` bytes at `offset` unless the file ends first; returns the number read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileQueueError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try syscall("pread", path: path, offset: offset + Int64(done)) {
                pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// The bytes in `[offset, end)`, fewer if the file is shorter.
    func readAll(from offset: Int64 = 0, to end: Int64) throws(FileQueueError) -> [UInt8] {
        let count = Int(max(0, end - offset))
        var bytes = [UInt8](repeating: 0, count: count)
        let got = try bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(FileQueueError) in try read(into: buffer, at: offset) }
        }.get()
        if got < count { bytes.removeLast(count - got) }
        return bytes
    }

    /// Reads into `array` from `offset`; returns the number of bytes read.
    func read(into array: inout [UInt8], at offset: Int64) throws(FileQueueError) -> Int {
        try array.withUnsafeMutableBytes { buffer in
            Result { () throws(FileQueueError) in try read(into: buffer, at: offset) }
        }.get()
    }

    /// Writes all of `array` at `offset`.
    func write(_ array: [UInt8], at offset: Int64) throws(FileQueueError) {
        try array.withUnsafeBytes { bytes in
            Result { () throws(FileQueueError) in try write(bytes, at: offset) }
        }.get()
    }

    /// Writes all of `bytes` at `offset`, continuing after short writes; a failure throws and undoes nothing.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(FileQueueError) {
        var done = 0
        while done < bytes.count {
            let n = try syscall("pwrite", path: path, offset: offset + Int64(done)) {
                pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
            done += n
        }
    }

    func syncData() throws(FileQueueError) {
        try syscall("fdatasync", path: path) { fdatasync(fd) }
    }

    func sync() throws(FileQueueError) {
        try syscall("fsync", path: path) { fsync(fd) }
    }

    func truncate(to length: Int64) throws(FileQueueError) {
        try syscall("ftruncate", path: path, offset: length) { ftruncate(fd, off_t(length)) }
    }

    func lock(exclusive: Bool) throws(FileQueueError) {
        try syscall("flock", path: path) { flock(fd, exclusive ? LOCK_EX : LOCK_SH) }
    }

    func unlock() {
        _ = flock(fd, LOCK_UN)
    }
}

enum FileSystem {
    /// Names of the entries of `directory`, without `.` and `..`.
    static func list(_ directory: String) throws(FileQueueError) -> [String] {
        guard let dir = opendir(directory) else {
            throw FileQueueError(errno: errno, "opendir", path: directory)
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }

    static func fileSize(_ path: String) throws(FileQueueError) -> Int64 {
        var info = stat()
        try syscall("stat", path: path) { stat(path, &info) }
        return Int64(info.st_size)
    }

    /// Removes `path`; a file that is already gone is not an error, because deletion steps must be repeatable.
    static func unlinkIfExists(_ path: String) throws(FileQueueError) {
        while unlink(path) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT { return }
            throw FileQueueError(errno: code, "unlink", path: path)
        }
    }

    static func rename(_ from: String, _ to: String) throws(FileQueueError) {
        try syscall("rename to \(to)", path: from) { Glibc.rename(from, to) }
    }

    /// Creates `path` and its missing parents, owner-only (0700): a queue holds whatever its records hold.
    static func makeDirectories(_ path: String) throws(FileQueueError) {
        var current = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o700) != 0 {
                let code = errno
                if code != EEXIST { throw FileQueueError(errno: code, "mkdir", path: current) }
            }
        }
    }
}
