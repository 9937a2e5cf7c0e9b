/// A failure of the aggregator's store or receipt files that is not SQLite's own `DatabaseError`.
///
/// Carries what failed (`code`), where (`path`: a database or file path), and a message that says what to do.
public struct StoreError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// A stored record's bytes no longer decode with the decoder the store was opened with.
        case undecodableRecord
        /// A stored row breaks a rule the store wrote it with (such as an invalid flight id).
        case corruptRow
        /// A file-system call failed; `errno` is set.
        case fileSystem
    }

    public var code: Code
    public var message: String
    public var path: String
    /// The C `errno` for ``Code/fileSystem``.
    public var errno: Int32?

    public init(_ code: Code, _ message: String, path: String, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.errno = errno
    }

    public var description: String { "\(path): \(message)" }
}
