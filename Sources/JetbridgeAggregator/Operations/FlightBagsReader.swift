import Foundation
import JetbridgeModel
import JetbridgeStore
import Logging
import SystemSupport

/// `jetbridge_flight_bags{flight, status}` (docs/AGGREGATOR.md, "Metrics and health"): each recent flight's bags by
/// status, as the console's board counts them (``ConsoleReading/consoleBagCounts(flight:)``), for the alert on bags
/// still missing after a flight's arrival.
///
/// Read on a thread of its own (``FlightBagsService``) from a store reader of its own, opened with the metrics
/// endpoint whether the console is on or not: never on the metrics endpoint's event loop (a scrape only takes the
/// last reading), never on the store, network or status threads, never through their connections. A reading covers
/// the flights dated today or yesterday (UTC): at most ``maxRead`` of them are read, today's first, and at most
/// ``maxFlights`` exported, those with missing bags first. One reading at start, then one every ``interval``: on
/// SQLite a flight's counts are kept and caught up with the scans stored since (as for the console), on PostgreSQL
/// counted from `scans (flight, tag, point)`. A reading that fails leaves the last one in place and is logged once
/// until one succeeds again.
final class FlightBagsReader: Sendable {
    /// One flight's line of the metric.
    struct Line: Hashable, Sendable {
        var flight: String
        var bags: ConsoleBagCounts
    }

    /// Flights exported at most (four series each).
    static let maxFlights = 200
    /// Flights whose counts one reading reads at most.
    static let maxRead = 400
    /// How often the counts are read again.
    static let defaultInterval: Duration = .seconds(30)

    let store: any ConsoleReading
    let interval: Duration
    private let logger: Logger
    private let lines = Locked<[Line]?>(nil)
    private let closed = Locked(false)

    /// - Parameters:
    ///   - store: A reader of its own, closed by ``close()``.
    ///   - interval: Time between two readings (tests make it short).
    ///   - logger: Where a failed reading is logged.
    init(store: any ConsoleReading, interval: Duration = FlightBagsReader.defaultInterval, logger: Logger) {
        self.store = store
        self.interval = interval
        self.logger = logger
    }

    /// The last reading (empty until the first one): what a scrape shows. Never touches the store.
    var current: [Line] { lines.withLock { $0 } ?? [] }

    /// Reads every ``interval`` until `stopped()`.
    func run(until stopped: () -> Bool) {
        var failing = false
        while !stopped() {
            do {
                let reading = try read(now: Date())
                lines.withLock { $0 = reading }
                if failing { logger.notice("flight bags: the store answers again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "flight bags: cannot read the flights' bags; /metrics keeps the last reading",
                        metadata: ["error": "\(error)"])
                }
                failing = true
            }
            let until = ContinuousClock.now + interval
            while !stopped() && ContinuousClock.now < until { Thread.sleep(forTimeInterval: 0.05) }
        }
    }

    /// One reading: the flights dated today or yesterday at `now` (UTC) that have bags, those with missing bags
    /// first, at most ``maxFlights``, in flight id order.
    func read(now: Date) throws -> [Line] {
        let today = ConsoleAPI.day(now)
        let yesterday = ConsoleAPI.day(now - 86_400)
        let recent = try store.consoleFlights().filter { $0.date == today || $0.date == yesterday }
        let candidates = recent.filter { $0.date == today } + recent.filter { $0.date == yesterday }
        var read: [Line] = []
        for flight in candidates.prefix(Self.maxRead) {
            let bags = try store.consoleBagCounts(flight: flight)
            if bags.total > 0 { read.append(Line(flight: flight.rawValue, bags: bags)) }
        }
        let chosen = read.filter { $0.bags.missing > 0 } + read.filter { $0.bags.missing == 0 }
        return chosen.prefix(Self.maxFlights).sorted { $0.flight < $1.flight }
    }

    /// Closes the reader's store, once.
    func close() {
        let first = closed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        if first { try? store.close() }
    }
}
