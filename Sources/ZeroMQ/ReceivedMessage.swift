#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A multipart message as received, with the connection metadata that matters for authorization.
public struct ReceivedMessage: Sendable, Hashable {
    /// The frames, in order (for a ROUTER, the first is the sender's routing id).
    public var frames: [Data]
    /// The identity the ZAP handler assigned to the sender (`User-Id`), or `nil` without ZAP.
    public var userID: String?
    /// The sender's IP address (`Peer-Address`), for TCP connections.
    public var peerAddress: String?
    /// The sender's CURVE public key (Z85) as a ``ZAPHandler`` admitted it, or `nil` without one.
    public var publicKey: String?
    /// The file descriptor of the connection it arrived on (``Message/sourceDescriptor``), for TCP.
    public var sourceDescriptor: Int32?

    /// Creates a received message.
    /// - Parameters:
    ///   - frames: The frames, in order.
    ///   - userID: The ZAP identity of the sender.
    ///   - peerAddress: The sender's address.
    ///   - publicKey: The sender's CURVE public key as the ZAP handler admitted it.
    ///   - sourceDescriptor: The connection's file descriptor.
    public init(
        frames: [Data], userID: String? = nil, peerAddress: String? = nil, publicKey: String? = nil,
        sourceDescriptor: Int32? = nil
    ) {
        self.frames = frames
        self.userID = userID
        self.peerAddress = peerAddress
        self.publicKey = publicKey
        self.sourceDescriptor = sourceDescriptor
    }
}
