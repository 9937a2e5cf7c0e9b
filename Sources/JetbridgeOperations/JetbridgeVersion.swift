import FileQueue
import JetbridgeProtocol

/// What `--version` prints on every tool: the release, and the versions of the formats it speaks. Each number has one
/// source: the release here, the wire protocol in `WireProtocol.version`, the queue format in
/// `FileQueue.formatVersion`.
public enum JetbridgeVersion {
    /// The release version of this build.
    public static let release = "0.4.0"
    /// The wire protocol version this build speaks (docs/PROTOCOL.md).
    public static var wireProtocol: Int { WireProtocol.version }
    /// The local queue's on-disk format version (docs/FILEQUEUE.md).
    public static var queueFormat: UInt32 { FileQueue.formatVersion }

    /// One line, e.g. `jetbridge-agent 0.4.0 (wire protocol 1, queue format 1)`: argument-parser prints it for
    /// `--version`.
    /// - Parameter tool: The executable's name.
    public static func line(for tool: String) -> String {
        "\(tool) \(release) (wire protocol \(wireProtocol), queue format \(queueFormat))"
    }
}
