import Foundation
import SystemSupport

/// The exclusive lock one `serve` holds on its home for its whole life: SystemSupport's ``FileLock`` on
/// `<home>/serve.lock`, whose contents are the holder's pid.
///
/// The kernel drops a `flock` when its holder exits in any way (`kill -9` too), so a stale lock file never blocks
/// the next start; the pid in it is only read while the lock is held, to name the running process.
public final class HomeLock: Sendable {
    /// The lock file's name in the home.
    public static let fileName = "serve.lock"

    /// The lock file.
    public var path: String { lock.path }
    private let lock: FileLock

    /// Takes the lock (waiting up to 2 s) or throws.
    ///
    /// First the home's rule (``AggregatorHome/secure()``), and no symbolic link where `serve` writes its own files
    /// (the lock and `status.json`), so that nothing is written before a planted link is found.
    /// - Parameter home: The home to lock (created if missing).
    /// - Throws: ``AggregatorError``: `.unavailable` naming the home and the running holder's pid when another
    ///   process holds it; `.cannotCreate` (73) for a link at the lock or the status file; what
    ///   ``AggregatorHome/create()`` throws.
    public init(home: AggregatorHome) throws {
        try home.create()
        let path = home.directory.appendingPathComponent(Self.fileName).path
        do {
            try FileSystem.refuseSymbolicLink(ServeStatus.url(in: home).path)
            // Up to 2 s: `status` takes a shared lock on the file for an instant to see who holds it, which must
            // not make a serve starting at that instant give up.
            lock = try FileLock(path: path, waitingUpTo: .seconds(2), recordingPID: true)
        } catch let error as SystemError {
            throw AggregatorError(.unavailable, error)
        } catch FileLock.Failure.system(let error) {
            throw AggregatorError(.unavailable, error)
        } catch FileLock.Failure.busy(let holder) {
            throw AggregatorError(
                .unavailable,
                "another jetbridge-aggregator serve \(holder.map { "(pid \($0)) " } ?? "")is running on the home "
                    + "\(home.directory.path) (it holds \(path)); stop it first, or give this one another --home")
        }
    }

    /// Lets the lock go (idempotent); the process keeps running.
    public func release() {
        lock.release()
    }

    /// The pid of the `serve` that holds the home's lock, or nil when none does (nor when the lock file is a link:
    /// no `serve` holds one).
    /// - Parameter home: The home to look at.
    public static func holder(of home: AggregatorHome) -> Int32? {
        FileLock.holder(of: home.directory.appendingPathComponent(fileName).path)
    }
}
