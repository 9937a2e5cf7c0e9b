import BenchmarkSupport
import FileQueue
import Foundation
import JetbridgeModel
import MessagePack

/// What the devices capture: each device's records (`RecordMix`, shared with the record-decode benchmark) and their
/// MessagePack bytes, made once and written into the queues of each run, and the totals the model expects.
struct Workload {
    let devices: [String]
    let flights: [FlightID]
    /// Per device, its records and their bytes, in capture order.
    let records: [[(record: Record, bytes: Data)]]
    /// Seconds spent making and encoding the records.
    let makingSeconds: Double

    init(deviceCount: Int, recordsPerDevice: Int, ids: RecordIDs) throws {
        let devices = (1...deviceCount).map { "cart-\($0)" }
        let flights = (1...max(1, deviceCount / 2)).map { try! FlightID("ZA\(100 + $0)/2026-11-21") }
        let encoder = MessagePackEncoder()
        let t0 = now()
        records = try devices.indices.map { device in
            let records = RecordMix.records(
                count: recordsPerDevice, seed: UInt64(device) &* 1_000_003, device: devices[device],
                flight: flights[device % flights.count], ids: ids)
            return try records.map { ($0, try encoder.encode($0)) }
        }
        makingSeconds = now() - t0
        self.devices = devices
        self.flights = flights
    }

    var total: Int { records.reduce(0) { $0 + $1.count } }

    var all: [(record: Record, bytes: Data)] { records.flatMap { $0 } }

    var queueBytes: Int { records.reduce(0) { $0 + $1.reduce(0) { $0 + $1.bytes.count } } }

    /// Appends device `index`'s records to the queue in `directory`, with group commits (4,096 per fdatasync).
    /// - Returns: Seconds it took.
    func fillQueue(device index: Int, at directory: URL) throws -> Double {
        let t0 = now()
        let queue = try FileQueue(directory: directory)
        let payloads = records[index].map(\.bytes)
        var offset = 0
        while offset < payloads.count {
            let end = min(offset + 4096, payloads.count)
            try queue.append(contentsOf: payloads[offset..<end])
            offset = end
        }
        return now() - t0
    }

    /// The flight report the model computes from everything generated, and the seats with orders (one receipt each).
    func expected() throws -> (report: FlightReports, orders: [Order], scans: [Scan]) {
        var orders: [Order] = []
        var scans: [Scan] = []
        for device in records {
            for (record, _) in device {
                switch record {
                case .order(let order): orders.append(order)
                case .scan(let scan): scans.append(scan)
                }
            }
        }
        let report = FlightReports(flights: try FlightReport.all(orders: orders, bags: BagState.bags(from: scans)))
        return (report, orders, scans)
    }
}
