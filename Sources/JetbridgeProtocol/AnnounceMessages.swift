import JetbridgeModel

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A device's announcement on the ack channel, sent on each connection after its hello and before its batches: the
/// flights it holds records of that the ground has not confirmed (not yet acknowledged, or acknowledged and not
/// confirmed), so the ground knows whom it still waits for (docs/PROTOCOL.md, "Announce"). One frame, on the
/// device's `DEALER`.
public struct FlightAnnounce: Codable, Hashable, Sendable {
    public var v: Int
    public var type: String
    public var device: String
    /// Flights as records name them (`ZA101/2026-11-21`), each once, at most ``maxFlights``.
    public var flights: [String]

    public init(device: String, flights: [String]) {
        self.v = WireProtocol.version
        self.type = Self.messageType
        self.device = device
        self.flights = flights
    }

    /// The value of `type` in an announcement.
    public static let messageType = "announce"
    /// The most flights one announcement may list; a device holding more sends several announcements.
    public static let maxFlights = 64

    public static let example = FlightAnnounce(device: "cart-1", flights: ["ZA101/2026-11-21", "ZA102/2026-11-21"])

    enum CodingKeys: String, CodingKey {
        case v, type, device, flights
    }

    /// Reads and checks an announcement from one frame whose `type` is `announce`.
    ///
    /// Checks, in order: `v`, when it is an integer, is a version this build speaks; the frame decodes as an
    /// announcement (every key present, each of its type); `device` is a device id; `flights` has at most ``maxFlights`` entries, each a flight, none
    /// twice.
    /// - Returns: The announcement, or what is wrong with it in words (for the `rejected` answer).
    public static func decode(_ frame: Data) -> Result<FlightAnnounce, AnnounceRejection> {
        let named = (try? WireCoding.decode(AnnounceName.self, from: frame)) ?? AnnounceName()
        func refuse(_ reason: String, _ status: AnnounceAnswer.Status = .rejected) -> Result<
            FlightAnnounce, AnnounceRejection
        > {
            .failure(AnnounceRejection(device: named.device, status: status, reason: reason))
        }
        // The version first, as for a batch's header and a summary: a later version may rename or drop a key.
        if let v = named.v, !WireProtocol.supportedVersions.contains(v) {
            return refuse(
                "announce: v \(v) is not a version this ground speaks (\(WireProtocol.supportedVersions))",
                .unsupportedVersion)
        }
        // Then the count, from the array's header alone: a hostile announce of a million flights is refused
        // before they are decoded.
        if let count = named.flightCount, count > maxFlights {
            return refuse("announce: flights: \(count) entries; at most \(maxFlights)")
        }
        let announce: FlightAnnounce
        do {
            announce = try WireCoding.decode(FlightAnnounce.self, from: frame)
        } catch {
            return refuse("announce: \(FlightSummary.describe(error))")
        }
        do {
            try Validation.deviceID(announce.device)
        } catch {
            return refuse("announce: \(error)")
        }
        guard announce.flights.count <= maxFlights else {
            return refuse("announce: flights: \(announce.flights.count) entries; at most \(maxFlights)")
        }
        var seen: Set<String> = []
        for (index, flight) in announce.flights.enumerated() {
            do {
                _ = try FlightID(flight)
            } catch {
                return refuse("announce: flights[\(index)]: \(error)")
            }
            guard seen.insert(flight).inserted else {
                return refuse("announce: flights[\(index)]: \(flight) is listed twice")
            }
        }
        return .success(announce)
    }
}

/// What an announcement says of itself even when it is malformed: the device it names and how many flights it lists.
struct AnnounceName: Decodable {
    var v: Int?
    var device: String?
    var flightCount: Int?

    init() {}

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: FlightAnnounce.CodingKeys.self)
        v = (try? container.decodeIfPresent(Int.self, forKey: .v)) ?? nil
        device = (try? container.decodeIfPresent(String.self, forKey: .device)) ?? nil
        flightCount = (try? container.decodeIfPresent(ArrayCount.self, forKey: .flights))?.count
    }

    /// An array's element count, read from its header without decoding the elements.
    struct ArrayCount: Decodable {
        var count: Int?
        init(from decoder: any Decoder) throws {
            count = (try? decoder.unkeyedContainer())?.count
        }
    }
}

/// Why an announcement is refused: what the `rejected`, `forbidden`, `retry` or `unsupported-version` answer says.
public struct AnnounceRejection: Error, Hashable, Sendable {
    /// The announcement's `device` as it came (nil when unreadable).
    public var device: String?
    public var status: AnnounceAnswer.Status
    public var reason: String

    public init(device: String?, status: AnnounceAnswer.Status, reason: String) {
        self.device = device
        self.status = status
        self.reason = reason
    }

    /// The answer, addressed to `owner` (the connection's device).
    public func answer(owner: String) -> AnnounceAnswer {
        AnnounceAnswer(device: owner, status: status, reason: reason)
    }
}

/// The ground's answer to a ``FlightAnnounce``, on the ack channel: one frame (docs/PROTOCOL.md, "Announce").
public struct AnnounceAnswer: Codable, Hashable, Sendable {
    public enum Status: String, Codable, Hashable, Sendable {
        /// The ground recorded the announcement: `flights` says how many flights.
        case recorded
        /// The announcement is malformed; `reason` says how.
        case rejected
        /// The announcement names another device than the connection's key, or the key was revoked.
        case forbidden
        /// The ground could not record it now (busy, store failing, too many announcements).
        case retry
        /// The ground does not speak the announcement's `v`.
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
    public var status: Status
    /// How many flights were recorded (`recorded`).
    public var flights: Int?
    /// What is wrong, for people (all but `recorded`).
    public var reason: String?

    public init(device: String, status: Status, flights: Int? = nil, reason: String? = nil) {
        self.v = WireProtocol.version
        self.type = Self.messageType
        self.device = device
        self.status = status
        self.flights = flights
        self.reason = reason
    }

    /// The value of `type` in an answer.
    public static let messageType = "announce-answer"

    enum CodingKeys: String, CodingKey {
        case v, type, device, status, flights, reason
    }
}
