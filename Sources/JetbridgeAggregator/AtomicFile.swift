import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Replaces files atomically: write a temporary file in the same directory, fsync, rename over the target, fsync
/// the directory. A reader (or a crash) sees the old file or the new one, never a mix.
enum AtomicFile {
    /// - Parameters:
    ///   - data: The new contents.
    ///   - url: The file to replace or create.
    ///   - mode: Permissions of the new file.
    /// - Throws: ``AggregatorError`` naming the file.
    static func write(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        let directory = url.deletingLastPathComponent().path
        let temporary = directory + "/.\(url.lastPathComponent).\(UUID().uuidString).tmp"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try FileSystem.writeNewFile(data, to: temporary, mode: mode)
            try FileSystem.rename(temporary, to: url.path)
            try FileSystem.syncDirectory(directory)
        } catch {
            try? FileSystem.removeIfPresent(temporary)
            throw AggregatorError(.other, "cannot write \(url.path): \(error)")
        }
    }
}
