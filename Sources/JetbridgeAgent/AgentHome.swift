public import Foundation

/// The agent's home directory and the files it keeps there.
///
/// ```
/// <home>/agent.json          configuration (optional)
/// <home>/queue/              the FileQueue (unless the configuration names another directory)
/// <home>/orders/<UUID>.msgpack  the latest revision of each order taken here (the amend ledger)
/// <home>/orders/lock         flock(2) target serialising amendments
/// <home>/rejected/           records the ground refused, set aside by sync
/// <home>/sync-state.json     written by sync: when it last ran and how it ended
/// ```
public struct AgentHome: Sendable, Hashable {
    /// The environment variable naming the home when `--home` is not given.
    public static let environmentVariable = "JETBRIDGE_HOME"
    /// The home when neither `--home` nor `$JETBRIDGE_HOME` is given, relative to the current directory.
    public static let defaultPath = ".jetbridge/agent"

    public let url: URL

    public init(url: URL) {
        self.url = url.standardizedFileURL
    }

    /// Picks the home: the flag, else the environment variable, else `.jetbridge/agent`.
    ///
    /// - Parameters:
    ///   - flag: The `--home` value, if given.
    ///   - environment: The process environment.
    ///   - currentDirectory: What relative paths are relative to.
    public static func resolve(flag: String?, environment: [String: String], currentDirectory: URL) -> AgentHome {
        let path =
            flag ?? environment[environmentVariable].flatMap { $0.isEmpty ? nil : $0 } ?? defaultPath
        return AgentHome(url: resolvePath(path, against: currentDirectory))
    }

    public var configurationFile: URL { url.appendingPathComponent("agent.json") }
    public var defaultQueueDirectory: URL { url.appendingPathComponent("queue", isDirectory: true) }
    public var ordersDirectory: URL { url.appendingPathComponent("orders", isDirectory: true) }
    public var rejectedDirectory: URL { url.appendingPathComponent("rejected", isDirectory: true) }
    public var syncStateFile: URL { url.appendingPathComponent("sync-state.json") }
}

/// `path` if absolute, else `path` under the directory `base`, standardized.
///
/// Not `URL(fileURLWithPath:relativeTo:)`: that resolves against `base`'s parent unless `base` ends in `/`, which
/// depends on whether the directory existed when its URL was made.
func resolvePath(_ path: String, against base: URL) -> URL {
    let url = path.hasPrefix("/") ? URL(fileURLWithPath: path) : base.appendingPathComponent(path)
    return url.standardizedFileURL
}
