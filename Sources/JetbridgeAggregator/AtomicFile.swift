import Foundation
import SystemSupport
import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

extension AggregatorError {
    /// The aggregator's error for a failed system call: what failed, where, and the system's reason; `code` unless
    /// the disk is full (``FailureClass``: `.tryAgain`) or the call refused a symbolic link (``refusedLink(_:)``).
    init(_ code: Code, _ error: SystemError) {
        if error.isRefusedLink {
            self = .refusedLink(error.path ?? "")
            return
        }
        let context = "cannot \(error.operation) \(error.path ?? "")"
        self = AggregatorError(temporary: error, context: context)
            ?? AggregatorError(code, "\(context): \(error.reason) (errno \(error.errno))")
    }

    /// A symbolic link where the aggregator writes a file: `.cannotCreate` (73), naming it. The aggregator never
    /// writes through a link (docs/AGGREGATOR.md, "Home"), so it stops before writing anything rather than replace
    /// what someone put there.
    static func refusedLink(_ path: String) -> AggregatorError {
        AggregatorError(
            .cannotCreate,
            "\(path) is a symbolic link; jetbridge-aggregator never writes through a link where it keeps its files "
                + "(one planted there could make it overwrite another file): see where it points and who put it "
                + "there, then remove it (`rm \(path)`) and try again")
    }
}

extension StoreError {
    /// The store's error for a failed system call on its receipt files.
    init(_ error: SystemError) {
        self.init(
            .fileSystem, "\(error.operation) failed: \(error.reason) (errno \(error.errno))", path: error.path ?? "",
            errno: error.errno)
    }
}

/// Replaces the aggregator's files atomically with SystemSupport's write (temporary file, fsync, rename, directory
/// fsync), creating the directory first.
enum AtomicFile {
    /// - Parameters:
    ///   - data: The new contents.
    ///   - url: The file to replace or create; a symbolic link there is refused (the rename would replace it, not
    ///     follow it, but a link where the aggregator keeps a file was put there by someone, which the operator should
    ///     know).
    ///   - mode: Permissions of the new file.
    /// - Throws: ``AggregatorError`` naming the file: `.cannotCreate` (73) for a link, `.tryAgain` (75) on a full
    ///   disk (``FailureClass``), else `.failure`.
    static func write(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileSystem.refuseSymbolicLink(url.path)
            try FileSystem.writeAtomically(data, to: url.path, mode: mode)
        } catch let error as SystemError where error.isRefusedLink {
            throw AggregatorError.refusedLink(url.path)
        } catch {
            let context = "cannot write \(url.path)"
            throw AggregatorError(temporary: error, context: context) ?? AggregatorError(.failure, "\(context): \(error)")
        }
    }
}

/// Runs SystemSupport calls on the receipt files, turning a ``SystemError`` into a ``StoreError`` (the store's
/// boundary).
@discardableResult
func storeIO<T>(_ body: @autoclosure () throws(SystemError) -> T) throws(StoreError) -> T {
    do {
        return try body()
    } catch {
        throw StoreError(error)
    }
}
