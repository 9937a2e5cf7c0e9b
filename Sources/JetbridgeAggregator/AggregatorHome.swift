public import Foundation
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The aggregator's home directory and what lives in it:
///
/// ```
/// <home>/aggregator.json        configuration (optional)
/// <home>/keys/server.key         the server's CURVE secret key, Z85 (mode 0600)
/// <home>/keys/server.pub         the server's CURVE public key, Z85 (give it to devices)
/// <home>/devices.json            the allow list: device id → public key
/// <home>/jetbridge.sqlite        the store (key `store`)
/// <home>/receipts/               receipts (key `receipts`)
/// <home>/serve.lock              the running serve's lock (``HomeLock``)
/// <home>/status.json             what `status` shows, while serve runs
/// ```
///
/// The home is kept 0700 (``secure()``), and no file in it is written through a symbolic link (SystemSupport's
/// `FileSystem.openFile`, `AtomicFile`, `StoreLocation.refuseLinks`): docs/AGGREGATOR.md, "Home".
public struct AggregatorHome: Hashable, Sendable {
    /// The default home, relative to the working directory.
    public static let defaultPath = ".jetbridge/aggregator"
    /// The environment variable that names the home when `--home` is not given (both programs read it).
    public static var environmentVariable: String { HomeDirectory.environmentVariable }

    public let directory: URL
    /// Whether this is the default home (neither `--home` nor `$JETBRIDGE_HOME` named it): the commands that
    /// messages suggest then need no `--home` (``command(_:)``).
    public let isDefault: Bool

    /// - Parameters:
    ///   - directory: The home directory; it need not exist yet.
    ///   - isDefault: Whether it is the default home, found without `--home`.
    public init(directory: URL, isDefault: Bool = false) {
        self.directory = directory.standardizedFileURL
        self.isDefault = isDefault
    }

    /// The home from `--home`, else `$JETBRIDGE_HOME`, else ``defaultPath``.
    /// - Parameters:
    ///   - flag: The `--home` value, if given.
    ///   - environment: The process environment.
    public init(flag: String?, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(
            directory: URL(
                fileURLWithPath: HomeDirectory.path(flag: flag, environment: environment, defaultPath: Self.defaultPath)),
            isDefault: HomeDirectory.isDefault(flag: flag, environment: environment))
    }

    /// The aggregator command `words` as a message suggests it, with this home: `jetbridge-aggregator --home /srv/ground
    /// serve`, or without `--home` for the default home.
    public func command(_ words: String) -> String {
        HomeDirectory.command("jetbridge-aggregator", home: isDefault ? nil : directory.path, words)
    }

    public var configurationFile: URL { directory.appendingPathComponent("aggregator.json") }
    public var keysDirectory: URL { directory.appendingPathComponent("keys") }
    public var serverSecretKeyFile: URL { keysDirectory.appendingPathComponent("server.key") }
    public var serverPublicKeyFile: URL { keysDirectory.appendingPathComponent("server.pub") }
    public var devicesFile: URL { directory.appendingPathComponent("devices.json") }

    /// A configured path: absolute as is, relative under home.
    public func resolve(_ path: String) -> URL {
        path.hasPrefix("/") ? URL(fileURLWithPath: path) : directory.appendingPathComponent(path)
    }

    /// Loads the configuration: `--config FILE` if given, else `<home>/aggregator.json` if present, else defaults.
    /// - Parameter file: The `--config` value, if given.
    /// - Returns: The configuration; flags are applied by the caller on top.
    /// - Throws: ``AggregatorError``.
    public func configuration(file: String?) throws -> AggregatorConfiguration {
        let source: HomeDirectory.Configuration
        do {
            source = try HomeDirectory.configuration(
                flag: file.map { URL(fileURLWithPath: $0).path }, homeFile: configurationFile.path)
        } catch {
            throw AggregatorError(.noInput, error.description)
        }
        return try source.path.map { try AggregatorConfiguration.load(from: URL(fileURLWithPath: $0)) }
            ?? AggregatorConfiguration()
    }

    /// Creates the home directory (owner-only, since it holds keys) if missing, then applies ``secure()``.
    /// - Throws: ``AggregatorError``.
    public func create() throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let context = "cannot create home directory \(directory.path)"
            throw AggregatorError(temporary: error, context: context)
                ?? AggregatorError(.cannotCreate, "\(context): \(error.localizedDescription)")
        }
        try secure()
    }

    /// The home's permission rule, applied by every command that writes into the home before it writes: no one but
    /// its owner may enter it.
    ///
    /// A home that group or others may enter, read or write (any of the mode bits 0077) is tightened to 0700 when the
    /// user running the command owns it, as the agent tightens its home. A home owned by another user is not changed:
    /// if group or others may write it, it is refused, since whoever can write it can plant a link where the ground
    /// writes a file, or replace its allow list. A home that does not exist (yet), or is not a directory, is left to
    /// the caller. The home's path itself may be a symbolic link: the operator chose it.
    /// - Throws: ``AggregatorError``: `.dataError` (65) for another user's home that group or others may
    ///   write; `.failure` when tightening fails.
    public func secure() throws {
        var info = stat()
        guard stat(directory.path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_mode & 0o077 != 0 else {
            return
        }
        let mode = String(info.st_mode & 0o7777, radix: 8)
        if info.st_uid == geteuid() {
            do {
                try syscall("restrict the permissions of", path: directory.path) { chmod(directory.path, 0o700) }
            } catch {
                throw AggregatorError(.failure, error)
            }
        } else if info.st_mode & 0o022 != 0 {
            throw AggregatorError(
                .dataError,
                "the home \(directory.path) is writable by group or others (mode \(mode)) and owned by uid "
                    + "\(info.st_uid), not by this user (uid \(geteuid())): whoever can write it can plant links or "
                    + "replace the keys and the allow list there; have its owner run `chmod 700 \(directory.path)` "
                    + "(and check what is in it), or run as its owner")
        }
    }
}
