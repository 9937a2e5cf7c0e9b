import Logging
import NIOCore

/// The open connections of one HTTP server, held to a cap (``HTTPLimits/connectionCap(openFiles:)``): at the cap a
/// new connection is taken and the one that has gone longest without progress is closed, so that a health probe on a
/// fresh connection is answered however many slow clients hold the rest. Refusing the new one instead would let
/// those clients lock the probes out, and a liveness probe that fails restarts the aggregator.
///
/// Used on the server's one event loop only (the accepts and every connection run there), hence `@unchecked
/// Sendable`: it is handed to that loop's child-channel initializer.
final class HTTPConnections: @unchecked Sendable {
    /// The most connections held at once.
    let cap: Int
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let what: String
    private var open: [ObjectIdentifier: HTTPConnection] = [:]
    /// The cap biting is logged once, then as a count at most every 30 s.
    private var capReached = RepeatedFailure()

    /// - Parameters:
    ///   - cap: The most connections held at once.
    ///   - eventLoop: The loop the connections run on.
    ///   - what: The endpoint in the log (`metrics endpoint`).
    ///   - logger: Where the cap biting is logged.
    init(cap: Int, eventLoop: any EventLoop, what: String, logger: Logger) {
        self.cap = cap
        self.eventLoop = eventLoop
        self.what = what
        self.logger = logger
    }

    /// Takes a new connection, closing the one idle longest when at the cap; forgets it when it closes.
    func admit(_ connection: HTTPConnection) {
        eventLoop.preconditionInEventLoop()
        if open.count >= cap, let oldest = open.values.min(by: { $0.lastProgress < $1.lastProgress }) {
            open[ObjectIdentifier(oldest)] = nil
            oldest.close()
            switch capReached.failed("cap") {
            case .log:
                logger.warning(
                    "\(what) at its connection cap: closed the connection idle longest to take a new one",
                    metadata: ["cap": "\(cap)"])
            case .summary(let count):
                logger.warning(
                    "\(what) still at its connection cap",
                    metadata: ["cap": .stringConvertible(cap), "timesSinceLastLine": .stringConvertible(count)])
            case .quiet:
                break
            }
        }
        let key = ObjectIdentifier(connection)
        open[key] = connection
        connection.channel.closeFuture.assumeIsolated().whenComplete { [self] _ in
            if open[key] === connection { open[key] = nil }
        }
    }
}
