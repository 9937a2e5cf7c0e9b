import ArgumentParser
import Foundation
import JetbridgeAgent
import JetbridgeOperations
import Logging

/// Options every subcommand shares; declared on the root command, read through `@ParentCommand`.
struct AgentOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp("Configuration file (default: <home>/agent.json if present).", valueName: "file"))
    var config: String?

    @Option(
        name: .long,
        help: ArgumentHelp("Agent home (default: $JETBRIDGE_HOME, else .jetbridge/agent).", valueName: "dir"))
    var home: String?

    /// `--log-level`, `--log-format` (and their environment variables); `main` bootstraps logging from them.
    @OptionGroup var logging: LoggingOptions

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
