import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AgentError {
    /// The agent's error for a failed system call: the path and the system's reason; a full disk is `tryAgain`.
    init(_ error: SystemError) {
        let full = error.isNoSpace
        self.init(
            full ? .tryAgain : .failure,
            "cannot \(error.operation) \(error.path ?? ""): \(error.reason)"
                + (full ? "; free some space and try again" : ""))
    }
}

/// The agent's file operations: SystemSupport's, with the agent's permissions (directories 0700, files 0600: they
/// hold passengers' data) and every failure an ``AgentError``.
enum Files {
    /// Runs SystemSupport calls, turning a ``SystemError`` into an ``AgentError`` (the agent's boundary).
    @discardableResult
    static func io<T>(_ body: @autoclosure () throws(SystemError) -> T) throws(AgentError) -> T {
        do {
            return try body()
        } catch {
            throw AgentError(error)
        }
    }

    /// Creates a directory and its parents, owner-only (0700). One that cannot be created is 73, as the aggregator's
    /// home is (docs/EXIT-CODES.md); a full disk stays 75.
    static func makeDirectory(_ url: URL) throws(AgentError) {
        do {
            try FileSystem.makeDirectories(url.path, mode: 0o700)
        } catch {
            let failure = AgentError(error)
            throw error.isNoSpace ? failure : AgentError(.cannotCreate, failure.message)
        }
    }

    /// Whether `url` exists; a path that cannot be examined (no permission on a directory of it, a file where one of
    /// its directories belongs) throws rather than reading as absent.
    static func isPresent(_ url: URL) throws(AgentError) -> Bool {
        try io(FileSystem.isPresent(url.path))
    }

    /// The names in the directory `url` (none when it does not exist); one that cannot be read throws rather than
    /// reading as empty.
    static func entries(_ url: URL) throws(AgentError) -> [String] {
        try io(FileSystem.listIfPresent(url.path))
    }

    /// Replaces `url` with `data` (mode 0600 unless told) so that a reader or a crash sees the old or the new
    /// contents, never a mix.
    static func writeAtomically(_ data: Data, to url: URL, mode: mode_t = 0o600) throws(AgentError) {
        try io(FileSystem.writeAtomically(data, to: url.path, mode: mode))
    }

    /// Makes a directory's entries (a rename, a new or removed file) durable.
    static func syncDirectory(_ url: URL) throws(AgentError) {
        try io(FileSystem.syncDirectory(url.path))
    }

    /// Renames `from` to `to` (replacing it) and makes the rename durable.
    static func rename(_ from: URL, to: URL) throws(AgentError) {
        try io(FileSystem.rename(from.path, to: to.path))
        try syncDirectory(to.deletingLastPathComponent())
    }

    /// Removes a file if it exists and makes the removal durable.
    static func remove(_ url: URL) throws(AgentError) {
        try io(FileSystem.unlinkIfExists(url.path))
        try syncDirectory(url.deletingLastPathComponent())
    }
}
