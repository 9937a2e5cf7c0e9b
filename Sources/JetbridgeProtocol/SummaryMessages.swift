import JetbridgeModel

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A device's question on the ack channel: "do you hold what I hold acknowledged for this flight?"
/// (docs/PROTOCOL.md, "Proof of delivery"). One frame, sent on the device's `DEALER`.
public struct FlightSummary: Codable, Hashable, Sendable {
    public var v: Int
    public var type: String
    public var device: String
    public var flight: String
    /// Elements the device holds acknowledged for the flight (``DeliverySummary/count``).
    public var count: Int
    /// ``DeliverySummary/digestBytes``: 8 bytes, most significant first.
    public var digest: Data

    public init(device: String, flight: String, summary: DeliverySummary) {
        self.v = WireProtocol.version
        self.type = Self.messageType
        self.device = device
        self.flight = flight
        self.count = summary.count
        self.digest = summary.digestBytes
    }

    /// The value of `type` in a summary.
    public static let messageType = "summary"
    /// The largest count a summary may carry: far above any flight (a device may store at most this many records per
    /// flight anyway under any sensible limit), and small enough for every client's integers.
    public static let maxCount = 1_000_000_000

    public static let example = FlightSummary(
        device: "cart-1", flight: "ZA101/2026-11-21",
        summary: {
            var summary = DeliverySummary()
            summary.add(order: UUID(uuidString: "0D5B3E0C-3C35-4B7C-9C5D-6F1E2A3B4C5D")!, revision: 1)
            return summary
        }())

    enum CodingKeys: String, CodingKey {
        case v, type, device, flight, count, digest
    }

    /// The summary the wire says, as the ground counts it.
    public var summary: DeliverySummary? {
        DeliverySummary.digest(from: digest).map { DeliverySummary(count: count, digest: $0) }
    }

    /// Reads and checks a summary from one frame whose `type` is `summary`.
    ///
    /// Checks, in order: `v`, when it is an integer, is a version this build speaks; the frame decodes as a summary
    /// (every key present, each of its type); `device` is a device id; `flight` is a flight; `count` is 0 … ``maxCount``; `digest` is 8 bytes.
    /// - Returns: The summary, or what is wrong with it in words (for the `rejected` answer).
    public static func decode(_ frame: Data) -> Result<FlightSummary, SummaryRejection> {
        let named = (try? WireCoding.decode(SummaryName.self, from: frame)) ?? SummaryName()
        func refuse(_ reason: String, _ status: SummaryAnswer.Status = .rejected) -> Result<
            FlightSummary, SummaryRejection
        > {
            .failure(SummaryRejection(device: named.device, flight: named.flight, status: status, reason: reason))
        }
        // The version first, as for a batch's header: a later version may rename or drop a key of this one, and is
        // answered `unsupported-version`, not `rejected` for the key.
        if let v = named.v, !WireProtocol.supportedVersions.contains(v) {
            return refuse(
                "summary: v \(v) is not a version this ground speaks (\(WireProtocol.supportedVersions))",
                .unsupportedVersion)
        }
        let summary: FlightSummary
        do {
            summary = try WireCoding.decode(FlightSummary.self, from: frame)
        } catch {
            return refuse("summary: \(describe(error))")
        }
        do {
            try Validation.deviceID(summary.device)
        } catch {
            return refuse("summary: \(error)")
        }
        do {
            _ = try FlightID(summary.flight)
        } catch {
            return refuse("summary: flight: \(error)")
        }
        guard (0...maxCount).contains(summary.count) else {
            return refuse("summary: count \(summary.count) is not 0…\(maxCount)")
        }
        guard summary.digest.count == 8 else {
            return refuse("summary: digest has \(summary.digest.count) bytes; it has 8")
        }
        return .success(summary)
    }

    /// A decoding error in a few words: what and where (the coding path).
    static func describe(_ error: any Error) -> String {
        let text: String
        switch error as? DecodingError {
        case .keyNotFound(let key, _): text = "\(key.stringValue): missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            text = (path.isEmpty ? "" : path + ": ") + context.debugDescription
        default: text = "\(error)"
        }
        return Ack.bounded(Validation.visible(text), scalars: 300)
    }
}

/// What a summary says of itself even when it is malformed: the device and flight it names, for the answer.
struct SummaryName: Decodable {
    var v: Int?
    var device: String?
    var flight: String?

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FlightSummary.CodingKeys.self)
        // Each key on its own: a wrong type elsewhere must not lose the name.
        v = (try? container.decodeIfPresent(Int.self, forKey: .v)) ?? nil
        device = (try? container.decodeIfPresent(String.self, forKey: .device)) ?? nil
        flight = (try? container.decodeIfPresent(String.self, forKey: .flight)) ?? nil
    }
}

/// What kind of message one frame on the ack channel is: its `type`, when it has one.
public struct AckChannelType: Decodable, Sendable {
    public var type: String?

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        type = (try? container.decodeIfPresent(String.self, forKey: .type)) ?? nil
    }

    enum Key: String, CodingKey { case type }

    /// The `type` of `frame`, or nil when it has none (an ack) or is not a map.
    public static func of(_ frame: Data) -> String? {
        (try? WireCoding.decode(AckChannelType.self, from: frame))?.type
    }
}

/// Why a summary is refused: what the `rejected`, `forbidden` or `unsupported-version` answer says.
public struct SummaryRejection: Error, Hashable, Sendable {
    /// The summary's `device` and `flight` as they came (nil when unreadable).
    public var device: String?
    public var flight: String?
    public var status: SummaryAnswer.Status
    public var reason: String

    public init(device: String?, flight: String?, status: SummaryAnswer.Status, reason: String) {
        self.device = device
        self.flight = flight
        self.status = status
        self.reason = reason
    }

    /// The answer, addressed to `owner` (the connection's device).
    public func answer(owner: String) -> SummaryAnswer {
        SummaryAnswer(
            device: owner, flight: flight.map { Ack.bounded($0, scalars: 80) } ?? "", status: status, reason: reason)
    }
}

/// The ground's answer to a ``FlightSummary``, on the ack channel: one frame (docs/PROTOCOL.md, "Proof of delivery").
public struct SummaryAnswer: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Hashable, Sendable {
        /// The ground holds exactly what the summary says: the same count and digest.
        case confirmed
        /// The ground holds something else; `count` and `digest` say what. Send the flight's records again.
        case mismatch
        /// The summary is malformed; `reason` says how.
        case rejected
        /// The summary names another device than the connection's key, or the key was revoked.
        case forbidden
        /// The ground could not answer now (store busy or failing): ask again later.
        case retry
        /// The ground does not speak the summary's `v`.
        case unsupportedVersion = "unsupported-version"

        /// Statuses a later version may add are treated as `retry`.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            self = Status(rawValue: text) ?? .retry
        }
    }

    public var v: Int
    public var type: String
    public var device: String
    public var flight: String
    public var status: Status
    /// The ground's count for the device and flight (`confirmed`, `mismatch`).
    public var count: Int?
    /// The ground's digest, 8 bytes, most significant first (`confirmed`, `mismatch`).
    public var digest: Data?
    /// What is wrong, for people (all but `confirmed`, `mismatch`).
    public var reason: String?

    public init(
        device: String, flight: String, status: Status, count: Int? = nil, digest: Data? = nil, reason: String? = nil
    ) {
        self.v = WireProtocol.version
        self.type = Self.messageType
        self.device = device
        self.flight = flight
        self.status = status
        self.count = count
        self.digest = digest
        self.reason = reason
    }

    /// The answer comparing what the device said with what the ground holds.
    public static func comparing(_ asked: FlightSummary, with held: DeliverySummary) -> SummaryAnswer {
        let same = asked.summary == held
        return SummaryAnswer(
            device: asked.device, flight: asked.flight, status: same ? .confirmed : .mismatch, count: held.count,
            digest: held.digestBytes)
    }

    /// The value of `type` in an answer.
    public static let messageType = "summary-answer"

    /// What the ground holds, as the answer says it (nil without `count` and an 8-byte `digest`).
    public var held: DeliverySummary? {
        guard let count, let digest, let value = DeliverySummary.digest(from: digest) else { return nil }
        return DeliverySummary(count: count, digest: value)
    }

    enum CodingKeys: String, CodingKey {
        case v, type, device, flight, status, count, digest, reason
    }
}
