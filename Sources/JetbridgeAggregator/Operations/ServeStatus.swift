public import Foundation
public import JetbridgeStore
import SystemSupport

/// What a running `serve` says about itself in `<home>/status.json`, replaced atomically every
/// ``writeInterval`` and removed when it stops; `jetbridge-aggregator status` reads it, and the home's lock
/// (``HomeLock``) tells whether its writer still runs.
public struct ServeStatus: Codable, Hashable, Sendable {
    public static let fileName = "status.json"
    /// How often `serve` rewrites the file.
    public static let writeInterval: Duration = .seconds(2)

    public struct Endpoints: Codable, Hashable, Sendable {
        public var data: String
        public var acks: String
        /// `HOST:PORT` of `/metrics`, `/healthz`, `/readyz`; nil when off.
        public var metrics: String?
    }

    /// One device seen since start: its last answered batch and its counts by ack status and record outcome.
    public struct Device: Codable, Hashable, Sendable {
        public var device: String
        public var lastBatchAt: Date
        /// Batches by ack status (`stored`, `retry`, `rejected`, `forbidden`, …).
        public var batches: [String: Int] = [:]
        /// Records by outcome (`new`, `duplicate`, `rejected`).
        public var records: [String: Int] = [:]
    }

    /// A batch answered with something else than `stored`.
    public struct Rejection: Codable, Hashable, Sendable {
        public var time: Date
        public var device: String
        public var status: String
        public var reason: String
    }

    /// A handshake the ZAP handler refused.
    public struct RefusedHandshake: Codable, Hashable, Sendable {
        public var time: Date
        public var result: String
        public var publicKey: String?
        public var address: String
    }

    public var pid: Int32
    public var version: String
    public var wireProtocol: Int
    public var startedAt: Date
    public var updatedAt: Date
    /// `CURVE` or `insecure`.
    public var mode: String
    public var endpoints: Endpoints
    public var store: String
    public var receipts: String
    /// What `/readyz` would answer: nil when ready, else why not.
    public var notReady: String?
    public var batchesQueued: Int
    public var acksHeld: Int
    public var lastCommitAt: Date?
    /// Seats whose receipts are behind the store (nil when the store could not say).
    public var receiptsPending: Int?
    public var totals: ServerStatistics
    /// Devices seen since start, by id.
    public var devices: [Device]
    /// The last refused or retried batches, oldest first (at most 10).
    public var recentRejections: [Rejection]
    /// ZAP decisions since start by result (`accepted`, `refused-key`, …).
    public var handshakes: [String: Int]
    /// The last refused handshakes, oldest first (at most 10).
    public var recentRefusedHandshakes: [RefusedHandshake]
    /// Per flight announced in the last 24 hours (at most 200, the most recent), its announcing devices by state
    /// (docs/AGGREGATOR.md, "The fleet of a flight"); nil until the store could say.
    public var fleet: [FleetFlightCounts]?

    static func url(in home: AggregatorHome) -> URL { home.directory.appendingPathComponent(fileName) }

    /// Reads the status a `serve` on `home` wrote.
    /// - Returns: nil when there is no file.
    /// - Throws: ``AggregatorError`` `.failure` when the file cannot be decoded.
    public static func read(home: AggregatorHome) throws -> ServeStatus? {
        guard let data = FileManager.default.contents(atPath: url(in: home).path) else { return nil }
        do {
            return try decoder.decode(ServeStatus.self, from: data)
        } catch {
            throw AggregatorError(.failure, "cannot read \(url(in: home).path): \(error)")
        }
    }

    /// The JSON `status --json` prints and `serve` writes: sorted keys, ISO 8601 dates.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(self)
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
