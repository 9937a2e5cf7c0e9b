import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The agent's home directory and the files it keeps there.
///
/// ```
/// <home>/agent.json          configuration (optional)
/// <home>/queue/              the FileQueue (unless the configuration names another directory)
/// <home>/orders/<UUID>.msgpack  the latest revision of each order taken here (the amend ledger)
/// <home>/orders/lock         flock(2) target serialising amendments
/// <home>/rejected/           records the ground refused, set aside by sync
/// <home>/sync-state.json     written by sync: when it last ran and how it ended
/// <home>/sync.lock           flock(2) held by the one sync running on this home (its pid inside)
/// ```
public struct AgentHome: Sendable, Hashable {
    /// The home when neither `--home` nor `$JETBRIDGE_HOME` is given, relative to the current directory.
    public static let defaultPath = ".jetbridge/agent"

    public let url: URL
    /// Whether this is the default home (neither `--home` nor `$JETBRIDGE_HOME` named it): the commands that
    /// messages suggest then need no `--home` (``command(_:)``).
    public let isDefault: Bool

    /// - Parameters:
    ///   - url: The home directory; it need not exist yet.
    ///   - isDefault: Whether it is the default home, found without `--home`.
    public init(url: URL, isDefault: Bool = false) {
        self.url = url.standardizedFileURL
        self.isDefault = isDefault
    }

    /// Picks the home: the flag, else the environment variable, else `.jetbridge/agent`.
    ///
    /// - Parameters:
    ///   - flag: The `--home` value, if given.
    ///   - environment: The process environment.
    ///   - currentDirectory: What relative paths are relative to.
    public static func resolve(flag: String?, environment: [String: String], currentDirectory: URL) -> AgentHome {
        let path = HomeDirectory.path(flag: flag, environment: environment, defaultPath: defaultPath)
        return AgentHome(
            url: resolvePath(path, against: currentDirectory),
            isDefault: HomeDirectory.isDefault(flag: flag, environment: environment))
    }

    /// The agent command `words` as a message suggests it, with this home: `jetbridge-agent --home /srv/cart-9 keys
    /// generate`, or without `--home` for the default home (run from the same directory, it finds it again).
    public func command(_ words: String) -> String {
        HomeDirectory.command("jetbridge-agent", home: isDefault ? nil : url.path, words)
    }

    public var configurationFile: URL { url.appendingPathComponent("agent.json") }
    public var defaultQueueDirectory: URL { url.appendingPathComponent("queue", isDirectory: true) }
    public var ordersDirectory: URL { url.appendingPathComponent("orders", isDirectory: true) }
    public var rejectedDirectory: URL { url.appendingPathComponent("rejected", isDirectory: true) }
    /// Set-aside records an operator gave up on (`set-aside discard`), kept for the record.
    public var discardedDirectory: URL { url.appendingPathComponent("discarded", isDirectory: true) }
    public var syncStateFile: URL { url.appendingPathComponent("sync-state.json") }
    /// The lock one sync holds on the home for its whole run (``SyncEngine``).
    public var syncLockFile: URL { url.appendingPathComponent("sync.lock") }
    /// Records the ground acknowledged, kept until it confirms their flight (``DeliveryArchive``).
    public var deliveredDirectory: URL { url.appendingPathComponent("delivered", isDirectory: true) }
}

extension AgentHome {
    /// Creates the home owner-only (0700) if needed, and tightens what an earlier version left readable by others.
    ///
    /// The home holds passengers' names, seats, bags and purchases: directories are 0700 and files 0600, like the
    /// ground's home. A version before this rule created them 0755 and 0644; when the home (or a queue directory
    /// outside it) still allows group or others anything, everything under it is tightened once: directories to
    /// 0700, files to their owner bits only (read-write at most). Symbolic links are left alone. A home that is
    /// already 0700 costs one `stat`.
    /// - Parameters:
    ///   - queueDirectory: The queue's directory (in the home or outside it).
    ///   - creatingQueue: Whether to create the queue's directory too (not for a command that only reads): one the
    ///     user may not write, or a file in its place, is then 73 naming it, as for the home (the queue's own mkdir
    ///     failed with 1).
    /// - Throws: ``AgentError`` when the home cannot be created or tightened.
    public func prepare(queueDirectory: URL? = nil, creatingQueue: Bool = true) throws(AgentError) {
        try Files.makeDirectory(url)
        if creatingQueue, let queueDirectory { try Files.makeDirectory(queueDirectory) }
        for directory in [url, queueDirectory].compactMap(\.self) {
            var info = stat()
            guard lstat(directory.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR,
                info.st_mode & 0o077 != 0
            else { continue }
            try Self.tighten(directory.path)
        }
    }

    /// Removes group and other permissions from `path` and everything below it (not following links).
    private static func tighten(_ path: String) throws(AgentError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        switch info.st_mode & S_IFMT {
        case S_IFDIR:
            try Files.io(syscall("restrict the permissions of", path: path) { chmod(path, 0o700) })
            // A directory it cannot list is an error, not one left readable by others unseen.
            for entry in try Files.entries(URL(fileURLWithPath: path)) { try tighten(path + "/" + entry) }
        case S_IFREG:
            guard info.st_mode & 0o077 != 0 else { return }
            try Files.io(syscall("restrict the permissions of", path: path) { chmod(path, info.st_mode & 0o600) })
        default:
            return
        }
    }
}

/// `path` if absolute, else `path` under the directory `base`, standardized.
///
/// Not `URL(fileURLWithPath:relativeTo:)`: that resolves against `base`'s parent unless `base` ends in `/`, which
/// depends on whether the directory existed when its URL was made.
func resolvePath(_ path: String, against base: URL) -> URL {
    let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : base.appendingPathComponent(path)
    return url.standardizedFileURL
}
