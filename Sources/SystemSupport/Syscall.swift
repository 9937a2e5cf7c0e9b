#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#endif

/// A failed system call: the operation, the path (and byte offset) it worked on, and `errno` with its `strerror`
/// text.
///
/// The one place where `errno` becomes a Swift error (swift-nio's `IOError`). It is not API: each library maps it to
/// its public error where its own code calls in (`FileQueueError`, `AgentError`, `AggregatorError`, `StoreError`).
package struct SystemError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What was attempted, in a few words (`open`, `fsync`, `rename to /x/y`).
    package var operation: String
    /// The file the call worked on, when there is one.
    package var path: String?
    /// The byte offset for positioned reads and writes.
    package var offset: Int64?
    /// The C `errno`.
    package var errno: Int32
    /// Whether the call refused to follow a symbolic link at ``path`` (``FileSystem/openFile(_:_:mode:operation:)``,
    /// ``FileSystem/refuseSymbolicLink(_:operation:)``); ``errno`` is then `ELOOP`.
    package var isRefusedLink: Bool

    package init(_ operation: String, path: String? = nil, offset: Int64? = nil, errno: Int32) {
        self.operation = operation
        self.path = path
        self.offset = offset
        self.errno = errno
        self.isRefusedLink = false
    }

    /// A symbolic link found at `path` where the caller writes a file, refused rather than followed.
    package static func refusedLink(_ operation: String, path: String) -> SystemError {
        var error = SystemError(operation, path: path, errno: ELOOP)
        error.isRefusedLink = true
        return error
    }

    /// The system's text for ``errno`` (`strerror`); for a refused link, that it is one (`ELOOP`'s own text, "too many
    /// levels of symbolic links", would not say so).
    package var reason: String {
        isRefusedLink ? "it is a symbolic link, which is not followed" : String(cString: strerror(errno))
    }

    /// The disk (or the user's quota) is full: `ENOSPC` or `EDQUOT`, which callers report as "try again later".
    package var isNoSpace: Bool { Self.isNoSpace(errno) }

    /// Whether `code` is a full disk (or quota): `ENOSPC` or `EDQUOT`.
    package static func isNoSpace(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT }

    package var description: String {
        "\(operation)\(path.map { " \($0)" } ?? "") failed: \(reason) (errno \(errno))"
    }
}

/// Runs a system call that returns -1 and sets `errno` on failure, retrying on `EINTR`.
/// - Parameters:
///   - operation: What is attempted, for the error.
///   - path: The file it works on, for the error.
///   - offset: The byte offset, for the error.
///   - body: The call.
/// - Returns: What the call returned.
/// - Throws: ``SystemError`` for any other failure.
@discardableResult
package func syscall<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String, path: String? = nil, offset: Int64? = nil, _ body: () -> T
) throws(SystemError) -> T {
    // A failed call always sets a non-zero errno, so tolerating 0 tolerates nothing.
    try syscall(operation(), path: path, offset: offset, tolerating: 0, body)!
}

/// Like ``syscall(_:path:offset:_:)``, but a failure with `tolerated` (such as `ENOENT` for "if it exists") returns
/// nil instead of throwing.
@discardableResult
package func syscall<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String, path: String? = nil, offset: Int64? = nil, tolerating tolerated: Int32,
    _ body: () -> T
) throws(SystemError) -> T? {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = errno
        if code == EINTR { continue }
        if code == tolerated { return nil }
        throw SystemError(operation(), path: path, offset: offset, errno: code)
    }
}
