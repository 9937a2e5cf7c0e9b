import JetbridgeAgent
import JetbridgeCLI
import Logging
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The agent, as the command-line scaffold knows it.
enum AgentTool: HomeTool {
    static let name = "jetbridge-agent"
    static let errorPrefix = "Error: "
    static let defaultHome = AgentHome.defaultPath
    static let configurationFileName = "agent.json"
}

/// `--config`, `--home`, `--log-level`, `--log-format`: every subcommand includes them (`@OptionGroup`).
typealias AgentOptions = GlobalOptions<AgentTool>

extension GlobalOptions where Tool == AgentTool {
    /// The resolved configuration, with a command's own flags applied.
    func resolve(_ overrides: AgentConfiguration.Overrides = .init()) throws(AgentError) -> AgentConfiguration {
        let home = AgentHome.resolve(
            flag: home, environment: ProcessInfo.processInfo.environment,
            currentDirectory: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        return try AgentConfiguration.resolve(home: home, configFile: config, overrides: overrides)
    }

    /// A capture service for this command.
    func service(_ overrides: AgentConfiguration.Overrides = .init()) throws(AgentError) -> CaptureService {
        CaptureService(configuration: try resolve(overrides), logger: Logger(label: "jetbridge-agent"))
    }
}
