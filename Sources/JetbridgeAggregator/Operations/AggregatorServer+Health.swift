import Foundation
import JetbridgeStore
import NIOHTTP1
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

extension AggregatorServer {
    /// Why the server is not ready to take batches, or nil when it is: both sockets bound (from start until a stop
    /// begins), no store call overdue (one waiting more than 10 s: a frozen PostgreSQL server, a file system that
    /// stopped answering), the last store transaction committed (a failed one makes it unready until the next
    /// commit), and the store file and its directory writable (as the status thread last found them: see
    /// ``checkWritable()``).
    public func readiness() -> String? {
        if stoppingOrFinished { return "stopping: the sockets are closing" }
        if let overdue = store.overdue() { return overdue }
        if let problem = storeProblem.withLock({ $0 }) { return problem }
        // A check that has not come back: `access(2)` blocked on a file system that stopped answering (the status
        // thread waits in it, and its last finding would say writable for ever).
        if let started = writableCheckStarted.withLock({ $0 }) {
            let waited = ContinuousClock.now - started
            if waited > .seconds(10) {
                return "checking that the store is writable has waited \(waited.components.seconds) s (more than 10 s): its file system is not answering"
            }
        }
        return notWritable.withLock { $0 }
    }

    /// Finds whether the SQLite store and its directory are writable, for ``readiness()``. `access(2)` on a file
    /// system that stopped answering blocks: run on the status thread (every 2 s, and once before the endpoints
    /// answer), never on the metrics endpoint's one thread, where `/readyz` and every scrape asked it before.
    func checkWritable() {
        guard case .sqlite(let url) = storeLocation else { return }
        writableCheckStarted.withLock { $0 = ContinuousClock.now }
        defer { writableCheckStarted.withLock { $0 = nil } }
        let path = url.path
        var problem: String?
        for (what, file) in [("store", path), ("store's directory", (path as NSString).deletingLastPathComponent)]
        where access(file, W_OK) != 0 {
            problem = "the \(what) \(file) is not writable: \(String(cString: strerror(errno)))"
            break
        }
        notWritable.withLock { $0 = problem }
    }

    /// The Prometheus text exposition of this server's metrics, sampled now; never calls the store (it runs on the
    /// metrics server's event loop): the receipts backlog is the status thread's last reading.
    public func metricsText() -> String {
        ledger.metrics.exposition(
            queueDepth: queue.depth, acksHeld: ledger.statistics.acksHeld,
            receiptsPending: receiptsPending.withLock { $0 }, ready: readiness() == nil,
            fleet: fleet.withLock { $0 } ?? [], flightBags: flightBags?.current ?? [])
    }

    /// Answers one HTTP request on the metrics endpoint.
    func answer(_ method: HTTPMethod, _ path: String) -> MetricsServer.Response {
        guard method == .GET || method == .HEAD else {
            // RFC 9110: a 405 says which methods the resource takes.
            return .init(status: .methodNotAllowed, body: "only GET and HEAD\n", headers: [("Allow", "GET, HEAD")])
        }
        switch path {
        case "/metrics":
            return .init(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: metricsText())
        case "/healthz":
            return .init(status: .ok, body: "ok\n")
        case "/readyz":
            if let reason = readiness() { return .init(status: .serviceUnavailable, body: "not ready: \(reason)\n") }
            return .init(status: .ok, body: "ready\n")
        default:
            return .init(status: .notFound, body: "not found; this endpoint serves /metrics, /healthz and /readyz\n")
        }
    }
}
