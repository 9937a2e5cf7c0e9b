import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import JetbridgeTestKit
import Logging
import MessagePack
import Testing

/// `record` as sent by `device`: a batch may only carry its own device's records.
func owned(_ record: Record, by device: String) -> Record {
    switch record {
    case .order(var order):
        order.device = device
        return .order(order)
    case .scan(var scan):
        scan.device = device
        return .scan(scan)
    }
}

/// The batch the network layer would hand the store: records encoded as MessagePack (rewritten as `device`'s own),
/// framed as a device frames them, and checked by `IncomingBatch.decode`.
func batch(_ device: String, _ first: UInt64, _ records: [Record]) -> IncomingBatch {
    let encoder = MessagePackEncoder()
    let payloads = records.enumerated().map { offset, record in
        (sequence: first + UInt64(offset), payload: try! encoder.encode(owned(record, by: device)))
    }
    let frames = try! OutgoingBatch(device: device, records: payloads).frames()
    switch IncomingBatch.decode(frames: frames, authenticatedDevice: device) {
    case .success(let batch): return batch
    case .failure(let rejection): fatalError("test batch rejected: \(rejection)")
    }
}

/// A per-test directory and a store in it; the directory is removed when the test's `defer` calls `remove()`.
struct Fixture {
    let directory: URL
    var storePath: String { directory.appendingPathComponent(SQLiteStore.fileName).path }
    var receipts: URL { directory.appendingPathComponent("receipts") }

    init() throws {
        directory = try TemporaryDirectory.create(prefix: "JetbridgeAggregatorTests")
    }

    func open() throws -> SQLiteStore {
        try SQLiteStore(path: storePath, logger: Logger(label: "test"))
    }

    func writer() -> ReceiptWriter { ReceiptWriter(directory: receipts, logger: Logger(label: "test")) }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

// The test kit's fixed ids and dates, under the names this target's tests use.
func uuid(_ n: Int) -> UUID { JetbridgeTestKit.uuid(n) }
func date(_ seconds: Double) -> Date { JetbridgeTestKit.date(seconds) }

let flightA = try! FlightID("ZA101/2026-11-21")
let flightB = try! FlightID("ZA102/2026-11-21")
let peanuts = Item(name: "Peanuts", unitPrice: 200)
let chips = Item(name: "Chips", unitPrice: 300)
let popcorn = Item(name: "Popcorn", unitPrice: 400)

func order(
    _ n: Int, revision: Int = 1, flight: FlightID = flightA, seat: String = "17B",
    lines: [(Item, Int)] = [(peanuts, 2)], device: String = "cart-1", at seconds: Double = 0
) -> Record {
    .order(
        Order(
            id: uuid(n), revision: revision, flight: flight, seat: try! Seat(seat),
            lineItems: lines.map { LineItem(item: $0.0, count: $0.1) }, currency: "USD", createdAt: date(seconds),
            device: device))
}

func scan(
    _ n: Int, tag: Int, point: ScanPoint = .origin, flight: FlightID = flightA, owner: (String, String) = ("D", "ZMU"),
    weight: Double = 42, device: String = "ramp-1", at seconds: Double = 0
) -> Record {
    .scan(
        Scan(
            id: uuid(n),
            tag: LuggageTag(
                id: uuid(1_000_000 + tag), owner: try! Owner(initial: owner.0, family: owner.1), weight: weight),
            point: point, scannedAt: date(seconds), flight: flight, device: device))
}

func orders(_ records: [Record]) -> [Order] {
    records.compactMap { if case .order(let order) = $0 { order } else { nil } }
}

func scans(_ records: [Record]) -> [Scan] {
    records.compactMap { if case .scan(let scan) = $0 { scan } else { nil } }
}

/// Random orders (with revisions, some moving seats) and scans (several per bag, ties in time, owner conflicts)
/// over two flights.
func randomRecords(seed: UInt64, count: Int) -> [Record] {
    var rng = SplitMix(state: seed)
    var records: [Record] = []
    let items = [peanuts, chips, popcorn]
    let owners = [("D", "ZMU"), ("A", "BCD")]
    for n in 0..<count {
        let flight = Bool.random(using: &rng) ? flightA : flightB
        if Bool.random(using: &rng) {
            let id = Int.random(in: 0..<(count / 3 + 1), using: &rng)
            let seat = "\(Int.random(in: 1...4, using: &rng))\(["A", "B"].randomElement(using: &rng)!)"
            let line = (items.randomElement(using: &rng)!, Int.random(in: 1...5, using: &rng))
            records.append(
                order(
                    id, revision: Int.random(in: 1...3, using: &rng), flight: id % 2 == 0 ? flightA : flightB,
                    seat: seat, lines: [line], device: "cart-\(n % 3)", at: Double(id)))
        } else {
            records.append(
                scan(
                    1_000 + n, tag: Int.random(in: 0..<(count / 8 + 1), using: &rng),
                    point: Bool.random(using: &rng) ? .origin : .destination, flight: flight,
                    owner: owners[Int.random(in: 0..<10, using: &rng) == 0 ? 1 : 0],
                    weight: Double(Int.random(in: 0...50_000, using: &rng)) / 1000, device: "ramp-\(n % 3)",
                    at: Double(Int.random(in: 0..<20, using: &rng))))
        }
    }
    return records
}
