import ZeroMQ

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the sockets' monitors say about the link to the ground: written by the monitor tasks, read by the sync loop
/// to decide when to send, when to resend, and how to explain silence.
///
/// Both channels must be up (handshake done, not disconnected since) for the link to be up: a batch sent while the
/// data channel is down would pile up in the socket, and its ack could not come back while the ack channel is down.
struct LinkState: Sendable {
    /// The two connections to the ground.
    enum Channel: Int, Sendable, CaseIterable {
        case data = 0
        case acks = 1
    }

    /// Which pair of sockets the state describes; events from sockets already closed are ignored.
    var sockets = 0
    /// Per channel: the handshake succeeded and no disconnect has come since.
    var up = [false, false]
    /// Per channel: a connect attempt failed since the last handshake (nothing answered at the endpoint).
    var unreachable = [false, false]
    /// Why the last handshake failed, in words; cleared when the link comes up.
    var failure: String?
    /// Handshake failures seen in this run.
    var failures = 0
    /// The ground ended the handshake for good (a refused key, another mechanism): libzmq does not reconnect after
    /// that, so the loop must open fresh sockets.
    var needsFreshSockets = false
    /// How many times the link came up (both channels) in this run.
    var ups = 0

    var isUp: Bool { up[0] && up[1] }

    /// Applies one monitor event of `channel` on socket pair `sockets`.
    /// - Parameter explain: Turns a handshake failure into words.
    mutating func apply(
        _ event: MonitorEvent, channel: Channel, sockets: Int, explain: (HandshakeFailure) -> String
    ) {
        guard sockets == self.sockets else { return }
        let c = channel.rawValue
        switch event {
        case .handshakeSucceeded:
            let wasUp = isUp
            up[c] = true
            unreachable[c] = false
            if isUp && !wasUp {
                ups += 1
                failure = nil
            }
        case .connected:
            unreachable[c] = false
        case .connectRetried:
            if !up[c] { unreachable[c] = true }
        case .disconnected, .closed:
            up[c] = false
        case .handshakeFailed(_, let reason):
            up[c] = false
            failures += 1
            failure = explain(reason)
            switch reason {
            case .authentication, .protocolError: needsFreshSockets = true
            case .noDetail: break
            }
        default:
            break
        }
    }
}
