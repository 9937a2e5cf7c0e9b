#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Any record in a queue or a batch: an order or a scan, told apart by its `type` key.
public enum Record: Codable, Hashable, Sendable {
    case order(Order)
    case scan(Scan)

    public static let example = Record.order(.example)

    /// The record's own id: the order id (shared by its revisions) or the scan id.
    public var id: UUID {
        switch self {
        case .order(let order): order.id
        case .scan(let scan): scan.id
        }
    }

    public var flight: FlightID {
        switch self {
        case .order(let order): order.flight
        case .scan(let scan): scan.flight
        }
    }

    public var device: String {
        switch self {
        case .order(let order): order.device
        case .scan(let scan): scan.device
        }
    }

    /// Runs the order's or the scan's rules.
    /// - Throws: ``ValidationError``.
    public func validate() throws {
        switch self {
        case .order(let order): try order.validate()
        case .scan(let scan): try scan.validate()
        }
    }

    private enum TypeKey: String, CodingKey {
        case type
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: TypeKey.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case Order.recordType: self = .order(try Order(from: decoder))
        case Scan.recordType: self = .scan(try Scan(from: decoder))
        default:
            throw ValidationError(
                .invalidRecordType, "unknown record type '\(Validation.visible(type.prefix(80)))'; expected 'order' or 'scan'", path: "type"
            ).decodingError(at: decoder.codingPath + [TypeKey.type])
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .order(let order): try order.encode(to: encoder)
        case .scan(let scan): try scan.encode(to: encoder)
        }
    }
}
