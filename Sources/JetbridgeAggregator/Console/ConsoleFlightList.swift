import Foundation
import JetbridgeModel
import SystemSupport

/// The board's list of every flight in the store, kept between answers.
///
/// Reading it costs an index seek per flight on each of `scans` and `orders` (``JetbridgeStore/ConsoleReading/
/// consoleFlights()``): about 0.5 s of SQLite for a year of 550 flights a day (200,000 flights), and every open board
/// asks for it every 3 s. So a list of more than ``alwaysRead`` flights is read again only once it is older than
/// ``refreshFactor`` times its last read took (at most ``longestAge``): keeping it current then costs at most a
/// twentieth of a read thread however many flights the store holds, and a new flight shows on the board within that
/// time, plus the next poll (about 10 s at 200,000 flights). A smaller list is read for every answer, as before. While
/// one answer reads a long list again, the others use the kept one (if under ``longestAge`` old).
final class ConsoleFlightList: Sendable {
    /// One read of the list, sorted the way the board shows it.
    struct Snapshot: Sendable {
        /// Every flight: latest date first, then by id.
        let flights: [FlightID]
        /// Where each date's flights are in ``flights``.
        let days: [String: Range<Int>]
        /// The dates, latest first.
        let dates: [String]
        /// When the read started, and how long it took.
        let readAt: ContinuousClock.Instant
        let took: Duration

        /// - Parameter read: Every flight, sorted by id as ``JetbridgeStore/ConsoleReading/consoleFlights()``
        ///   answers (sorted here otherwise).
        init(_ read: [FlightID], readAt: ContinuousClock.Instant, took: Duration) {
            var byDate: [String: [FlightID]] = [:]
            let sorted = zip(read, read.dropFirst()).allSatisfy { $0 < $1 }
            for flight in sorted ? read : read.sorted() { byDate[flight.date, default: []].append(flight) }
            let dates = byDate.keys.sorted(by: >)
            var flights: [FlightID] = []
            flights.reserveCapacity(read.count)
            var days: [String: Range<Int>] = [:]
            for date in dates {
                let start = flights.count
                flights += byDate[date]!
                days[date] = start..<flights.count
            }
            self.flights = flights
            self.days = days
            self.dates = dates
            self.readAt = readAt
            self.took = took
        }

        /// The flights of one date, by id.
        func flights(on date: String) -> ArraySlice<FlightID> { flights[days[date] ?? 0..<0] }

        /// Every flight, `today`'s first, then the others latest date first; each date's by id.
        func todayFirst(_ today: String) -> [FlightID] {
            guard let range = days[today], range.lowerBound > 0 else { return flights }
            return Array(flights[range] + flights[..<range.lowerBound] + flights[range.upperBound...])
        }

        /// Whether an answer at `now` reads the list again.
        func isStale(at now: ContinuousClock.Instant) -> Bool {
            guard flights.count > ConsoleFlightList.alwaysRead else { return true }
            return now - readAt >= min(took * ConsoleFlightList.refreshFactor, ConsoleFlightList.longestAge)
        }
    }

    /// Lists up to this many flights are read for every answer (a few milliseconds' read).
    static let alwaysRead = 10_000
    /// A longer list is kept for this many times its read's duration.
    static let refreshFactor = 20
    /// ... but never longer than this.
    static let longestAge: Duration = .seconds(60)

    /// The kept list, and whether (and since when) an answer is reading it again.
    private let state = Locked<(kept: Snapshot?, readingSince: ContinuousClock.Instant?)>((nil, nil))
    private let clock: @Sendable () -> ContinuousClock.Instant

    /// - Parameter clock: The time (tests move it).
    init(clock: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.clock = clock
    }

    /// The kept list, or a new read by `read` when it is stale (``Snapshot/isStale(at:)``). While another answer
    /// reads it again, a long kept list under ``longestAge`` old is answered as it is; a short or older one is read
    /// here too. With no list kept yet, an answer waits for a read under way (the console's start-up read and the
    /// first answer read it side by side before: 6.5 s for that answer at 200,000 flights on PostgreSQL, where one
    /// read takes 2.9 s). A read replaces the kept list only when it started later.
    /// - Throws: What `read` throws; the kept list stays.
    func current(reading read: () throws -> [FlightID]) throws -> Snapshot {
        enum Decision {
            case kept(Snapshot)
            case read(owner: Bool)
            case wait
        }
        while true {
            let now = clock()
            let decision = state.withLock { state -> Decision in
                if let kept = state.kept {
                    if !kept.isStale(at: now) { return .kept(kept) }
                    if state.readingSince != nil, kept.flights.count > Self.alwaysRead,
                        now - kept.readAt < Self.longestAge
                    {
                        return .kept(kept)
                    }
                } else if let since = state.readingSince, now - since < Self.longestAge {
                    return .wait
                }
                guard state.readingSince == nil else { return .read(owner: false) }
                state.readingSince = now
                return .read(owner: true)
            }
            switch decision {
            case .kept(let kept): return kept
            case .wait: usleep(10_000)
            case .read(let owner):
                defer { if owner { state.withLock { $0.readingSince = nil } } }
                let flights = try read()
                let snapshot = Snapshot(flights, readAt: now, took: clock() - now)
                state.withLock { state in
                    if state.kept.map({ $0.readAt <= now }) ?? true { state.kept = snapshot }
                }
                return snapshot
            }
        }
    }
}
