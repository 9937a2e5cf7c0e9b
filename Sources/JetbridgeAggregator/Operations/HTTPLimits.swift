/// The bounds on an HTTP server's clients (``MetricsServer``; meant for any HTTP endpoint of the aggregator): how many
/// connections at once, how long each may take, how much each may hold in memory. docs/AGGREGATOR.md ("Metrics and
/// health") states the defaults; they are fixed in `serve` and smaller in tests.
///
/// Without them a slow client (slowloris: a request head sent a byte at a time, or never finished) held its socket and
/// some 100 kB forever, enough such clients took every file descriptor the process had (devices then got no ack), and
/// one connection that pipelined requests without reading the answers grew memory by every answer and kept the one
/// HTTP thread from answering anyone else.
struct HTTPLimits: Hashable, Sendable {
    /// Connections held at once. At the cap a new connection is still taken, and the one that has gone longest
    /// without progress (an answer written, or its accept) is closed to make room: a health probe on a fresh
    /// connection is answered however many slow clients hold the rest. The process's open-files limit may lower the
    /// cap (``connectionCap(openFiles:)``).
    var maxConnections = 128

    /// How long a request may take to arrive in full (its head, and a body if any): from the connection's accept for
    /// its first request, from the request's first byte for a later one. A client that sends nothing at all after
    /// connecting is closed after this time too.
    var requestTimeout: Duration = .seconds(10)

    /// How long a connection may wait with nothing to show: after its last answer for the next request to begin, or
    /// with answers it does not read (no answer written for this long).
    var idleTimeout: Duration = .seconds(60)

    /// Requests read and not yet answered on one connection. Answers wait while the connection's output is full
    /// (``maxBufferedOutputBytes``) and nothing more is read meanwhile; a client that has more than this many
    /// requests waiting (it pipelines without reading the answers) is closed.
    var maxPipelinedRequests = 32

    /// The request line and headers of one request, in bytes; a longer head is answered 400 and the connection closed.
    var maxRequestHeadBytes = 16 << 10

    /// The body of one request, in bytes, where bodies are read at all (the console's sign-in form: 4 KiB); a longer
    /// body is answered 413 and the connection closed, before more of it is read. Nil (the metrics endpoint): bodies
    /// are dropped as they arrive, unread.
    var maxRequestBodyBytes: Int? = nil

    /// Answer bytes one connection may hold in memory unsent: past it no further request is answered (and none read)
    /// until the client has read enough. The kernel's send buffer is set to this size too, so an unread connection
    /// holds about three times this much in all.
    var maxBufferedOutputBytes = 64 << 10

    /// The most bytes read from one connection at a time: what bounds the requests decoded in one go, and one
    /// connection's turn on the HTTP thread.
    static let readBytes = 4_096

    /// HTTP connections may take at most 1/8 of the process's open-files limit: the rest stays for the devices'
    /// sockets, the store and the logs.
    static let openFilesShare = 8

    /// The connection cap under an open-files limit: ``maxConnections``, or less when the limit is low, never below 1.
    /// - Parameter openFiles: The process's soft `RLIMIT_NOFILE` (`OpenFilesLimit.current`).
    func connectionCap(openFiles: Int) -> Int {
        max(1, min(maxConnections, openFiles / Self.openFilesShare))
    }
}
