/// The device's greeting on the ack channel: it gives the ground the route for acks.
public struct Hello: Codable, Hashable, Sendable {
    public var v: Int
    public var type: String
    public var device: String

    public init(device: String) {
        self.v = WireProtocol.version
        self.type = Self.messageType
        self.device = device
    }

    /// The value of `type` in a hello.
    public static let messageType = "hello"
}
