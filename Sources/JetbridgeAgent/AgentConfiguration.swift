public import Foundation
public import JetbridgeModel
import JetbridgeProtocol

/// Everything the agent's commands need to know, resolved from flags, the configuration file and defaults.
///
/// Flags override the file; the file overrides built-in defaults that work on one machine with no configuration at
/// all (see `docs/AGENT.md` for the keys and defaults).
public struct AgentConfiguration: Sendable, Hashable {
    /// Where the menu comes from.
    public enum InventorySource: Sendable, Hashable, CustomStringConvertible {
        /// A property list file.
        case file(URL)
        /// The reference menu compiled into the agent: Peanuts 200, Chips 300, Popcorn 400, USD.
        case builtIn

        public var description: String {
            switch self {
            case .file(let url): url.path
            case .builtIn: "built-in reference menu"
            }
        }
    }

    /// The ground endpoints and key, used by sync.
    public struct Ground: Sendable, Hashable, Codable {
        /// The aggregator's PULL endpoint for batches.
        public var data: String
        /// The aggregator's ROUTER endpoint for acks.
        public var acks: String
        /// The aggregator's CURVE public key, 40 characters of Z85; `nil` until configured.
        public var serverPublicKey: String?

        public init(data: String, acks: String, serverPublicKey: String?) {
            self.data = data
            self.acks = acks
            self.serverPublicKey = serverPublicKey
        }

        public static let defaults = Ground(
            data: "tcp://127.0.0.1:5560", acks: "tcp://127.0.0.1:5561", serverPublicKey: nil)
    }

    /// How sync cuts and paces batches (see PROTOCOL.md, Delivery).
    public struct Sync: Sendable, Hashable, Codable {
        /// Most records in one batch (1 … 10,000).
        public var batchRecords: Int
        /// Most bytes of records in one batch (at most 8 MiB).
        public var batchBytes: Int
        /// Most batches in flight, waiting for their ack.
        public var window: Int
        /// Seconds to wait for an ack before sending a batch again.
        public var ackTimeoutSeconds: Double

        public init(batchRecords: Int, batchBytes: Int, window: Int, ackTimeoutSeconds: Double) {
            self.batchRecords = batchRecords
            self.batchBytes = batchBytes
            self.window = window
            self.ackTimeoutSeconds = ackTimeoutSeconds
        }

        public static let defaults = Sync(batchRecords: 1000, batchBytes: 1 << 20, window: 8, ackTimeoutSeconds: 30)
    }

    /// Flag values that override the file.
    public struct Overrides: Sendable, Hashable {
        public var flight: String?
        public var device: String?

        public init(flight: String? = nil, device: String? = nil) {
            self.flight = flight
            self.device = device
        }
    }

    /// The flight used when neither a flag nor the configuration names one: the example leg of DESIGN.md.
    public static let defaultFlight = "ZA101/2026-11-21"

    /// The reference menu compiled into the agent, used when no inventory file is configured or found.
    public static let builtInInventory = Inventory(
        currency: "USD",
        items: [
            Item(name: "Peanuts", unitPrice: 200),
            Item(name: "Chips", unitPrice: 300),
            Item(name: "Popcorn", unitPrice: 400),
        ])

    public var home: AgentHome
    /// The configuration file that was read, or `nil` when only defaults and flags apply.
    public var file: URL?
    /// This device's id (1–64 of `A–Z a–z 0–9 . _ -`).
    public var device: String
    /// The current flight leg.
    public var flight: FlightID
    public var queueDirectory: URL
    /// Cap on the queue's segment bytes; appends beyond it are refused (exit 75). `nil`: the disk is the limit.
    public var queueMaxBytes: Int64?
    public var inventory: InventorySource
    public var ground: Ground
    public var sync: Sync

    public init(
        home: AgentHome, file: URL?, device: String, flight: FlightID, queueDirectory: URL, queueMaxBytes: Int64?,
        inventory: InventorySource, ground: Ground, sync: Sync
    ) {
        self.home = home
        self.file = file
        self.device = device
        self.flight = flight
        self.queueDirectory = queueDirectory
        self.queueMaxBytes = queueMaxBytes
        self.inventory = inventory
        self.ground = ground
        self.sync = sync
    }

    /// Resolves the configuration for one command.
    ///
    /// - Parameters:
    ///   - home: The agent's home.
    ///   - configFile: The `--config` path: it must exist. `nil`: `<home>/agent.json` if present, else defaults.
    ///   - overrides: Flags that override the file.
    ///   - currentDirectory: What relative paths on the command line, and `config/Inventory.plist`, are relative to.
    ///   - hostName: Source of the default device id.
    /// - Throws: ``AgentError``: `noInput` for a `--config` file that does not exist or cannot be read, `dataError` for malformed JSON, an unknown key or an invalid value.
    public static func resolve(
        home: AgentHome, configFile: String?, overrides: Overrides = Overrides(),
        currentDirectory: URL = URL(fileURLWithPath: FileManager.default.currentDirectoryPath),
        hostName: String = ProcessInfo.processInfo.hostName
    ) throws(AgentError) -> AgentConfiguration {
        let fileURL: URL?
        if let configFile {
            let url = resolvePath(configFile, against: currentDirectory)
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw AgentError(
                    .noInput,
                    "configuration file \(url.path) (from --config) does not exist; check the path, or leave out --config to use \(home.configurationFile.path) or the built-in defaults"
                )
            }
            fileURL = url
        } else if FileManager.default.fileExists(atPath: home.configurationFile.path) {
            fileURL = home.configurationFile
        } else {
            fileURL = nil
        }
        let contents = try fileURL.map { url throws(AgentError) in try ConfigurationFile.load(from: url) }
        let path = fileURL?.path ?? "defaults"

        let device = overrides.device ?? contents?.device ?? defaultDeviceID(hostName: hostName)
        do {
            try Validation.deviceID(device)
        } catch {
            throw AgentError(
                .dataError,
                "\(overrides.device != nil ? "--device" : path): \(AgentError(error).message); set \"device\" in the configuration"
            )
        }

        let flightText = overrides.flight ?? contents?.flight ?? defaultFlight
        let flight: FlightID
        do {
            flight = try FlightID(parsing: flightText)
        } catch {
            let source = overrides.flight != nil ? "--flight" : "\(path): flight"
            throw AgentError(.dataError, "\(source): \(AgentError(error).message)")
        }

        let queueDirectory =
            contents?.queue.map { resolvePath($0, against: home.url) }
            ?? home.defaultQueueDirectory
        if let cap = contents?.queueMaxBytes, cap <= 0 {
            throw AgentError(.dataError, "\(path): queueMaxBytes: \(cap) must be a positive number of bytes, or null")
        }

        let inventory: InventorySource
        if let name = contents?.inventory, let fileURL {
            inventory = .file(resolvePath(name, against: fileURL.deletingLastPathComponent()))
        } else {
            let shipped = resolvePath("config/Inventory.plist", against: currentDirectory)
            inventory = FileManager.default.fileExists(atPath: shipped.path) ? .file(shipped) : .builtIn
        }

        let ground = contents?.ground ?? .defaults
        if let key = ground.serverPublicKey, key.utf8.count != 40 {
            throw AgentError(
                .dataError,
                "\(path): ground.serverPublicKey must be 40 characters of Z85 (a 32-byte CURVE key), found \(key.utf8.count)"
            )
        }
        for (name, value) in [("ground.data", ground.data), ("ground.acks", ground.acks)] {
            if value.isEmpty {
                throw AgentError(.dataError, "\(path): \(name) must name an endpoint such as tcp://127.0.0.1:5560")
            }
            if let problem = WireProtocol.endpointProblem(value) {
                throw AgentError(.dataError, "\(path): \(name): \(problem)")
            }
        }
        let sync = contents?.sync ?? .defaults
        guard (1...10_000).contains(sync.batchRecords) else {
            throw AgentError(.dataError, "\(path): sync.batchRecords \(sync.batchRecords) must be 1–10000")
        }
        guard (1...(8 << 20)).contains(sync.batchBytes) else {
            throw AgentError(.dataError, "\(path): sync.batchBytes \(sync.batchBytes) must be 1–8388608")
        }
        guard (1...1024).contains(sync.window) else {
            throw AgentError(.dataError, "\(path): sync.window \(sync.window) must be 1–1024")
        }
        guard sync.ackTimeoutSeconds.isFinite, sync.ackTimeoutSeconds > 0 else {
            throw AgentError(.dataError, "\(path): sync.ackTimeoutSeconds must be a positive number of seconds")
        }

        return AgentConfiguration(
            home: home, file: fileURL, device: device, flight: flight, queueDirectory: queueDirectory,
            queueMaxBytes: contents?.queueMaxBytes, inventory: inventory, ground: ground, sync: sync)
    }

    /// A device id derived from the host name, stable across runs: its first label, with characters a device id
    /// cannot hold replaced by `-`, at most 64 characters; `device` when nothing is left.
    public static func defaultDeviceID(hostName: String) -> String {
        let label = hostName.split(separator: ".").first.map(String.init) ?? ""
        let cleaned = String(
            label.unicodeScalars.map { scalar -> Character in
                let ok =
                    scalar.isASCII
                    && (("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                        || scalar == "-" || scalar == "_")
                return ok ? Character(scalar) : "-"
            }
        )
        // A valid id begins with a letter or digit, and a reserved name such as `nul` gets a prefix.
        var id = String(cleaned.drop { !$0.isLetter && !$0.isNumber }.prefix(Validation.maxDeviceIDLength))
        if Validation.isReservedName(id) { id = "device-" + id }
        return id.isEmpty ? "device" : id
    }

    /// Loads the configured menu.
    /// - Throws: ``AgentError``: `noInput` for a missing file, `dataError` for an invalid one.
    public func loadInventory() throws(AgentError) -> Inventory {
        switch inventory {
        case .builtIn:
            return Self.builtInInventory
        case .file(let url):
            do {
                return try Inventory.load(from: url)
            } catch {
                var agentError = AgentError(error)
                if agentError.code == .dataError {
                    agentError.message += "; fix the menu, or point \"inventory\" in the configuration at a valid one"
                }
                throw agentError
            }
        }
    }
}
