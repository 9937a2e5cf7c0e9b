/// The release of this build and the wire protocol it speaks: `serve`'s status shows them, and every tool's
/// `--version` prints them with the queue format (the command-line scaffold adds that, from FileQueue). Each number
/// has one source: the release here, the wire protocol in ``WireProtocol/version``.
public enum JetbridgeVersion {
    /// The release version of this build.
    public static let release = "0.4.0"
    /// The wire protocol version this build speaks (docs/PROTOCOL.md).
    public static var wireProtocol: Int { WireProtocol.version }
}
