public import Foundation
public import ZeroMQ

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension AgentHome {
    /// `<home>/keys/`: this device's CURVE key pair.
    public var keysDirectory: URL { url.appendingPathComponent("keys", isDirectory: true) }
    /// `<home>/keys/device.key`: the secret key, 40 characters of Z85 and a newline, mode 0600.
    public var secretKeyFile: URL { keysDirectory.appendingPathComponent("device.key") }
    /// `<home>/keys/device.pub`: the public key, 40 characters of Z85 and a newline.
    public var publicKeyFile: URL { keysDirectory.appendingPathComponent("device.pub") }
}

/// This device's CURVE key pair, kept as two small text files under `<home>/keys/`.
public enum DeviceKeys {
    /// Generates a key pair and writes it, the secret first (mode 0600) so a crash never leaves a public key whose
    /// secret is missing.
    /// - Parameters:
    ///   - home: The agent's home.
    ///   - force: Replace an existing pair (the ground must then allow the new public key).
    /// - Returns: The new public key, 40 characters of Z85 (what the ground's allow list needs).
    /// - Throws: ``AgentError``: `cannotCreate` (73) if a pair exists and `force` is false; `failure` for I/O errors.
    @discardableResult
    public static func generate(in home: AgentHome, force: Bool) throws(AgentError) -> String {
        let fileManager = FileManager.default
        if !force,
            fileManager.fileExists(atPath: home.secretKeyFile.path)
                || fileManager.fileExists(atPath: home.publicKeyFile.path)
        {
            throw AgentError(
                .cannotCreate,
                "a key pair already exists in \(home.keysDirectory.path); keep it, or pass --force to replace it (the ground must then allow the new public key)"
            )
        }
        let keys: CurveKeyPair
        do {
            keys = try CurveKeyPair.generate()
        } catch {
            throw AgentError(.failure, "cannot generate a CURVE key pair: \(error)")
        }
        try home.prepare()
        try Files.makeDirectory(home.keysDirectory)
        chmod(home.keysDirectory.path, 0o700)
        try writeKeyFile(keys.secretKeyZ85 + "\n", to: home.secretKeyFile, mode: 0o600)
        try writeKeyFile(keys.publicKeyZ85 + "\n", to: home.publicKeyFile, mode: 0o600)
        return keys.publicKeyZ85
    }

    /// Reads the key pair `keys generate` wrote.
    /// - Parameter home: The agent's home.
    /// - Returns: The pair.
    /// - Throws: ``AgentError``: `noInput` when there is none (run `keys generate`), `dataError` when a file is damaged.
    public static func load(from home: AgentHome) throws(AgentError) -> CurveKeyPair {
        guard FileManager.default.fileExists(atPath: home.secretKeyFile.path) else {
            throw AgentError(
                .noInput,
                "this device has no key pair (\(home.secretKeyFile.path) does not exist); run `jetbridge-agent keys generate` and allow the printed key on the ground, or use --insecure for development"
            )
        }
        let secret = try readKey(home.secretKeyFile)
        let publicKey = try readKey(home.publicKeyFile)
        do {
            return try CurveKeyPair(publicKeyZ85: publicKey, secretKeyZ85: secret)
        } catch {
            throw AgentError(
                .dataError,
                "the key files in \(home.keysDirectory.path) do not hold 40-character Z85 keys; regenerate them with `jetbridge-agent keys generate --force`"
            )
        }
    }

    /// The command that allows a device on the ground.
    ///
    /// The key is single-quoted (Z85 uses `$ & * ( ) < > ^ !` and never `'`), and a key that starts with `-` (Z85 has
    /// `-` in its alphabet) comes after `--` so the aggregator's argument parser does not take it for an option.
    /// - Parameters:
    ///   - device: The device id.
    ///   - publicKeyZ85: Its public key.
    /// - Returns: `jetbridge-aggregator devices allow cart-1 'KEY'`.
    public static func allowCommand(device: String, publicKeyZ85: String) -> String {
        let separator = publicKeyZ85.hasPrefix("-") ? "-- " : ""
        return "jetbridge-aggregator devices allow \(separator)\(device) '\(publicKeyZ85)'"
    }

    /// Decodes a server public key given as Z85 text.
    /// - Parameters:
    ///   - text: 40 characters of Z85.
    ///   - source: Where it came from, for the message (`--server-key`, `ground.serverPublicKey`).
    /// - Throws: ``AgentError`` `dataError` unless it decodes to 32 bytes.
    public static func serverKey(_ text: String, source: String) throws(AgentError) -> Data {
        guard let key = Z85.curveKey(text) else {
            throw AgentError(
                .dataError, "\(source): the server's public key must be 40 characters of Z85 (a 32-byte CURVE key)")
        }
        return key
    }

    private static func readKey(_ url: URL) throws(AgentError) -> String {
        do {
            return try String(contentsOf: url, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            throw AgentError(.noInput, "cannot read \(url.path): \(error.localizedDescription)")
        }
    }

    /// Writes `text` with `mode` from the start (never world-readable for a moment), atomically.
    private static func writeKeyFile(_ text: String, to url: URL, mode: mode_t) throws(AgentError) {
        try Files.writeAtomically(Data(text.utf8), to: url, mode: mode)
    }
}
