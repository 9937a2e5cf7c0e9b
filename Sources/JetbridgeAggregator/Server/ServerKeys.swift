import Foundation
import SystemSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
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
            let context = "cannot create \(home.keysDirectory.path)"
            throw AggregatorError(temporary: error, context: context)
                ?? AggregatorError(.other, "\(context): \(error.localizedDescription)")
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
    ///
    /// Says exactly what is wrong with each file, and advises `keys generate` only when there is no key pair at all:
    /// generating would replace the ground's identity, which every device trusts.
    /// - Parameter home: The aggregator's home.
    /// - Returns: The key pair.
    /// - Throws: ``AggregatorError``: `.noInput` (66, telling the operator to run `keys generate`) when both files
    ///   are missing; `.badConfiguration` when one is missing, a directory, unreadable, not a key, or when
    ///   `server.key` is readable or writable by group or others (as ssh refuses such a private key).
    public static func load(from home: AggregatorHome) throws -> CurveKeyPair {
        let secretPath = home.serverSecretKeyFile.path
        let publicPath = home.serverPublicKeyFile.path
        var secretInfo = stat()
        var publicInfo = stat()
        let hasSecret = lstat(secretPath, &secretInfo) == 0
        let hasPublic = lstat(publicPath, &publicInfo) == 0
        guard hasSecret || hasPublic else {
            throw AggregatorError(
                .noInput,
                "no server key pair in \(home.keysDirectory.path); run `jetbridge-aggregator --home \(home.directory.path) keys generate` "
                    + "(or serve with --insecure for development only)")
        }
        let secret = try readKeyFile(secretPath, other: publicPath, exists: hasSecret)
        let public_ = try readKeyFile(publicPath, other: secretPath, exists: hasPublic)
        // After the read, so that a link or a directory got its own message first.
        if let exposure = SecretFile.exposure(secretPath, holding: "the ground's secret key") {
            throw AggregatorError(.badConfiguration, exposure + " and start serve again")
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

    /// One key file's text, or an error naming exactly what is wrong with it.
    private static func readKeyFile(_ path: String, other: String, exists: Bool) throws -> String {
        let keep = "`keys generate --force` would give the ground a new identity that no device trusts"
        guard exists else {
            throw AggregatorError(
                .badConfiguration,
                "\(path) is missing while \(other) exists; restore it from a backup (\(keep))")
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            throw AggregatorError(.badConfiguration, "\(path) is a directory, not a key file; \(keep)")
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw AggregatorError(
                .badConfiguration,
                "cannot read \(path): \(reason); run serve as the user that owns the key (uid \(info.st_uid)), or fix "
                    + "its permissions; \(keep)")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 64 * 1024 {
            let count: Int
            do {
                count = try syscall("read", path: path) { read(fd, &buffer, buffer.count) }
            } catch {
                throw AggregatorError(.badConfiguration, "cannot read \(path): \(error.reason); \(keep)")
            }
            if count == 0 { break }
            bytes += buffer[..<count]
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw AggregatorError(
                .badConfiguration, "\(path) is not a key file (not text; expected 40 characters of Z85)")
        }
        return text
    }
}
