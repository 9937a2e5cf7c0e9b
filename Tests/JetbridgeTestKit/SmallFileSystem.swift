public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real full file system: a small tmpfs, where this machine lets us mount one (as root).
public enum SmallFileSystem {
    /// Mounts a tmpfs of `size` (such as `256k`) on the existing directory `path`.
    /// - Returns: Whether it was mounted.
    public static func mount(at path: String, size: String) -> Bool {
        Glibc.mount("tmpfs", path, "tmpfs", 0, "size=\(size)") == 0
    }

    /// Unmounts what ``mount(at:size:)`` mounted on `path`.
    public static func unmount(_ path: String) { umount(path) }

    /// Whether this process may mount a tmpfs (tests that need one are skipped otherwise).
    public static let available: Bool = {
        guard let directory = try? TemporaryDirectory() else { return false }
        guard mount(at: directory.url.path, size: "64k") else { return false }
        umount(directory.url.path)
        return true
    }()

    /// Fills the file system holding `directory` with a filler file until a write fails, so that the next write
    /// there fails with `ENOSPC`.
    /// - Returns: The filler file (delete it to free the space).
    @discardableResult
    public static func fill(_ directory: URL) throws -> URL {
        let filler = directory.appendingPathComponent("filler")
        let fd = open(filler.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0xA5, count: 4096)
        // Page by page, then byte by byte: a tmpfs allocates whole pages, so the last page may take single bytes.
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, 1) }) > 0 {}
        guard errno == ENOSPC else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return filler
    }
}
