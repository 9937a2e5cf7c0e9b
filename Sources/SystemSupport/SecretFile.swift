#if canImport(Glibc)
    import Glibc
#endif

/// The rule for a file that holds a secret (the server's key, a PostgreSQL password): no permission for group or
/// others, as ssh requires of a private key.
package enum SecretFile {
    /// Why the file at `path` breaks the rule (its mode and the `chmod 600` that fixes it), or nil when it does not or
    /// cannot be examined (the caller's read then says why). Follows a link to the file, as reading it does.
    /// - Parameters:
    ///   - path: The file.
    ///   - what: What it holds, for the message ("the ground's secret key").
    package static func exposure(_ path: String, holding what: String) -> String? {
        guard let mode = KeyPairFiles.exposedMode(of: path) else { return nil }
        return "\(path) is accessible to group or others (mode \(String(mode, radix: 8))); \(what) "
            + "must be private: run `chmod 600 \(path)`"
    }
}
