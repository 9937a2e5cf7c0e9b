#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The rules both programs follow to find their home directory and their configuration file (docs/AGENT.md,
/// docs/AGGREGATOR.md): the home is `--home`, else `$JETBRIDGE_HOME` when it is set and not empty, else the
/// program's default; the configuration is `--config FILE` (which must exist), else `<home>/<name>.json` when it
/// exists, else built-in defaults.
package enum HomeDirectory {
    /// The environment variable naming the home when `--home` is not given.
    package static let environmentVariable = "JETBRIDGE_HOME"

    /// The home's path as given (relative paths are left to the caller to resolve).
    /// - Parameters:
    ///   - flag: The `--home` value, if given.
    ///   - environment: The process environment.
    ///   - defaultPath: The program's default, relative to the current directory.
    package static func path(flag: String?, environment: [String: String], defaultPath: String) -> String {
        if let flag { return flag }
        if let named = environment[environmentVariable], !named.isEmpty { return named }
        return defaultPath
    }

    /// Whether neither `--home` nor the environment chose the home (hints then leave `--home` out).
    package static func isDefault(flag: String?, environment: [String: String]) -> Bool {
        flag == nil && (environment[environmentVariable] ?? "").isEmpty
    }

    /// A command to suggest in a message, with the user's home: `jetbridge-agent --home /srv/cart-9 keys generate`,
    /// or without `--home` when the home is the default one (the command then finds it as this one did).
    /// - Parameters:
    ///   - tool: The program (`jetbridge-agent`).
    ///   - home: The home's path; nil for the default home.
    ///   - words: The subcommand and its arguments (`keys generate`).
    package static func command(_ tool: String, home: String?, _ words: String) -> String {
        home.map { "\(tool) --home \(quotedIfNeeded($0)) \(words)" } ?? "\(tool) \(words)"
    }

    /// `path` as a shell word: as it is when it holds only characters no shell treats specially, else single-quoted.
    private static func quotedIfNeeded(_ path: String) -> String {
        let plain = path.unicodeScalars.allSatisfy {
            $0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil)
                || "/._-+,:@%".unicodeScalars.contains($0)
        }
        return plain ? path : "'" + path.replacing("'", with: #"'\''"#) + "'"
    }

    /// Where a command's configuration comes from.
    package enum Configuration: Hashable, Sendable {
        /// `--config FILE` (it exists).
        case flag(String)
        /// The home's configuration file (it exists).
        case home(String)
        /// Neither: built-in defaults.
        case defaults

        /// The file to read, if any.
        package var path: String? {
            switch self {
            case .flag(let path), .home(let path): path
            case .defaults: nil
            }
        }
    }

    /// A `--config FILE` that does not exist: never silently replaced by the home's file or the defaults.
    package struct MissingConfiguration: Error, Hashable, Sendable, CustomStringConvertible {
        /// The file named by `--config`.
        package var path: String
        /// The home's configuration file, which would be read without `--config`.
        package var homeFile: String

        package var description: String {
            "configuration file \(path) (from --config) does not exist; check the path, or leave out --config to use "
                + "\(homeFile) or the built-in defaults"
        }
    }

    /// Picks the configuration file: `--config` (it must exist), else `homeFile` when it exists, else the defaults.
    /// - Parameters:
    ///   - flag: The `--config` value, already resolved against the current directory; nil when not given.
    ///   - homeFile: `<home>/agent.json` or `<home>/aggregator.json`.
    /// - Throws: ``MissingConfiguration`` for a `--config` file that does not exist.
    package static func configuration(flag: String?, homeFile: String) throws(MissingConfiguration) -> Configuration {
        if let flag {
            guard FileManager.default.fileExists(atPath: flag) else {
                throw MissingConfiguration(path: flag, homeFile: homeFile)
            }
            return .flag(flag)
        }
        return FileManager.default.fileExists(atPath: homeFile) ? .home(homeFile) : .defaults
    }
}
