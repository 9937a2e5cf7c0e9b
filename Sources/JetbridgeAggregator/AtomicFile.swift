import Foundation
import SystemSupport

extension AggregatorError {
    /// The aggregator's error for a failed system call: what failed, where, and the system's reason; `code` unless
    /// the disk is full (``FailureClass``: `.temporary`).
    init(_ code: Code, _ error: SystemError) {
        let context = "cannot \(error.operation) \(error.path ?? "")"
        self = AggregatorError(temporary: error, context: context)
            ?? AggregatorError(code, "\(context): \(error.reason) (errno \(error.errno))")
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
    ///   - url: The file to replace or create.
    ///   - mode: Permissions of the new file.
    /// - Throws: ``AggregatorError`` naming the file: `.temporary` (75) on a full disk (``FailureClass``), else
    ///   `.other`.
    static func write(_ data: Data, to url: URL, mode: mode_t = 0o644) throws {
        do {
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try FileSystem.writeAtomically(data, to: url.path, mode: mode)
        } catch {
            let context = "cannot write \(url.path)"
            throw AggregatorError(temporary: error, context: context) ?? AggregatorError(.other, "\(context): \(error)")
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
