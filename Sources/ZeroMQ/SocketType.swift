internal import CZeroMQ

/// The ZeroMQ messaging pattern of a socket.
public enum SocketType: Sendable, Hashable, CaseIterable {
    /// Sends to connected PULL peers, round-robin; blocks (or says "try again") at the high-water mark.
    case push
    /// Receives from PUSH peers, fair-queued.
    case pull
    /// Asynchronous request side; talks to ROUTER.
    case dealer
    /// Addresses peers by routing id: received messages start with the sender's routing id frame.
    case router
    /// Publishes to subscribers; drops messages for subscribers at the high-water mark.
    case pub
    /// Subscribes to topic prefixes from PUB peers.
    case sub
    /// Exclusive one-to-one pair.
    case pair
    /// Synchronous request side (strict send/receive alternation).
    case req
    /// Synchronous reply side (strict receive/send alternation); used by the ZAP handler.
    case rep

    var cValue: Int32 {
        switch self {
        case .push: ZMQ_PUSH
        case .pull: ZMQ_PULL
        case .dealer: ZMQ_DEALER
        case .router: ZMQ_ROUTER
        case .pub: ZMQ_PUB
        case .sub: ZMQ_SUB
        case .pair: ZMQ_PAIR
        case .req: ZMQ_REQ
        case .rep: ZMQ_REP
        }
    }
}
