import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few POSIX calls atomic file replacement needs, each turned into a ``StoreError`` with errno and path.
enum FileSystem {
    /// Runs a C call that returns -1 on failure, retrying on EINTR.
    @discardableResult
    static func call(_ what: String, path: String, _ body: () -> Int32) throws -> Int32 {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = errno
            if code == EINTR { continue }
            throw StoreError(
                .fileSystem, "\(what) failed: \(String(cString: strerror(code))) (errno \(code))", path: path,
                errno: code)
        }
    }

    /// Writes `data` to a new file and fsyncs it; the file must not exist yet.
    static func writeNewFile(_ data: Data, to path: String, mode: mode_t = 0o644) throws {
        // Created with its final mode, so a secret is never readable by others, not even for a moment.
        let fd = try call("open", path: path) { open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        var closed = false
        defer { if !closed { _ = close(fd) } }
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buffer.count {
                let written = try call("write", path: path) {
                    Int32(truncatingIfNeeded: write(fd, buffer.baseAddress! + offset, buffer.count - offset))
                }
                offset += Int(written)
            }
        }
        try call("fsync", path: path) { fsync(fd) }
        closed = true
        try call("close", path: path) { close(fd) }
    }

    /// Makes renames and unlinks in a directory durable.
    static func syncDirectory(_ path: String) throws {
        let fd = try call("open", path: path) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { _ = close(fd) }
        try call("fsync", path: path) { fsync(fd) }
    }

    static func rename(_ from: String, to: String) throws {
        #if canImport(Glibc)
            try call("rename", path: to) { Glibc.rename(from, to) }
        #else
            try call("rename", path: to) { Darwin.rename(from, to) }
        #endif
    }

    /// Removes a file; a file that is already gone is fine.
    static func removeIfPresent(_ path: String) throws {
        if unlink(path) == -1 && errno != ENOENT {
            try call("unlink", path: path) { -1 }
        }
    }
}
