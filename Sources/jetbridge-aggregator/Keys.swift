import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeAggregator
import SystemSupport

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the aggregator's CURVE key pair.", subcommands: [Generate.self])

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new server key pair under <home>/keys/ and print its public key.")

        @OptionGroup var global: GroundOptions

        @Flag(help: "Replace an existing key pair (every device then needs the new public key).")
        var force = false

        func run() throws {
            let home = global.aggregatorHome
            let keys = try ServerKeys.generate(in: home, force: force)
            print(keys)
        }
    }
}

struct Devices: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage the allow list of device public keys (<home>/devices.json).",
        subcommands: [Allow.self, Revoke.self, List.self])

    /// The allow list lives in the ground's home: `devices` on a home that does not exist is refused (66), the same way
    /// for `allow`, `revoke` and `list`. Such a home is almost always a command pasted without the ground's --home:
    /// `allow` would put devices.json where `serve` never looks, and `list` would show an empty list that is not the
    /// ground's.
    static func requireHome(_ home: AggregatorHome) throws {
        guard FileManager.default.fileExists(atPath: home.directory.path) else {
            throw AggregatorError(
                .noInput,
                "there is no aggregator home at \(home.directory.path); pass the ground's home with --home DIR (the one `serve` uses), or create it with `jetbridge-aggregator --home \(home.directory.path) keys generate` first"
            )
        }
    }

    struct Allow: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Admit a device with its CURVE public key.",
            discussion: "Z85 keys may start with '-': write `devices allow cart-1 -- KEY` to be safe.")

        @OptionGroup var global: GroundOptions

        @Argument(help: "The device id, e.g. cart-1.")
        var device: String

        @Argument(help: "The device's public key: 40 characters of Z85 (after `--` if it starts with '-').")
        var publicKey: String

        func run() throws {
            let home = global.aggregatorHome
            // The home first, as revoke and list check it: a missing one is exit 66 whatever the arguments.
            try Devices.requireHome(home)
            var list = try DeviceAllowlist.load(from: home.devicesFile)
            let previous = list.devices[device]
            try list.allow(device: device, publicKey: publicKey)
            try home.create()
            try list.save(to: home.devicesFile)
            // Said, not silent: a second device set up under the same id (a packaged agent.json still naming
            // cart-1) takes the first one's place on the ground.
            if let previous, previous != list.devices[device] {
                print("allowed \(device), replacing the key it had (\(previous.prefix(8))…): that key is refused from now on")
            } else {
                print("allowed \(device)")
            }
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a device from the allow list: at the reload, its new connections are refused and nothing more is stored from one already open.")

        @OptionGroup var global: GroundOptions

        @Argument(help: "The device id.")
        var device: String

        func run() throws {
            let home = global.aggregatorHome
            try Devices.requireHome(home)
            var list = try DeviceAllowlist.load(from: home.devicesFile)
            guard list.revoke(device: device) else {
                throw AggregatorError(.dataError, "device '\(device)' is not on the allow list")
            }
            try home.secure()
            try list.save(to: home.devicesFile)
            print("revoked \(device)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the allowed devices and their keys.")

        @OptionGroup var global: GroundOptions

        func run() throws {
            try Devices.requireHome(global.aggregatorHome)
            let list = try DeviceAllowlist.load(from: global.aggregatorHome.devicesFile)
            for device in list.devices.keys.sorted() {
                print("\(device)\t\(list.devices[device]!)")
            }
        }
    }
}
