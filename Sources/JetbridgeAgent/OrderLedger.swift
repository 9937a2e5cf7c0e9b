import FileQueue
import JetbridgeModel
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// This device's record of the latest revision of every order it took, so that `order --amend` can raise the
/// revision even after the order's records were synced and removed from the queue.
///
/// One file per order, `<home>/orders/<UUID>.msgpack`, holding the order record (``RecordCoding``) and replaced
/// atomically. Amendments hold an exclusive lock on `<home>/orders/lock` from reading the latest revision until the
/// new one is durable in the queue, so two concurrent amendments never produce the same revision.
struct OrderLedger {
    let directory: URL
    /// How long an amendment waits for another one holding the lock.
    var lockTimeout: Double = 10

    func file(for id: UUID) -> URL {
        directory.appendingPathComponent(id.uuidString + ".msgpack")
    }

    /// Runs `body` holding the ledger lock.
    func withLock<T>(_ body: () throws(AgentError) -> T) throws(AgentError) -> T {
        try Files.makeDirectory(directory)
        let path = directory.appendingPathComponent("lock").path
        let lock: FileLock
        do {
            lock = try FileLock(path: path, waitingUpTo: .seconds(lockTimeout))
        } catch {
            switch error {
            case .busy:
                throw AgentError(
                    .tryAgain,
                    "order --amend: the lock \(path) stayed busy for \(Int(lockTimeout)) s (another jetbridge-agent is using it); try again"
                )
            case .system(let error): throw AgentError(error)
            }
        }
        defer { lock.release() }
        return try body()
    }

    /// The latest revision recorded for `id`, or `nil` when this device never took that order.
    func read(id: UUID) throws(AgentError) -> Order? {
        let url = file(for: id)
        // Only a file that is not there means "never took it": one that cannot be examined is an error, not an
        // unknown order.
        guard try Files.isPresent(url) else { return nil }
        do {
            let order = try RecordCoding.decodeOrder(Data(contentsOf: url))
            guard order.id == id else {
                throw AgentError(
                    .failure, "the ledger file \(url.path) holds order \(order.id.uuidString), not \(id.uuidString)")
            }
            return order
        } catch let error as AgentError {
            throw error
        } catch {
            throw AgentError(
                .failure,
                "the order ledger file \(url.path) is damaged (\(error)); the order's records are still in the queue or on the ground, but it cannot be amended here"
            )
        }
    }

    /// Records `order` as its id's latest revision, durably.
    func write(_ order: Order, encoded: Data) throws(AgentError) {
        try Files.makeDirectory(directory)
        try Files.writeAtomically(encoded, to: file(for: order.id))
    }

    func remove(id: UUID) throws(AgentError) {
        try Files.remove(file(for: id))
    }
}
