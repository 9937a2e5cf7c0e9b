internal import CZeroMQ

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Flags for a receive.
public struct ReceiveOptions: OptionSet, Sendable, Hashable {
    /// The raw flag bits.
    public let rawValue: Int32

    /// Wraps raw flag bits.
    /// - Parameter rawValue: The bits.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Do not block: return `nil` if nothing is waiting.
    public static let dontWait = ReceiveOptions(rawValue: ZMQ_DONTWAIT)
}

extension Socket {
    /// Receives one frame without copying.
    /// - Parameter options: `.dontWait` to return `nil` instead of blocking.
    /// - Returns: The frame (check `hasMore`), or `nil` if none arrived (non-blocking, or `receiveTimeout`).
    /// - Throws: `ZeroMQError`; `isTerminated` after context shutdown.
    public func receiveMessage(options: ReceiveOptions = []) throws(ZeroMQError) -> Message? {
        let handle = try liveHandle("receive")
        let message = Message()
        let pointer = message.pointer
        switch try zmqCallAllowingTryAgain("receive", { zmq_msg_recv(pointer, handle, options.rawValue) }) {
        case .done: return message
        case .tryAgain: return nil
        }
    }

    /// Receives one frame.
    /// - Parameter options: `.dontWait` to return `nil` instead of blocking.
    /// - Returns: The frame's bytes, or `nil` if none arrived (non-blocking, or `receiveTimeout`); whether more
    ///   frames follow is `try socket.get(.receiveMore)`.
    /// - Throws: `ZeroMQError`; `isTerminated` after context shutdown.
    public func receive(options: ReceiveOptions = []) throws(ZeroMQError) -> Data? {
        try receiveMessage(options: options)?.takeData()
    }

    /// Receives a whole multipart message.
    /// - Parameter options: `.dontWait` to return `nil` instead of blocking.
    /// - Returns: Its frames, or `nil` if none arrived (non-blocking, or `receiveTimeout`).
    /// - Throws: `ZeroMQError`; `isTerminated` after context shutdown.
    public func receiveMultipart(options: ReceiveOptions = []) throws(ZeroMQError) -> [Data]? {
        try receiveWithMetadata(options: options)?.frames
    }

    /// Receives a whole multipart message with the sender's `User-Id` (ZAP identity) and address.
    ///
    /// The metadata comes from the first frame that carries any. On a ROUTER the first frame is the routing id the
    /// socket itself prepends, which carries none; the peer's own frames after it do.
    /// - Parameter options: `.dontWait` to return `nil` instead of blocking.
    /// - Returns: The message, or `nil` if none arrived (non-blocking, or `receiveTimeout`).
    /// - Throws: `ZeroMQError`; `isTerminated` after context shutdown.
    public func receiveWithMetadata(options: ReceiveOptions = []) throws(ZeroMQError) -> ReceivedMessage? {
        guard let first = try receiveMessage(options: options) else { return nil }
        var received = ReceivedMessage(
            frames: [], userID: first.userID, peerAddress: first.peerAddress, publicKey: first.publicKey,
            sourceDescriptor: first.sourceDescriptor)
        var more = first.hasMore
        received.frames.append(first.takeData())
        while more {
            // The remaining frames of a message arrive atomically with the first, so this never waits.
            guard let next = try receiveMessage() else { break }
            more = next.hasMore
            if received.userID == nil { received.userID = next.userID }
            if received.peerAddress == nil { received.peerAddress = next.peerAddress }
            if received.publicKey == nil { received.publicKey = next.publicKey }
            if received.sourceDescriptor == nil { received.sourceDescriptor = next.sourceDescriptor }
            received.frames.append(next.takeData())
        }
        return received
    }
}
