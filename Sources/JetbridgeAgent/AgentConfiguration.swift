public import JetbridgeModel
import JetbridgeProtocol
import ZeroMQ
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

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

    /// One aggregator's endpoints and key, used by sync (`ground` in `agent.json` is one of these, or a list).
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
            data: WireProtocol.defaultDataEndpoint, acks: WireProtocol.defaultAcksEndpoint, serverPublicKey: nil)
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
        /// Whether sync asks the ground to confirm each flight (docs/AGENT.md, "Proof of delivery"). Off only for a
        /// ground that cannot: one that predates it, or aggregators with separate stores (which no flight's summary
        /// can match).
        public var confirmDelivery = true

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

    /// The flight used when neither a flag nor the configuration names one: the example leg (docs/ARCHITECTURE.md).
    public static let defaultFlight = FlightID.example.rawValue

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
    /// The aggregators sync sends to, in the configured order: one (the single form of `ground`) or several (a list;
    /// they must share one store, docs/PROTOCOL.md "Several aggregators"). Never empty.
    public var aggregators: [Ground]
    public var sync: Sync
    /// How long and how much of what the ground acknowledged the device keeps (docs/AGENT.md, "Retention").
    public var retention = Retention.defaults

    /// Retention of acknowledged records (`delivered/`): a flight's records stay until the ground confirms the flight;
    /// confirmed ones stay up to `days` after their confirmation and while all kept records fit in `maxBytes` (the
    /// oldest confirmed go first). Unconfirmed records are never deleted: capture is refused once they alone fill
    /// `maxBytes`.
    public struct Retention: Sendable, Hashable, Codable {
        public var days: Double
        public var maxBytes: Int64

        public init(days: Double, maxBytes: Int64) {
            self.days = days
            self.maxBytes = maxBytes
        }

        public static let defaults = Retention(days: 7, maxBytes: 256 << 20)
    }

    /// The first aggregator: the only one unless `ground` is a list. Setting it makes it the only one.
    public var ground: Ground {
        get { aggregators[0] }
        set { aggregators = [newValue] }
    }

    /// Most aggregators in `ground`: each costs two sockets, two monitor threads and a share of the window, and a
    /// ground scaled out past a handful of hosts belongs behind a load balancer, not in every device's file.
    public static let maxAggregators = 16

    public init(
        home: AgentHome, file: URL?, device: String, flight: FlightID, queueDirectory: URL, queueMaxBytes: Int64?,
        inventory: InventorySource, ground: Ground, sync: Sync
    ) {
        self.init(
            home: home, file: file, device: device, flight: flight, queueDirectory: queueDirectory,
            queueMaxBytes: queueMaxBytes, inventory: inventory, aggregators: [ground], sync: sync)
    }

    /// - Parameter aggregators: At least one.
    public init(
        home: AgentHome, file: URL?, device: String, flight: FlightID, queueDirectory: URL, queueMaxBytes: Int64?,
        inventory: InventorySource, aggregators: [Ground], sync: Sync
    ) {
        precondition(!aggregators.isEmpty, "a configuration names at least one aggregator")
        self.home = home
        self.file = file
        self.device = device
        self.flight = flight
        self.queueDirectory = queueDirectory
        self.queueMaxBytes = queueMaxBytes
        self.inventory = inventory
        self.aggregators = aggregators
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
        do {
            fileURL = try HomeDirectory.configuration(
                flag: configFile.map { resolvePath($0, against: currentDirectory).path },
                homeFile: home.configurationFile.path
            ).path.map { URL(fileURLWithPath: $0) }
        } catch {
            throw AgentError(.noInput, error.description)
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

        let aggregators = contents?.ground ?? [.defaults]
        let isList = contents?.groundIsList ?? false
        guard (1...maxAggregators).contains(aggregators.count) else {
            throw AgentError(
                .dataError,
                "\(path): ground lists \(aggregators.count) aggregators; list 1 to \(maxAggregators) (or give one object)"
            )
        }
        for (index, ground) in aggregators.enumerated() {
            let prefix = isList ? "ground[\(index)]" : "ground"
            if let key = ground.serverPublicKey, Z85.curveKey(key) == nil {
                let found = key.utf8.count == 40 ? "characters outside Z85" : "\(key.utf8.count) characters"
                throw AgentError(
                    .dataError,
                    "\(path): \(prefix).serverPublicKey must be 40 characters of Z85 (a 32-byte CURVE key), found \(found)"
                )
            }
            for (name, value) in [("\(prefix).data", ground.data), ("\(prefix).acks", ground.acks)] {
                if value.isEmpty {
                    throw AgentError(.dataError, "\(path): \(name) must name an endpoint such as tcp://127.0.0.1:5560")
                }
                if let problem = WireProtocol.endpointProblem(value) {
                    throw AgentError(.dataError, "\(path): \(name): \(problem)")
                }
            }
        }
        if let problem = duplicateEndpoint(in: aggregators, names: { "ground[\($0)].\($1)" }) {
            throw AgentError(.dataError, "\(path): \(problem)")
        }
        let sync = contents?.sync ?? .defaults
        // The ground's limits (docs/PROTOCOL.md): a larger batch would be refused whole.
        guard (1...WireProtocol.maxBatchRecords).contains(sync.batchRecords) else {
            throw AgentError(
                .dataError, "\(path): sync.batchRecords \(sync.batchRecords) must be 1–\(WireProtocol.maxBatchRecords)")
        }
        guard (1...WireProtocol.maxBatchBytes).contains(sync.batchBytes) else {
            throw AgentError(
                .dataError, "\(path): sync.batchBytes \(sync.batchBytes) must be 1–\(WireProtocol.maxBatchBytes)")
        }
        guard (1...1024).contains(sync.window) else {
            throw AgentError(.dataError, "\(path): sync.window \(sync.window) must be 1–1024")
        }
        guard sync.ackTimeoutSeconds.isFinite, sync.ackTimeoutSeconds > 0 else {
            throw AgentError(.dataError, "\(path): sync.ackTimeoutSeconds must be a positive number of seconds")
        }

        let retention = contents?.retention ?? Retention.defaults
        guard retention.days.isFinite, retention.days >= 0 else {
            throw AgentError(.dataError, "\(path): retention.days must be a number of days, 0 or more")
        }
        guard retention.maxBytes > 0 else {
            throw AgentError(.dataError, "\(path): retention.maxBytes \(retention.maxBytes) must be a positive number of bytes")
        }
        var configuration = AgentConfiguration(
            home: home, file: fileURL, device: device, flight: flight, queueDirectory: queueDirectory,
            queueMaxBytes: contents?.queueMaxBytes, inventory: inventory, aggregators: aggregators, sync: sync)
        configuration.retention = retention
        return configuration
    }

    /// The aggregators sync uses: the configured ones with the sync flags laid over them **position by position** —
    /// the i-th `--to`, `--acks` and `--server-key` replace that key of the i-th configured aggregator, and flags past
    /// the configured list add aggregators (each needs both `--to` and `--acks`). With one configured aggregator and
    /// each flag at most once this is what the flags always did.
    /// - Parameters:
    ///   - data: The `--to` values, in order.
    ///   - acks: The `--acks` values, in order.
    ///   - serverKeys: The `--server-key` values, in order.
    /// - Throws: ``AgentError`` `usage`: an added aggregator without one of its endpoints, more keys than
    ///   aggregators, one endpoint twice, or more than ``maxAggregators``.
    public func aggregators(to data: [String], acks: [String], serverKeys: [String]) throws(AgentError) -> [Ground] {
        let count = max(aggregators.count, data.count, acks.count)
        guard count <= Self.maxAggregators else {
            throw AgentError(.usage, "\(count) aggregators; sync sends to at most \(Self.maxAggregators)")
        }
        guard serverKeys.count <= count else {
            throw AgentError(
                .usage,
                "--server-key given \(serverKeys.count) times for \(count) aggregator\(count == 1 ? "" : "s"); give it once per aggregator, in the order of --to (or of ground)"
            )
        }
        var result: [Ground] = []
        for index in 0..<count {
            let configured = index < aggregators.count ? aggregators[index] : nil
            guard let dataEndpoint = index < data.count ? data[index] : configured?.data,
                let ackEndpoint = index < acks.count ? acks[index] : configured?.acks
            else {
                throw AgentError(
                    .usage,
                    "aggregator \(index + 1) has no \(index < data.count ? "--acks" : "--to"): the configuration lists \(aggregators.count), so each one added on the command line needs both --to and --acks (given \(data.count) and \(acks.count) times)"
                )
            }
            result.append(
                Ground(
                    data: dataEndpoint, acks: ackEndpoint,
                    serverPublicKey: index < serverKeys.count ? serverKeys[index] : configured?.serverPublicKey))
        }
        if let problem = Self.duplicateEndpoint(
            in: result, names: { "aggregator \($0 + 1)'s \($1 == "data" ? "data (--to)" : "ack (--acks)") endpoint" })
        {
            throw AgentError(.usage, problem)
        }
        return result
    }

    /// Why a list of aggregators names one endpoint twice, or `nil`: two entries for one aggregator would only send
    /// it every batch twice, and the second pair of sockets would take over the first one's ack route.
    /// - Parameter names: How to name entry `i`'s `data` or `acks` endpoint in the message (`ground[1].data`).
    public static func duplicateEndpoint(in aggregators: [Ground], names: (Int, String) -> String) -> String? {
        var seen: [String: (index: Int, key: String)] = [:]
        for (index, ground) in aggregators.enumerated() {
            for (key, endpoint) in [("data", ground.data), ("acks", ground.acks)] {
                if let earlier = seen[endpoint] {
                    return
                        "\(names(index, key)) \(endpoint) is already \(names(earlier.index, earlier.key)); list each aggregator once, each with its own data and ack endpoints"
                }
                seen[endpoint] = (index, key)
            }
        }
        return nil
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
