import Foundation
import SystemSupport
public import ZeroMQ

/// The aggregator's CURVE key pair, kept as Z85 text under `<home>/keys/`: `server.key` (secret) and `server.pub`
/// (public; devices need its text), with the one rule both tools follow for key files (SystemSupport's
/// `KeyPairFiles`, docs/SECURITY.md): both 0600 in a 0700 directory, written atomically, secret first; a link where
/// one is written, and a secret that group or others may reach, are refused.
public enum ServerKeys: Sendable {
    /// The key pair's files in `home`.
    static func files(_ home: AggregatorHome) -> KeyPairFiles {
        KeyPairFiles(directory: home.keysDirectory.path, secretName: "server.key", publicName: "server.pub")
    }

    /// Generates a key pair and writes it under home.
    /// - Parameters:
    ///   - home: The aggregator's home.
    ///   - force: Replace an existing key pair (every device must then learn the new public key).
    /// - Returns: The new public key, Z85 (what devices need).
    /// - Throws: ``AggregatorError``: `.cannotCreate` when a key pair exists and `force` is false, or for a link at a
    ///   key file; `.tryAgain` on a full disk.
    @discardableResult
    public static func generate(in home: AggregatorHome, force: Bool) throws -> String {
        let files = files(home)
        if !force && files.exists {
            throw AggregatorError(
                .cannotCreate,
                "a server key pair already exists in \(home.keysDirectory.path); devices trust its public key. "
                    + "Use --force to replace it (then give every device the new public key)")
        }
        try home.create()
        let keys: CurveKeyPair
        do { keys = try CurveKeyPair.generate() } catch {
            throw AggregatorError(.failure, "cannot generate a CURVE key pair: \(error)")
        }
        do {
            try files.write(secret: keys.secretKeyZ85, public: keys.publicKeyZ85)
        } catch {
            throw AggregatorError(.failure, error)
        }
        return keys.publicKeyZ85
    }

    /// Loads the key pair `serve` needs.
    ///
    /// Says exactly what is wrong with each file, and advises `keys generate` only when there is no key pair at all:
    /// generating would replace the ground's identity, which every device trusts.
    /// - Parameter home: The aggregator's home.
    /// - Returns: The key pair.
    /// - Throws: ``AggregatorError``: `.noInput` (66, telling the operator to run `keys generate`) when both files
    ///   are missing; `.dataError` when one is missing, a directory, unreadable, not a key, or when `server.key` is
    ///   readable or writable by group or others (as ssh refuses such a private key).
    public static func load(from home: AggregatorHome) throws -> CurveKeyPair {
        let text: (secret: String, public: String)
        do {
            text = try files(home).read()
        } catch {
            let keep = "`keys generate --force` would give the ground a new identity that no device trusts"
            switch error {
            case .noKeyPair:
                throw AggregatorError(
                    .noInput,
                    "no server key pair in \(home.keysDirectory.path); run `jetbridge-aggregator --home \(home.directory.path) keys generate` "
                        + "(or serve with --insecure for development only)")
            case .missing(let path, let other):
                throw AggregatorError(
                    .dataError, "\(path) is missing while \(other) exists; restore it from a backup (\(keep))")
            case .directory(let path):
                throw AggregatorError(.dataError, "\(path) is a directory, not a key file; \(keep)")
            case .unreadable(let path, let reason, let owner):
                throw AggregatorError(
                    .dataError,
                    "cannot read \(path): \(reason); run serve as the user that owns the key (uid \(owner)), or fix "
                        + "its permissions; \(keep)")
            case .notText(let path):
                throw AggregatorError(
                    .dataError, "\(path) is not a key file (not text; expected 40 characters of Z85)")
            case .exposed(let path, _):
                throw AggregatorError(
                    .dataError,
                    (SecretFile.exposure(path, holding: "the ground's secret key") ?? path) + " and start serve again")
            }
        }
        do {
            return try CurveKeyPair(publicKeyZ85: text.public, secretKeyZ85: text.secret)
        } catch {
            throw AggregatorError(
                .dataError,
                "\(home.keysDirectory.path) does not hold a valid key pair (40 characters of Z85 each): \(error)")
        }
    }
}
