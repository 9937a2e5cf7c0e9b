import SystemSupport
public import ZeroMQ

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

extension AgentHome {
    /// `<home>/keys/`: this device's CURVE key pair.
    public var keysDirectory: URL { url.appendingPathComponent("keys", isDirectory: true) }
    /// `<home>/keys/device.key`: the secret key, 40 characters of Z85 and a newline, mode 0600.
    public var secretKeyFile: URL { keysDirectory.appendingPathComponent("device.key") }
    /// `<home>/keys/device.pub`: the public key, 40 characters of Z85 and a newline.
    public var publicKeyFile: URL { keysDirectory.appendingPathComponent("device.pub") }
}

/// This device's CURVE key pair, kept as two small text files under `<home>/keys/` with the one rule both tools
/// follow for key files (SystemSupport's `KeyPairFiles`, docs/SECURITY.md): both 0600 in a 0700 directory, written
/// atomically, secret first; a secret that group or others may reach is refused.
public enum DeviceKeys {
    /// The key pair's files in `home`.
    static func files(_ home: AgentHome) -> KeyPairFiles {
        KeyPairFiles(directory: home.keysDirectory.path, secretName: "device.key", publicName: "device.pub")
    }

    /// Generates a key pair and writes it.
    /// - Parameters:
    ///   - home: The agent's home.
    ///   - force: Replace an existing pair (the ground must then allow the new public key).
    /// - Returns: The new public key, 40 characters of Z85 (what the ground's allow list needs).
    /// - Throws: ``AgentError``: `cannotCreate` (73) if a pair exists and `force` is false; `failure` for I/O errors.
    @discardableResult
    public static func generate(in home: AgentHome, force: Bool) throws(AgentError) -> String {
        let files = files(home)
        if !force, files.exists {
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
        try Files.io(files.write(secret: keys.secretKeyZ85, public: keys.publicKeyZ85))
        return keys.publicKeyZ85
    }

    /// Reads the key pair `keys generate` wrote.
    ///
    /// Says what is wrong with each file: no key pair at all advises `keys generate`, a damaged one `keys generate
    /// --force` and allowing the new key on the ground (a device's key is replaced that way; the ground's is not).
    /// - Parameter home: The agent's home.
    /// - Returns: The pair.
    /// - Throws: ``AgentError``: `noInput` when there is none (run `keys generate`); `dataError` when a file is
    ///   missing while the other exists, is a directory, cannot be read, is not a key, or when the secret key may be
    ///   read or written by group or others.
    public static func load(from home: AgentHome) throws(AgentError) -> CurveKeyPair {
        let text: (secret: String, public: String)
        do {
            text = try files(home).read()
        } catch {
            let regenerate = "`\(home.command("keys generate --force"))` (then allow the new key on the ground)"
            switch error {
            case .noKeyPair where !FileSystem.exists(home.url.path):
                // A home that does not exist is a new device, or a mistyped --home: say which home was looked in.
                throw AgentError(
                    .noInput,
                    "no device home at \(home.url.path), so no key pair: for a new device run `\(home.command("keys generate"))` and allow the printed key on the ground; otherwise check --home or JETBRIDGE_HOME"
                )
            case .noKeyPair:
                throw AgentError(
                    .noInput,
                    "this device has no key pair (\(home.secretKeyFile.path) does not exist); run `\(home.command("keys generate"))` and allow the printed key on the ground, or use --insecure for development"
                )
            case .missing(let path, let other):
                throw AgentError(
                    .dataError,
                    "\(path) is missing while \(other) exists; restore it, or make a new pair with \(regenerate)")
            case .directory(let path):
                throw AgentError(
                    .dataError,
                    "\(path) is a directory, not a key file; remove it, or make a new pair with \(regenerate)")
            case .unreadable(let path, let reason, let owner):
                throw AgentError(
                    .dataError,
                    "cannot read \(path): \(reason); run as the user that owns it (uid \(owner)), or fix its permissions"
                )
            case .notText(let path):
                throw AgentError(.dataError, "\(path) is not a key file (not text; expected 40 characters of Z85)")
            case .exposed(let path, let mode):
                throw AgentError(
                    .dataError,
                    "\(path) is accessible to group or others (mode \(String(mode, radix: 8))); this device's secret key must be private: run `chmod 600 \(path)`"
                )
            }
        }
        do {
            return try CurveKeyPair(publicKeyZ85: text.public, secretKeyZ85: text.secret)
        } catch {
            throw AgentError(
                .dataError,
                "the key files in \(home.keysDirectory.path) do not hold 40-character Z85 keys; regenerate them with `\(home.command("keys generate --force"))`"
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
}
