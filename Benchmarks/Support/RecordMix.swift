public import Foundation
public import JetbridgeModel
public import JetbridgeTestKit

/// How a benchmark's devices mint record ids.
public enum RecordIDs: String, Sendable {
    /// Time-ordered (version 7) at the record's time, as `jetbridge-agent` mints them (docs/PROTOCOL.md, "Record ids").
    case time
    /// Random (version 4), as a client that follows only the wire format may send (and as the agent minted them
    /// before 27 November 2026).
    case random

    /// A record id for a record captured at `time`.
    public func make(at time: Date, _ rng: inout SplitMix) -> UUID {
        switch self {
        case .time: UUID(timeOrdered: time, using: &rng)
        case .random: randomUUID(&rng)
        }
    }
}

/// The sync benchmark's record mix, shared so that the record-decode benchmark decodes exactly the records a sync
/// ships: blocks of 8 — 3 orders (every 50th a correction of an earlier order, revision 2), 3 origin scans of new
/// bags, 2 destination scans (so a third of the bags go missing).
public enum RecordMix {
    /// Rows 1 to 30, seats A to F.
    public static let seats = (1...30).flatMap { row in
        ["A", "B", "C", "D", "E", "F"].map { try! Seat("\(row)\($0)") }
    }
    public static let menu = [
        Item(name: "Peanuts", unitPrice: 200), Item(name: "Chips", unitPrice: 300),
        Item(name: "Popcorn", unitPrice: 400),
    ]
    public static let families = ["ZMU", "DOE", "LEE", "KIM", "ROY"]
    /// The first record's time; record `n` of a device is `n` seconds later.
    public static let start = Date(timeIntervalSince1970: 1_795_250_000)

    /// One device's records.
    /// - Parameters:
    ///   - count: How many records.
    ///   - seed: The `SplitMix` seed; the same seed, device and flight give the same records.
    ///   - device: The device name in every record.
    ///   - flight: The flight of every record.
    ///   - ids: How the device mints record ids (bag tags' ids are random: the tag printer's, not the device's).
    /// - Returns: `count` records in capture order.
    public static func records(
        count: Int, seed: UInt64, device: String, flight: FlightID, ids: RecordIDs = .time
    ) -> [Record] {
        var rng = SplitMix(state: seed)
        var records: [Record] = []
        records.reserveCapacity(count)
        var orders: [Order] = []
        var bags: [LuggageTag] = []
        var n = 0
        while records.count < count {
            let slot = n % 8
            let time = start + Double(n)
            switch slot {
            case 0, 1, 2:
                if orders.count % 50 == 49 {
                    // Index 42 mod 50: a first revision, never corrected before.
                    var corrected = orders[orders.count - 7]
                    corrected.revision = 2
                    corrected.lineItems = [LineItem(item: menu[Int(rng.next() % 3)], count: 1)]
                    orders.append(corrected)
                    records.append(.order(corrected))
                } else {
                    let first = Int(rng.next() % 3)
                    let order = Order(
                        id: ids.make(at: time, &rng), revision: 1, flight: flight,
                        seat: seats[Int(rng.next() % UInt64(seats.count))],
                        lineItems: [
                            LineItem(item: menu[first], count: Int(rng.next() % 3) + 1),
                            LineItem(item: menu[(first + 1) % 3], count: 1),
                        ],
                        currency: "USD", createdAt: time, device: device)
                    orders.append(order)
                    records.append(.order(order))
                }
            case 3, 4, 5:
                // Weights in halves: their sums are exact in binary, whatever the order of addition.
                let tag = LuggageTag(
                    id: randomUUID(&rng),
                    owner: try! Owner(
                        initial: String(UnicodeScalar(UInt8(65 + rng.next() % 26))),
                        family: families[Int(rng.next() % UInt64(families.count))]),
                    weight: Double(rng.next() % 60) / 2 + 5)
                bags.append(tag)
                records.append(
                    .scan(
                        Scan(
                            id: ids.make(at: time, &rng), tag: tag, point: .origin, scannedAt: time, flight: flight,
                            device: device)))
            default:
                let tag = bags[bags.count - 1 - (slot - 6) * 2]
                records.append(
                    .scan(
                        Scan(
                            id: ids.make(at: time + 36_000, &rng), tag: tag, point: .destination,
                            scannedAt: time + 36_000,
                            flight: flight, device: device)))
            }
            n += 1
        }
        return records
    }
}
