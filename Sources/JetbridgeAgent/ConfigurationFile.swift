import JetbridgeModel
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The contents of `agent.json`, as written: every key optional, unknown keys refused so typos do not pass silently.
struct ConfigurationFile: Decodable {
    var device: String?
    var flight: String?
    var queue: String?
    var queueMaxBytes: Int64?
    var inventory: String?
    /// `ground` as written: one object is a list of one.
    var ground: [AgentConfiguration.Ground]?
    /// Whether `ground` was written as a list (messages then name `ground[1]`, not `ground`).
    var groundIsList = false
    var sync: AgentConfiguration.Sync?
    var retention: AgentConfiguration.Retention?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case device, flight, queue, queueMaxBytes, inventory, ground, sync, retention
    }

    init(from decoder: any Decoder) throws {
        try StrictKeys.check(decoder, known: CodingKeys.self)
        let container = try decoder.container(keyedBy: CodingKeys.self)
        device = try container.decodeIfPresent(String.self, forKey: .device)
        flight = try container.decodeIfPresent(String.self, forKey: .flight)
        queue = try container.decodeIfPresent(String.self, forKey: .queue)
        queueMaxBytes = try container.decodeIfPresent(Int64.self, forKey: .queueMaxBytes)
        inventory = try container.decodeIfPresent(String.self, forKey: .inventory)
        if container.contains(.ground), (try? container.nestedUnkeyedContainer(forKey: .ground)) != nil {
            // A list of aggregators, each the same object as the single form.
            ground = try container.decode([GroundFile].self, forKey: .ground).map(\.value)
            groundIsList = true
        } else {
            ground = try container.decodeIfPresent(GroundFile.self, forKey: .ground).map { [$0.value] }
        }
        sync = try container.decodeIfPresent(SyncFile.self, forKey: .sync)?.value
        retention = try container.decodeIfPresent(RetentionFile.self, forKey: .retention)?.value
    }

    /// Reads and decodes a configuration file.
    /// - Throws: ``AgentError``: `noInput` when unreadable, `dataError` when malformed or holding an unknown key.
    static func load(from url: URL) throws(AgentError) -> ConfigurationFile {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw AgentError(.noInput, "cannot read the configuration file \(url.path): \(fileErrorText(error))")
        }
        do {
            return try JSONDecoder().decode(ConfigurationFile.self, from: data)
        } catch let error as StrictKeys.UnknownKey {
            throw AgentError(
                .dataError,
                "\(url.path): unknown key '\(error.path)'; the keys here are \(error.known.joined(separator: ", ")) (see docs/AGENT.md)"
            )
        } catch let error as DecodingError {
            throw AgentError(.dataError, "\(url.path): \(Self.describe(error)); see docs/AGENT.md for the format")
        } catch {
            throw AgentError(.dataError, "\(url.path): \(error)")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            // `ground[1].data`, not `ground.Index 1.data`.
            keys.isEmpty
                ? ""
                : String(keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().dropFirst()) + ": "
        }
        switch error {
        case .typeMismatch(let type, let context):
            let expected =
                switch type {
                case is Double.Type: "a number"
                case is Int.Type, is Int64.Type: "a whole number"
                case is String.Type: "a string"
                default: "\(type)"
                }
            return "\(path(context.codingPath))expected \(expected)"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath))a value is required"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath))required key '\(key.stringValue)' is missing"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty {
                return "not valid JSON (\(context.underlyingError.map { "\($0)" } ?? context.debugDescription))"
            }
            return "\(path(context.codingPath))\(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

/// `ground` in `agent.json`, or one entry of a `ground` list: keys optional, defaults from
/// ``AgentConfiguration/Ground/defaults``.
private struct GroundFile: Decodable {
    var value: AgentConfiguration.Ground

    enum CodingKeys: String, CodingKey, CaseIterable { case data, acks, serverPublicKey }

    init(from decoder: any Decoder) throws {
        let index = decoder.codingPath.last?.intValue
        try StrictKeys.check(decoder, known: CodingKeys.self, prefix: index.map { "ground[\($0)]." } ?? "ground.")
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = AgentConfiguration.Ground.defaults
        value = AgentConfiguration.Ground(
            data: try container.decodeIfPresent(String.self, forKey: .data) ?? defaults.data,
            acks: try container.decodeIfPresent(String.self, forKey: .acks) ?? defaults.acks,
            serverPublicKey: try container.decodeIfPresent(String.self, forKey: .serverPublicKey))
    }
}

/// `sync` in `agent.json`: keys optional, defaults from ``AgentConfiguration/Sync/defaults``.
private struct SyncFile: Decodable {
    var value: AgentConfiguration.Sync

    enum CodingKeys: String, CodingKey, CaseIterable {
        case batchRecords, batchBytes, window, ackTimeoutSeconds, confirmDelivery
    }

    init(from decoder: any Decoder) throws {
        try StrictKeys.check(decoder, known: CodingKeys.self, prefix: "sync.")
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = AgentConfiguration.Sync.defaults
        value = AgentConfiguration.Sync(
            batchRecords: try container.decodeIfPresent(Int.self, forKey: .batchRecords) ?? defaults.batchRecords,
            batchBytes: try container.decodeIfPresent(Int.self, forKey: .batchBytes) ?? defaults.batchBytes,
            window: try container.decodeIfPresent(Int.self, forKey: .window) ?? defaults.window,
            ackTimeoutSeconds: try container.decodeIfPresent(Double.self, forKey: .ackTimeoutSeconds)
                ?? defaults.ackTimeoutSeconds)
        value.confirmDelivery =
            try container.decodeIfPresent(Bool.self, forKey: .confirmDelivery) ?? defaults.confirmDelivery
    }
}

private struct RetentionFile: Decodable {
    var value: AgentConfiguration.Retention

    enum CodingKeys: String, CodingKey, CaseIterable { case days, maxBytes }

    init(from decoder: any Decoder) throws {
        try StrictKeys.check(decoder, known: CodingKeys.self, prefix: "retention.")
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let defaults = AgentConfiguration.Retention.defaults
        value = AgentConfiguration.Retention(
            days: try container.decodeIfPresent(Double.self, forKey: .days) ?? defaults.days,
            maxBytes: try container.decodeIfPresent(Int64.self, forKey: .maxBytes) ?? defaults.maxBytes)
    }
}
