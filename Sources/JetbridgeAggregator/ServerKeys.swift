import Foundation
public import ZeroMQ

/// The aggregator's CURVE key pair, kept as Z85 text under `<home>/keys/`: `server.key` (secret, mode 0600) and
/// `server.pub` (public; devices need it).
public enum ServerKeys: Sendable {
    /// Generates a key pair and writes it under home.
    /// - Parameters:
    ///   - home: The aggregator's home.
    ///   - force: Replace an existing key pair (every device must then learn the new public key).
    /// - Returns: The new public key, Z85 (what devices need).
    /// - Throws: ``AggregatorError``: `.unavailable` when a key pair exists and `force` is false.
    @discardableResult
    public static func generate(in home: AggregatorHome, force: Bool) throws -> String {
        let manager = FileManager.default
        if !force
            && (manager.fileExists(atPath: home.serverSecretKeyFile.path)
                || manager.fileExists(atPath: home.serverPublicKeyFile.path))
        {
            throw AggregatorError(
                .cannotCreate,
                "a server key pair already exists in \(home.keysDirectory.path); devices trust its public key. "
                    + "Use --force to replace it (then give every device the new public key)")
        }
        try home.create()
        do {
            try manager.createDirectory(
                at: home.keysDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw AggregatorError(.other, "cannot create \(home.keysDirectory.path): \(error.localizedDescription)")
        }
        let keys: CurveKeyPair
        do { keys = try CurveKeyPair.generate() } catch {
            throw AggregatorError(.other, "cannot generate a CURVE key pair: \(error)")
        }
        // Secret first: a crash in between leaves no public key that has no secret behind it.
        try AtomicFile.write(Data((keys.secretKeyZ85 + "\n").utf8), to: home.serverSecretKeyFile, mode: 0o600)
        try AtomicFile.write(Data((keys.publicKeyZ85 + "\n").utf8), to: home.serverPublicKeyFile, mode: 0o644)
        return keys.publicKeyZ85
    }

    /// Loads the key pair `serve` needs.
    /// - Parameter home: The aggregator's home.
    /// - Returns: The key pair.
    /// - Throws: ``AggregatorError``: `.noInput` (66, telling the operator to run `keys generate`) when missing,
    ///   `.badConfiguration` when the files do not hold a key pair.
    public static func load(from home: AggregatorHome) throws -> CurveKeyPair {
        guard let secret = try? String(contentsOf: home.serverSecretKeyFile, encoding: .utf8),
            let public_ = try? String(contentsOf: home.serverPublicKeyFile, encoding: .utf8)
        else {
            throw AggregatorError(
                .noInput,
                "no server key pair in \(home.keysDirectory.path); run `jetbridge-aggregator --home \(home.directory.path) keys generate` "
                    + "(or serve with --insecure for development only)")
        }
        let secretText = secret.trimmingCharacters(in: .whitespacesAndNewlines)
        let publicText = public_.trimmingCharacters(in: .whitespacesAndNewlines)
        do {
            return try CurveKeyPair(publicKeyZ85: publicText, secretKeyZ85: secretText)
        } catch {
            throw AggregatorError(
                .badConfiguration,
                "\(home.keysDirectory.path) does not hold a valid key pair (40 characters of Z85 each): \(error)")
        }
    }
}
