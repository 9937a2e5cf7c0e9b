public import Foundation
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeStore
import SystemSupport

/// The aggregator's settings: built-in defaults that work on one machine, overridden by `aggregator.json`,
/// overridden by command-line flags.
///
/// Relative paths are relative to the aggregator's home (``AggregatorHome``). Keys are documented in
/// docs/AGGREGATOR.md; an unknown key in the file is an error that names it, so a typo never silently falls back to a
/// default.
public struct AggregatorConfiguration: Codable, Hashable, Sendable {
    /// Where the data socket (`PULL`) binds.
    public var dataEndpoint = WireProtocol.defaultDataEndpoint
    /// Where the ack socket (`ROUTER`) binds.
    public var acksEndpoint = WireProtocol.defaultAcksEndpoint
    /// The SQLite file, relative to home unless absolute.
    public var store = SQLiteStore.fileName
    /// The receipts directory, relative to home unless absolute.
    public var receipts = "receipts"
    /// Plaintext instead of CURVE: development only.
    public var insecure = false
    /// The most batches one store transaction groups.
    public var transactionMaxBatches = 64
    /// The most records one store transaction groups (a transaction may exceed it by one batch).
    public var transactionMaxRecords = 40_000
    /// How long the store thread waits for more batches before committing a transaction that is not full, once
    /// the previous group showed a backlog (after a small group it waits 2 ms at most).
    public var transactionDelayMilliseconds = 50
    /// Decoded batches waiting for the store, at most (the network thread stops reading when it is full).
    public var queueMaxBatches = 64
    /// Frame bytes of the batches waiting for the store, at most.
    public var queueMaxBytes = 32 << 20
    /// `RCVHWM` of the data socket: batches libzmq queues per connected device before TCP pushes back.
    public var receiveHighWaterMark = 4
    /// Seconds without a batch after which the store checkpoints its WAL (when something was committed since).
    public var checkpointIdleSeconds = 1.0
    /// Seconds at least between two receipt refreshes while batches flow (0: after every commit).
    public var receiptsIntervalSeconds = 2.0
    /// Seconds between statistics lines in the log.
    public var statsIntervalSeconds = 10.0
    /// `HOST:PORT` of the HTTP endpoint for `/metrics`, `/healthz` and `/readyz`; nil (the default): none.
    public var metrics: String? = nil
    /// `HOST:PORT` (or a port alone: loopback) of the operator's console; nil (the default): none.
    public var console: String? = nil

    public init() {}

    enum CodingKeys: String, CodingKey, CaseIterable {
        case dataEndpoint, acksEndpoint, store, receipts, insecure, transactionMaxBatches, transactionMaxRecords
        case transactionDelayMilliseconds, queueMaxBatches, queueMaxBytes, receiveHighWaterMark, checkpointIdleSeconds
        case statsIntervalSeconds, receiptsIntervalSeconds, metrics, console
    }

    public init(from decoder: any Decoder) throws {
        do {
            try StrictKeys.check(decoder, known: CodingKeys.self)
        } catch let unknown as StrictKeys.UnknownKey {
            // The message shows the key escaped and cut short: it comes from the file as typed.
            throw AggregatorError(.dataError, unknown.message)
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = AggregatorConfiguration()
        func value<T: Decodable>(_ key: CodingKeys, _ fallback: T) throws -> T {
            try container.decodeIfPresent(T.self, forKey: key) ?? fallback
        }
        dataEndpoint = try value(.dataEndpoint, defaults.dataEndpoint)
        acksEndpoint = try value(.acksEndpoint, defaults.acksEndpoint)
        store = try value(.store, defaults.store)
        receipts = try value(.receipts, defaults.receipts)
        insecure = try value(.insecure, defaults.insecure)
        transactionMaxBatches = try value(.transactionMaxBatches, defaults.transactionMaxBatches)
        transactionMaxRecords = try value(.transactionMaxRecords, defaults.transactionMaxRecords)
        transactionDelayMilliseconds = try value(.transactionDelayMilliseconds, defaults.transactionDelayMilliseconds)
        queueMaxBatches = try value(.queueMaxBatches, defaults.queueMaxBatches)
        queueMaxBytes = try value(.queueMaxBytes, defaults.queueMaxBytes)
        receiveHighWaterMark = try value(.receiveHighWaterMark, defaults.receiveHighWaterMark)
        checkpointIdleSeconds = try value(.checkpointIdleSeconds, defaults.checkpointIdleSeconds)
        statsIntervalSeconds = try value(.statsIntervalSeconds, defaults.statsIntervalSeconds)
        receiptsIntervalSeconds = try value(.receiptsIntervalSeconds, defaults.receiptsIntervalSeconds)
        metrics = try container.decodeIfPresent(String.self, forKey: .metrics)
        console = try container.decodeIfPresent(String.self, forKey: .console)
        try validate()
    }

    /// Checks the numbers are usable.
    /// - Throws: ``AggregatorError`` with code `.dataError` naming the key.
    public func validate() throws {
        func require(_ ok: Bool, _ key: CodingKeys, _ rule: String) throws {
            if !ok { throw AggregatorError(.dataError, "configuration key '\(key.stringValue)' \(rule)") }
        }
        try require(!dataEndpoint.isEmpty, .dataEndpoint, "must not be empty")
        try require(!acksEndpoint.isEmpty, .acksEndpoint, "must not be empty")
        for (key, endpoint) in [(CodingKeys.dataEndpoint, dataEndpoint), (.acksEndpoint, acksEndpoint)] {
            if let problem = WireProtocol.endpointProblem(endpoint) {
                try require(false, key, "is invalid: \(problem)")
            }
        }
        try require(
            dataEndpoint != acksEndpoint || dataEndpoint.hasSuffix(":*"), .acksEndpoint, "must differ from dataEndpoint"
        )
        try require(transactionMaxBatches >= 1, .transactionMaxBatches, "must be at least 1")
        try require(transactionMaxRecords >= 1, .transactionMaxRecords, "must be at least 1")
        try require(
            (0...1_000).contains(transactionDelayMilliseconds), .transactionDelayMilliseconds, "must be 0…1000")
        try require(queueMaxBatches >= 1, .queueMaxBatches, "must be at least 1")
        try require(queueMaxBytes >= 1 << 20, .queueMaxBytes, "must be at least 1 MiB")
        try require(receiveHighWaterMark >= 1, .receiveHighWaterMark, "must be at least 1")
        try require(checkpointIdleSeconds > 0, .checkpointIdleSeconds, "must be positive")
        try require(statsIntervalSeconds > 0, .statsIntervalSeconds, "must be positive")
        try require(receiptsIntervalSeconds >= 0, .receiptsIntervalSeconds, "must not be negative")
        if let metrics {
            do { _ = try MetricsServer.parse(metrics) } catch let error as AggregatorError {
                throw AggregatorError(.dataError, "configuration key 'metrics': \(error.message)")
            }
        }
        if let console {
            do { _ = try ConsoleServer.endpoint(console) } catch let error as AggregatorError {
                throw AggregatorError(.dataError, "configuration key 'console': \(error.message)")
            }
        }
    }

    /// Reads a configuration file.
    /// - Parameter url: An `aggregator.json`.
    /// - Returns: The file's settings over the defaults.
    /// - Throws: ``AggregatorError`` (`.dataError`, naming the file and the key) or (`.noInput`) when the
    ///   file cannot be read.
    public static func load(from url: URL) throws -> AggregatorConfiguration {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            // As the agent does: a file named but not readable (missing, a directory, no permission) is 66.
            throw AggregatorError(
                .noInput, "cannot read configuration file \(url.path): \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode(AggregatorConfiguration.self, from: data)
        } catch let error as AggregatorError {
            throw AggregatorError(.dataError, "\(url.path): \(error.message)")
        } catch let DecodingError.dataCorrupted(context) {
            throw AggregatorError(.dataError, "\(url.path): \(Self.describe(context))")
        } catch let DecodingError.typeMismatch(_, context) {
            throw AggregatorError(.dataError, "\(url.path): \(Self.describe(context))")
        } catch {
            throw AggregatorError(.dataError, "\(url.path): not a valid configuration: \(error)")
        }
    }

    private static func describe(_ context: DecodingError.Context) -> String {
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
    }
}
