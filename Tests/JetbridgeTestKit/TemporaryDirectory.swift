public import Foundation

/// A fresh directory for one test, removed when the last reference goes (GRDB's per-test directory).
///
/// One helper for what the test targets each wrote for themselves (a class removed in `deinit`, a URL removed by the
/// caller's `defer`, a `with…` closure, sync or async). Names are `<prefix>-<UUID>` so a leftover says which tests
/// made it; ipc endpoints need short paths (libzmq: 107 bytes), so those tests pass `in: /tmp` and a short prefix.
public final class TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL
    /// Its path.
    public var path: String { url.path }

    /// Creates the directory.
    /// - Parameters:
    ///   - prefix: The start of its name.
    ///   - parent: Where it is made; the system's temporary directory unless given.
    /// - Throws: What `FileManager` throws when it cannot create it.
    public init(prefix: String = "jetbridge-test", in parent: URL = FileManager.default.temporaryDirectory) throws {
        url = try Self.create(prefix: prefix, in: parent)
    }

    deinit { remove() }

    /// Removes the directory and everything in it now (it is gone anyway when this object goes).
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    /// Creates a fresh directory that the caller removes.
    /// - Parameters:
    ///   - prefix: The start of its name.
    ///   - parent: Where it is made; the system's temporary directory unless given.
    /// - Returns: The new directory.
    /// - Throws: What `FileManager` throws when it cannot create it.
    public static func create(
        prefix: String = "jetbridge-test", in parent: URL = FileManager.default.temporaryDirectory
    ) throws -> URL {
        let url = parent.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// Runs `body` with a fresh directory, removed afterwards.
/// - Parameters:
///   - prefix: The start of the directory's name.
///   - parent: Where it is made; the system's temporary directory unless given.
///   - body: The work; gets the directory.
/// - Returns: What `body` returns.
/// - Throws: What creating the directory or `body` throws.
public func withTemporaryDirectory<T>(
    prefix: String = "jetbridge-test", in parent: URL = FileManager.default.temporaryDirectory,
    _ body: (URL) throws -> T
) throws -> T {
    let directory = try TemporaryDirectory(prefix: prefix, in: parent)
    defer { directory.remove() }
    return try body(directory.url)
}

/// Runs `body` with a fresh directory, removed afterwards.
/// - Parameters:
///   - prefix: The start of the directory's name.
///   - parent: Where it is made; the system's temporary directory unless given.
///   - body: The work; gets the directory.
/// - Returns: What `body` returns.
/// - Throws: What creating the directory or `body` throws.
public func withTemporaryDirectory<T>(
    prefix: String = "jetbridge-test", in parent: URL = FileManager.default.temporaryDirectory,
    _ body: (URL) async throws -> T
) async throws -> T {
    let directory = try TemporaryDirectory(prefix: prefix, in: parent)
    defer { directory.remove() }
    return try await body(directory.url)
}
