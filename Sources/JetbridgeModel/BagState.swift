#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Everything known about one bag on one flight, merged from all its scans.
///
/// - `departedAt`: the earliest origin scan; `arrivedAt`: the latest destination scan.
/// - `owner`, `weight`: from the newest scan by `scannedAt`; on equal times the greater scan id (compared as its
///   canonical string, which is byte order) wins, so the result never depends on arrival order.
/// - `ownerConflict`: set once any two scans disagree on the owner.
///
/// Applying scans is commutative and idempotent: any order of the same scans, with or without repeats, gives the
/// same state. A bag is keyed by flight and tag id, because a tag that travels on two legs departs and arrives on each.
public struct BagState: Codable, Hashable, Sendable {
    public var flight: FlightID
    public var tagID: UUID
    public var owner: Owner
    public var weight: Double
    public var departedAt: Date?
    public var arrivedAt: Date?
    public var ownerConflict: Bool
    /// The scan that `owner` and `weight` come from.
    public var newestScanID: UUID
    public var newestScannedAt: Date

    public init(
        flight: FlightID, tagID: UUID, owner: Owner, weight: Double, departedAt: Date?, arrivedAt: Date?,
        ownerConflict: Bool, newestScanID: UUID, newestScannedAt: Date
    ) {
        self.flight = flight
        self.tagID = tagID
        self.owner = owner
        self.weight = weight
        self.departedAt = departedAt
        self.arrivedAt = arrivedAt
        self.ownerConflict = ownerConflict
        self.newestScanID = newestScanID
        self.newestScannedAt = newestScannedAt
    }

    /// The state after a bag's first scan.
    public init(scan: Scan) {
        self.init(
            flight: scan.flight, tagID: scan.tag.id, owner: scan.tag.owner, weight: scan.tag.weight,
            departedAt: scan.point == .origin ? scan.scannedAt : nil,
            arrivedAt: scan.point == .destination ? scan.scannedAt : nil, ownerConflict: false,
            newestScanID: scan.id, newestScannedAt: scan.scannedAt)
    }

    public static let example = BagState(scan: .example)

    /// Departed but not arrived.
    public var isMissing: Bool { departedAt != nil && arrivedAt == nil }

    /// Merges one more scan of this bag.
    ///
    /// - Precondition: `scan` is of this bag on this flight (same tag id and flight); ``bags(from:)`` groups for you.
    public mutating func apply(_ scan: Scan) {
        precondition(scan.tag.id == tagID && scan.flight == flight, "scan \(scan.id) is of another bag or flight")
        switch scan.point {
        case .origin: departedAt = min(departedAt ?? scan.scannedAt, scan.scannedAt)
        case .destination: arrivedAt = max(arrivedAt ?? scan.scannedAt, scan.scannedAt)
        }
        // Flagging whenever the incoming owner differs from the current one is enough: the current owner always came
        // from some scan, so the flag ends up set exactly when two scans disagree, whatever the order.
        if scan.tag.owner != owner { ownerConflict = true }
        if Self.isNewer(scan.scannedAt, scan.id, than: newestScannedAt, newestScanID) {
            owner = scan.tag.owner
            weight = scan.tag.weight
            newestScanID = scan.id
            newestScannedAt = scan.scannedAt
        }
    }

    /// This state with one more scan merged; see ``apply(_:)``.
    public func applying(_ scan: Scan) -> BagState {
        var state = self
        state.apply(scan)
        return state
    }

    /// Merges scans into one state per bag and flight, sorted by flight, then tag id.
    public static func bags(from scans: some Sequence<Scan>) -> [BagState] {
        var states: [Key: BagState] = [:]
        for scan in scans {
            let key = Key(flight: scan.flight, tagID: scan.tag.id)
            if states[key] != nil {
                states[key]!.apply(scan)
            } else {
                states[key] = BagState(scan: scan)
            }
        }
        return states.values.sorted { ($0.flight, $0.tagID.uuidString) < ($1.flight, $1.tagID.uuidString) }
    }

    private struct Key: Hashable {
        var flight: FlightID
        var tagID: UUID
    }

    static func isNewer(_ date: Date, _ id: UUID, than otherDate: Date, _ otherID: UUID) -> Bool {
        date != otherDate ? date > otherDate : id.uuidString > otherID.uuidString
    }
}
