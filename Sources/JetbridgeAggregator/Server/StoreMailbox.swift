import JetbridgeProtocol
import SystemSupport
import ZeroMQ

/// What the store thread tells the network thread, as typed messages: the answers to send and the queue's state. A
/// lock holds them and a pipe wakes the network thread's poll (which waits on it beside its sockets), so nothing is
/// encoded to cross between the threads and an ack is encoded once, where it is sent.
final class StoreMailbox: Sendable {
    enum Message: Sendable {
        /// Send `ack` to `owner`'s ack route.
        case ack(Ack, owner: String)
        /// Send the answer to a summary to `owner`'s ack route.
        case summary(SummaryAnswer, owner: String)
        /// Send the answer to an announcement to `owner`'s ack route.
        case announce(AnnounceAnswer, owner: String)
        /// The queue had been full and has room now: read the data socket again.
        case room
        /// The store thread has committed and answered its last batch and is gone.
        case done
    }

    private let messages = Locked<[Message]>([])
    /// Signalled with every post; the network thread polls it.
    let wakeup: WakeupPipe

    init() throws {
        wakeup = try WakeupPipe()
    }

    /// Posts `message` and wakes the network thread. Never blocks.
    func post(_ message: Message) {
        messages.withLock { $0.append(message) }
        wakeup.signal()
    }

    /// Everything posted so far, oldest first.
    func take() -> [Message] {
        wakeup.drain()
        return messages.withLock { messages in
            defer { messages.removeAll(keepingCapacity: true) }
            return messages
        }
    }
}
