import ArgumentParser
import JetbridgeCLI
import SystemSupport
import JetbridgeAgent

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// `keys`: this device's CURVE key pair.
struct KeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage this device's CURVE key pair.",
        subcommands: [GenerateKeysCommand.self])
}

/// `keys generate`: writes `<home>/keys/device.key` (0600) and `device.pub`, prints what to run on the ground.
struct GenerateKeysCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Generate this device's CURVE key pair under <home>/keys/.",
        discussion: """
            The secret key goes to <home>/keys/device.key (mode 0600), the public key to <home>/keys/device.pub. \
            Prints the public key and the command that allows it on the ground. Refuses to replace an existing \
            pair unless --force is given.
            """)

    @OptionGroup var options: AgentOptions

    @Flag(help: "Replace an existing key pair (the ground must then allow the new public key).")
    var force = false

    func run() throws {
        let configuration = try options.resolve()
        let publicKey = try DeviceKeys.generate(in: configuration.home, force: force)
        print(
            """
            public key  \(publicKey)
            secret key  \(configuration.home.secretKeyFile.path) (mode 0600)
            On the ground, allow this device with (add --home DIR for a ground home other than .jetbridge/aggregator):
              \(DeviceKeys.allowCommand(device: configuration.device, publicKeyZ85: publicKey))
            """)
    }
}
