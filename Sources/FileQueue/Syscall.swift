import Glibc
import SystemSupport

/// Runs system calls through SystemSupport's one wrapper and turns its ``SystemError`` into a ``FileQueueError``:
/// the queue's boundary, so every failure carries `strerror` text, the path and the offset.
@discardableResult
@inline(__always)
func io<T>(_ body: @autoclosure () throws(SystemError) -> T) throws(FileQueueError) -> T {
    do {
        return try body()
    } catch {
        throw FileQueueError(error)
    }
}

extension FileQueueError {
    /// The queue's error for a failed system call; `ENOSPC` and `EDQUOT` become ``Code/noSpace``.
    init(_ error: SystemError) {
        let (what, path, offset, code) = (error.operation, error.path, error.offset, error.errno)
        if error.isNoSpace {
            self.init(
                .noSpace,
                "\(what) failed: \(error.reason); nothing was stored — free disk space or acknowledge records so "
                    + "segments can be deleted",
                path: path, offset: offset, errno: code)
        } else {
            self.init(.io, "\(what) failed: \(error.reason)", path: path, offset: offset, errno: code)
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
        let fd = try io(syscall("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) })
        return FileDescriptor(fd: fd, path: path)
    }

    /// Opens `path`, or returns nil when it does not exist.
    static func openIfExists(_ path: String, _ flags: Int32) throws(FileQueueError) -> FileDescriptor? {
        let fd = try io(syscall("open", path: path, tolerating: ENOENT) { Glibc.open(path, flags | O_CLOEXEC, 0o600) })
        return fd.map { FileDescriptor(fd: $0, path: path) }
    }

    func size() throws(FileQueueError) -> Int64 {
        var info = stat()
        try io(syscall("fstat", path: path) { fstat(fd, &info) })
        return Int64(info.st_size)
    }

    /// The file's size, or nil when it has been unlinked from its directory.
    func sizeIfLinked() throws(FileQueueError) -> Int64? {
        var info = stat()
        try io(syscall("fstat", path: path) { fstat(fd, &info) })
        return info.st_nlink == 0 ? nil : Int64(info.st_size)
    }

    /// Reads `buffer.count` bytes at `offset` unless the file ends first; returns the number read.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(FileQueueError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try io(
                syscall("pread", path: path, offset: offset + Int64(done)) {
                    pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                })
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
            let n = try io(
                syscall("pwrite", path: path, offset: offset + Int64(done)) {
                    pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
                })
            done += n
        }
    }

    func syncData() throws(FileQueueError) {
        try io(syscall("fdatasync", path: path) { fdatasync(fd) })
    }

    func sync() throws(FileQueueError) {
        try io(syscall("fsync", path: path) { fsync(fd) })
    }

    func truncate(to length: Int64) throws(FileQueueError) {
        try io(syscall("ftruncate", path: path, offset: length) { ftruncate(fd, off_t(length)) })
    }

    func lock(exclusive: Bool) throws(FileQueueError) {
        try io(syscall("flock", path: path) { flock(fd, exclusive ? LOCK_EX : LOCK_SH) })
    }

    func unlock() {
        _ = flock(fd, LOCK_UN)
    }
}
