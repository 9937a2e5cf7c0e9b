internal import CZeroMQ

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Flags for a send.
public struct SendOptions: OptionSet, Sendable, Hashable {
    /// The raw flag bits.
    public let rawValue: Int32

    /// Wraps raw flag bits.
    /// - Parameter rawValue: The bits.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Do not block: if the message cannot be queued now, throw `ZeroMQError` with code `tryAgain`.
    public static let dontWait = SendOptions(rawValue: ZMQ_DONTWAIT)
}

extension Socket {
    /// Sends one frame (a copy of `data`).
    ///
    /// A send that cannot happen (non-blocking at the high-water mark, or `sendTimeout` elapsed) throws rather than
    /// returning a flag, so a message can never be dropped by ignoring a result.
    /// - Parameters:
    ///   - data: The frame's bytes.
    ///   - more: Whether more frames of the same message follow.
    ///   - options: `.dontWait` to fail with "try again" instead of blocking.
    /// - Throws: `ZeroMQError`; `isTryAgain` when it would have blocked, `isTerminated` after context shutdown.
    public func send(_ data: Data, more: Bool = false, options: SendOptions = []) throws(ZeroMQError) {
        let handle = try liveHandle("send")
        let flags = options.rawValue | (more ? ZMQ_SNDMORE : 0)
        try zmqCall("send \(data.count) bytes") {
            data.withUnsafeBytes { zmq_send(handle, $0.baseAddress, $0.count, flags) }
        }
    }

    /// Sends a multipart message: all frames are delivered together or not at all.
    /// - Parameters:
    ///   - frames: The frames, at least one.
    ///   - options: `.dontWait` to fail with "try again" instead of blocking; applies to the first frame, after
    ///     which libzmq admits the rest without blocking.
    /// - Throws: `ZeroMQError`; `isTryAgain` when it would have blocked (nothing was sent).
    public func send(_ frames: [Data], options: SendOptions = []) throws(ZeroMQError) {
        guard !frames.isEmpty else { throw ZeroMQError(code: .invalidArgument, operation: "send empty multipart") }
        for (index, frame) in frames.enumerated() {
            let isLast = index == frames.count - 1
            try send(frame, more: !isLast, options: index == 0 ? options : [])
        }
    }

    /// Sends a frame without copying it; the frame is consumed either way.
    /// - Parameters:
    ///   - message: The frame; libzmq takes its buffer.
    ///   - more: Whether more frames of the same message follow.
    ///   - options: `.dontWait` to fail with "try again" instead of blocking.
    /// - Throws: `ZeroMQError`; `isTryAgain` when it would have blocked (the frame is then closed unsent).
    public func send(_ message: consuming Message, more: Bool = false, options: SendOptions = []) throws(ZeroMQError) {
        let handle = try liveHandle("send message")
        let flags = options.rawValue | (more ? ZMQ_SNDMORE : 0)
        let pointer = message.pointer
        let count = message.count
        try zmqCall("send message of \(count) bytes") { zmq_msg_send(pointer, handle, flags) }
    }
}
