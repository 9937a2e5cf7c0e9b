/// The rule both programs follow to find their home directory (docs/AGENT.md, docs/AGGREGATOR.md): `--home`, else
/// `$JETBRIDGE_HOME` when it is set and not empty, else the program's default.
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
}
