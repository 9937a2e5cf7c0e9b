import FileQueue
public import JetbridgeProtocol

/// What a Jetbridge executable tells the command-line scaffold about itself.
public protocol CommandLineTool {
    /// The executable's name (`jetbridge-agent`).
    static var name: String { get }
    /// What starts its error lines in text logs: `Error: ` for the agent and the queue tool, `jetbridge-aggregator: `
    /// for the aggregator (docs/EXIT-CODES.md).
    static var errorPrefix: String { get }
}

/// A tool with a home directory and a configuration file in it (the agent and the aggregator).
public protocol HomeTool: CommandLineTool {
    /// The home when neither `--home` nor `$JETBRIDGE_HOME` names one, relative to the current directory.
    static var defaultHome: String { get }
    /// The configuration file's name in the home (`agent.json`).
    static var configurationFileName: String { get }
}

extension JetbridgeVersion {
    /// The local queue's on-disk format version (docs/FILEQUEUE.md).
    public static var queueFormat: UInt32 { FileQueue.formatVersion }

    /// One line, e.g. `jetbridge-agent 0.4.0 (wire protocol 1, queue format 1)`: what `--version` prints.
    /// - Parameter tool: The executable's name.
    public static func line(for tool: String) -> String {
        "\(tool) \(release) (wire protocol \(wireProtocol), queue format \(queueFormat))"
    }
}
