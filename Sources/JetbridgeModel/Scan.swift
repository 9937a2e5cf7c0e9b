#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Where a bag was scanned: at the origin (it departed) or at the destination (it arrived).
public enum ScanPoint: String, Codable, Hashable, Sendable, CaseIterable {
    case origin
    case destination

    /// Accepts `origin` or `destination` in any case, as typed on a command line.
    /// - Throws: ``ValidationError`` with code `invalidScanPoint`.
    public init(parsing text: String) throws {
        guard let point = ScanPoint(rawValue: text.lowercased()) else {
            throw ValidationError(
                .invalidScanPoint, "scan point '\(Validation.visible(text.prefix(80)))' is unknown; use origin or destination",
                path: "point")
        }
        self = point
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let point = ScanPoint(rawValue: text) else {
            throw ValidationError(
                .invalidScanPoint, "scan point '\(Validation.visible(text.prefix(80)))' is unknown; use origin or destination"
            )
            .decodingError(at: decoder.codingPath)
        }
        self = point
    }
}

/// One scan of one bag's tag by one device.
///
/// Encoded as docs/PROTOCOL.md's scan record, keys in this order: `type` (`"scan"`), `id` (the scan's own id, the dedupe
/// key), `tag` `{id, owner, weight}`, `point`, `scannedAt`, `flight`, `device`.
public struct Scan: Codable, Hashable, Sendable {
    /// The record type tag written first in every scan record.
    public static let recordType = "scan"

    public var id: UUID
    public var tag: LuggageTag
    public var point: ScanPoint
    public var scannedAt: Date
    public var flight: FlightID
    public var device: String

    /// Builds a scan without checking it; call ``validate()`` for input that did not come from ``LuggageTag/parse(qrPayload:)``.
    public init(
        id: UUID = UUID(), tag: LuggageTag, point: ScanPoint, scannedAt: Date = Date(), flight: FlightID, device: String
    ) {
        self.id = id
        self.tag = tag
        self.point = point
        self.scannedAt = scannedAt
        self.flight = flight
        self.device = device
    }

    public static let example = Scan(
        id: UUID(uuidString: "9B2E7C1A-0D4F-4E8B-A6C3-5F1D2E3A4B5C")!, tag: .example, point: .origin,
        scannedAt: Date(timeIntervalSince1970: 1_795_246_400), flight: .example, device: "ramp-1")

    /// Checks the tag's weight, the device id and the scan time.
    /// - Throws: ``ValidationError``.
    public func validate() throws {
        try tag.validate(path: "tag")
        try scannedAt.validate(path: "scannedAt")
        try Validation.deviceID(device)
    }

    enum CodingKeys: String, CodingKey {
        case type, id, tag, point, scannedAt, flight, device
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try container.checkRecordType(Self.recordType, forKey: .type)
        id = try container.decodeUUID(forKey: .id)
        tag = try container.decode(LuggageTag.self, forKey: .tag)
        point = try container.decode(ScanPoint.self, forKey: .point)
        scannedAt = try container.decode(Date.self, forKey: .scannedAt)
        flight = try container.decode(FlightID.self, forKey: .flight)
        device = try container.decode(String.self, forKey: .device)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(Self.recordType, forKey: .type)
        try container.encode(id, forKey: .id)
        try container.encode(tag, forKey: .tag)
        try container.encode(point, forKey: .point)
        try container.encode(scannedAt, forKey: .scannedAt)
        try container.encode(flight, forKey: .flight)
        try container.encode(device, forKey: .device)
    }
}
