#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#endif

/// A CURVE key pair kept as two small text files (40 characters of Z85 and a newline each) in a directory of their
/// own: the agent's `keys/device.key` and `device.pub`, the ground's `keys/server.key` and `server.pub`.
///
/// One rule for both tools (docs/SECURITY.md, "Key files"):
/// - the directory is 0700 and both files 0600 from their creation, whatever the umask: the homes are private, and
///   a public key is handed on by copying its text;
/// - they are written atomically (temporary file, fsync, rename, directory fsync), the secret first, so a crash
///   never leaves a public key whose secret is missing; a symbolic link where one is written is refused;
/// - a pair is never replaced unless the caller was told to (``exists``);
/// - reading says exactly what is wrong with each file (``Problem``), and refuses a secret key that group or others
///   may read or write, as ssh refuses such a private key.
package struct KeyPairFiles: Sendable {
    /// The directory holding both files.
    package let directory: String
    /// The secret key's file.
    package let secretPath: String
    /// The public key's file.
    package let publicPath: String

    /// - Parameters:
    ///   - directory: The keys directory (`<home>/keys`).
    ///   - secretName: The secret key's file name (`device.key`).
    ///   - publicName: The public key's file name (`device.pub`).
    package init(directory: String, secretName: String, publicName: String) {
        self.directory = directory
        secretPath = directory + "/" + secretName
        publicPath = directory + "/" + publicName
    }

    /// The mode of both files.
    package static let fileMode: mode_t = 0o600
    /// The mode of the directory.
    package static let directoryMode: mode_t = 0o700

    /// Whether either file is there (a link or a directory counts): a pair that exists is replaced only on request.
    package var exists: Bool {
        var info = stat()
        return lstat(secretPath, &info) == 0 || lstat(publicPath, &info) == 0
    }

    /// Writes the pair: the directory (made 0700, or tightened to it), then the secret, then the public key.
    /// - Parameters:
    ///   - secret: The secret key's text (a newline is added).
    ///   - public: The public key's text (a newline is added).
    /// - Throws: ``SystemError`` naming the step and the file; ``SystemError/isRefusedLink`` for a link at a key
    ///   file.
    package func write(secret: String, public: String) throws(SystemError) {
        try FileSystem.makeDirectories(directory, mode: Self.directoryMode)
        try syscall("restrict the permissions of", path: directory) { chmod(directory, Self.directoryMode) }
        for (path, text) in [(secretPath, secret), (publicPath, `public`)] {
            try FileSystem.refuseSymbolicLink(path)
            try FileSystem.writeAtomically(Data((text + "\n").utf8), to: path, mode: Self.fileMode)
            // writeAtomically creates with `mode`, which the umask may narrow but never widen; this makes it exact.
            try syscall("restrict the permissions of", path: path) { chmod(path, Self.fileMode) }
        }
    }

    /// What is wrong with a key pair on disk.
    package enum Problem: Error, Hashable, Sendable {
        /// Neither file is there: the only case where generating a pair is the advice.
        case noKeyPair
        /// One file is missing while the other exists.
        case missing(String, other: String)
        /// A directory where a key file belongs.
        case directory(String)
        /// The file cannot be opened or read; the system's reason, and the file's owner.
        case unreadable(String, reason: String, owner: uid_t)
        /// The file does not hold text.
        case notText(String)
        /// The secret key may be read or written by group or others; its permission bits.
        case exposed(String, mode: mode_t)
    }

    /// Reads both files, each text trimmed of surrounding white space; the caller checks that they are keys.
    /// - Returns: The secret key's text and the public key's.
    /// - Throws: ``Problem``, the first one found: no pair, then each file in turn (secret first), then an exposed
    ///   secret (after the reads, so a link or a directory gets its own message first).
    package func read() throws(Problem) -> (secret: String, public: String) {
        let hasSecret = try Self.isPresent(secretPath)
        let hasPublic = try Self.isPresent(publicPath)
        guard hasSecret || hasPublic else { throw .noKeyPair }
        let secret = try Self.readText(secretPath, other: publicPath, exists: hasSecret)
        let publicKey = try Self.readText(publicPath, other: secretPath, exists: hasPublic)
        if let mode = Self.exposedMode(of: secretPath) { throw .exposed(secretPath, mode: mode) }
        return (
            secret.trimmingWhitespace(),
            publicKey.trimmingWhitespace()
        )
    }

    /// The permission bits of the file at `path` when group or others may do anything with it (any of 0077), else
    /// nil (also when it cannot be examined: the caller's read then says why). Follows a link to the file, as
    /// reading it does. The rule for every file that holds a secret (a key, a database password).
    package static func exposedMode(of path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & 0o077 != 0 else { return nil }
        return info.st_mode & 0o777
    }

    /// Whether a key file is there (a link or a directory counts). Only a file that is not there is missing: one this
    /// user may not reach (`EACCES` on the directories) or a path through a file (`ENOTDIR`) is unreadable, not "no
    /// key pair" with advice to generate one.
    private static func isPresent(_ path: String) throws(Problem) -> Bool {
        var info = stat()
        guard lstat(path, &info) != 0 else { return true }
        let code = errno
        guard code == ENOENT else {
            throw .unreadable(path, reason: String(cString: strerror(code)), owner: ownerOfNearest(path))
        }
        return false
    }

    /// The owner of the nearest directory above `path` that can be examined (for the advice of an unreadable file).
    private static func ownerOfNearest(_ path: String) -> uid_t {
        var directory = path
        var info = stat()
        while let slash = directory.lastIndex(of: "/") {
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            if stat(directory, &info) == 0 || directory == "/" { break }
        }
        return info.st_uid
    }

    /// One key file's text (at most 64 KiB read), or the problem with it.
    private static func readText(_ path: String, other: String, exists: Bool) throws(Problem) -> String {
        guard exists else { throw .missing(path, other: other) }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { throw .directory(path) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .unreadable(path, reason: String(cString: strerror(errno)), owner: info.st_uid) }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64 * 1024)
        // The buffer's closure rethrows untyped errors, so the typed error travels out in a Result.
        let read = bytes.withUnsafeMutableBytes { buffer in
            Result { () throws(SystemError) in try FileSystem.readFully(fd, into: buffer, path: path) }
        }
        let count: Int
        switch read {
        case .success(let value): count = value
        case .failure(let error): throw .unreadable(path, reason: error.reason, owner: info.st_uid)
        }
        guard let text = String(validating: bytes[..<count], as: UTF8.self) else { throw .notText(path) }
        return text
    }
}
