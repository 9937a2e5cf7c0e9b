import Foundation
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The operators' sign-in token of the console (`<home>/console.token`, docs/AGGREGATOR.md, "Console"): made at the
/// first start of `serve --console` when absent (32 random bytes, base64url), 0600 from its creation and written
/// atomically; kept by the operator, never logged, never in the status or the metrics. A token file that group or
/// others may reach, or that cannot be read, stops `serve` at start (65), as a key file does.
struct ConsoleToken: Sendable {
    /// The token's text, as the operator types it and a script sends it (`Authorization: Bearer …`).
    private let text: [UInt8]

    /// The shortest token accepted from a file an operator wrote: 16 characters.
    static let minimumLength = 16
    /// The file's name in the home.
    static let fileName = "console.token"

    /// - Parameter text: The token (tests).
    init(_ text: String) {
        self.text = Array(text.utf8)
    }

    /// Whether `candidate` is the token, in time that does not depend on where they differ (a byte-by-byte
    /// comparison that stopped at the first difference would let a client guess the token a byte at a time).
    func matches(_ candidate: some Collection<UInt8>) -> Bool {
        var difference = UInt8(truncatingIfNeeded: candidate.count ^ text.count)
        var index = 0
        // Runs over the candidate's whole length, comparing with the token's bytes repeated (never stops early).
        for byte in candidate {
            difference |= byte ^ (text.isEmpty ? 0 : text[index % text.count])
            index += 1
        }
        return difference == 0 && candidate.count == text.count && !text.isEmpty
    }

    /// The token of `home`: read from `<home>/console.token`, or made there when absent.
    /// - Parameters:
    ///   - home: The aggregator's home (it exists: serve holds its lock).
    ///   - made: Called with the file's path when the token was made now (serve logs the path, never the token).
    /// - Returns: The token.
    /// - Throws: ``AggregatorError``: `.dataError` (65) for a file that group or others may reach, that cannot be
    ///   read, is a directory or holds no token; `.tryAgain` on a full disk, `.failure` when it cannot be written.
    static func load(in home: AggregatorHome, made: (String) -> Void = { _ in }) throws -> ConsoleToken {
        let path = home.consoleTokenFile.path
        var info = stat()
        if lstat(path, &info) != 0 && errno == ENOENT {
            let token = generate()
            do {
                try FileSystem.writeAtomically(Data((token + "\n").utf8), to: path, mode: 0o600)
                // Created with 0600, which the umask may narrow but never widen; this makes it exact.
                try syscall("restrict the permissions of", path: path) { chmod(path, 0o600) }
            } catch {
                throw AggregatorError(temporary: error, context: "cannot write the console's token \(path)")
                    ?? AggregatorError(.failure, "cannot write the console's token \(path): \(error)")
            }
            made(path)
            return ConsoleToken(token)
        }
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR {
            throw AggregatorError(.dataError, "\(path) is a directory, not the console's token file; remove it")
        }
        if let exposure = SecretFile.exposure(path, holding: "the console's sign-in token") {
            throw AggregatorError(.dataError, exposure + " and start serve again (or remove it: a new token is made)")
        }
        let contents: String
        do {
            contents = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let reason = FileManager.default.isReadableFile(atPath: path) ? "not UTF-8 text" : "permission denied"
            throw AggregatorError(
                .dataError,
                "cannot read the console's token \(path): \(reason); run serve as the user that owns it (uid "
                    + "\(info.st_uid)), or remove it (a new token is made at the next start)")
        }
        let token = contents.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= minimumLength, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw AggregatorError(
                .dataError,
                "\(path) does not hold a console token (at least \(minimumLength) printable ASCII characters, no "
                    + "spaces); remove it and a new one is made at the next start")
        }
        return ConsoleToken(token)
    }

    /// 32 random bytes (the system's generator: getrandom), base64url without padding: 43 characters.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension AggregatorHome {
    /// `<home>/console.token`: the console's sign-in token (``ConsoleToken``).
    var consoleTokenFile: URL { directory.appendingPathComponent(ConsoleToken.fileName) }
}
