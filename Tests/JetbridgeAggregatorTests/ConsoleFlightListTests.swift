import Foundation
import JetbridgeModel
import SystemSupport
import Testing

@testable import JetbridgeAggregator
@testable import JetbridgeStore

/// The board's kept list of flights (``ConsoleFlightList``): read for every answer while short, kept for twenty times
/// its read once long, and answered as kept while another answer reads it again (if under a minute old).
@Suite("Console: the board's list of flights")
struct ConsoleFlightListTests {
    /// A clock the test moves, and a store whose list of flights the test sets; each read takes `readTakes`.
    final class Fixture: Sendable {
        let time = Locked(ContinuousClock.now)
        let stored: Locked<[FlightID]>
        let reads = Locked(0)
        let readTakes: Duration

        init(_ flights: [FlightID], readTakes: Duration = .milliseconds(100)) {
            stored = Locked(flights)
            self.readTakes = readTakes
        }

        func list() -> ConsoleFlightList { ConsoleFlightList { [time] in time.withLock { $0 } } }
        func advance(_ duration: Duration) { time.withLock { $0 += duration } }
        func read() -> [FlightID] {
            reads.withLock { $0 += 1 }
            advance(readTakes)
            return stored.withLock { $0 }
        }
    }

    static func flights(_ count: Int, on date: String = "2026-11-28") throws -> [FlightID] {
        try (0..<count).map { try FlightID("Z\(["A", "B", "C", "D"][$0 / 9_000])\(1_000 + $0 % 9_000)/\(date)") }
    }

    @Test func theListIsSortedLatestDateFirstThenByIdWithTodayFirstOnTheBoard() throws {
        let read = try ["ZA200/2026-11-27", "ZA100/2026-11-28", "ZA300/2026-11-29", "ZA500/2026-11-28"].map { try FlightID($0) }
        let snapshot = ConsoleFlightList.Snapshot(read, readAt: .now, took: .zero)
        #expect(snapshot.flights.map(\.rawValue) == ["ZA300/2026-11-29", "ZA100/2026-11-28", "ZA500/2026-11-28", "ZA200/2026-11-27"])
        #expect(snapshot.dates == ["2026-11-29", "2026-11-28", "2026-11-27"])
        #expect(snapshot.flights(on: "2026-11-28").map(\.rawValue) == ["ZA100/2026-11-28", "ZA500/2026-11-28"])
        #expect(snapshot.flights(on: "2026-11-30").isEmpty)
        #expect(
            snapshot.todayFirst("2026-11-28").map(\.rawValue)
                == ["ZA100/2026-11-28", "ZA500/2026-11-28", "ZA300/2026-11-29", "ZA200/2026-11-27"])
        #expect(snapshot.todayFirst("2026-12-01") == snapshot.flights)
    }

    @Test func aShortListIsReadForEveryAnswer() throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead))
        let list = store.list()
        for _ in 0..<3 { _ = try list.current(reading: store.read) }
        #expect(store.reads.withLock { $0 } == 3)
        let new = try FlightID("ZA1/2026-11-29")
        store.stored.withLock { $0.append(new) }
        #expect(try list.current(reading: store.read).flights.first == new)
    }

    @Test func aLongListIsKeptForTwentyTimesItsRead() throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead + 1), readTakes: .milliseconds(100))
        let list = store.list()
        _ = try list.current(reading: store.read)
        let new = try FlightID("ZA1/2026-11-29")
        store.stored.withLock { $0.append(new) }
        // The read took 0.1 s, so the list is kept for 2 s from its start: 1.9 s after the read ended.
        store.advance(.milliseconds(1_850))
        #expect(try list.current(reading: store.read).flights.first != new)
        #expect(store.reads.withLock { $0 } == 1)
        store.advance(.milliseconds(50))
        #expect(try list.current(reading: store.read).flights.first == new)
        #expect(store.reads.withLock { $0 } == 2)
    }

    @Test func aSlowReadIsKeptForAMinuteAtMost() throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead + 1), readTakes: .seconds(10))
        let list = store.list()
        _ = try list.current(reading: store.read)
        store.advance(.seconds(49))
        _ = try list.current(reading: store.read)
        #expect(store.reads.withLock { $0 } == 1)
        store.advance(.seconds(1))
        _ = try list.current(reading: store.read)
        #expect(store.reads.withLock { $0 } == 2)
    }

    @Test func anAnswerWhileAnotherReadsALongListGetsTheKeptList() throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead + 1))
        let list = store.list()
        let first = try list.current(reading: store.read)
        store.advance(.seconds(3))
        var during: ConsoleFlightList.Snapshot?
        let second = try list.current {
            during = try list.current(reading: store.read)
            return store.read()
        }
        #expect(store.reads.withLock { $0 } == 2)
        #expect(during?.readAt == first.readAt)
        #expect(second.readAt > first.readAt)
    }

    /// A short list is read for every answer, and a list over a minute old is not answered as it is, even while
    /// another answer reads it; of two reads at once, the one that started later is kept.
    @Test(arguments: [ConsoleFlightList.alwaysRead, ConsoleFlightList.alwaysRead + 1])
    func anAnswerWhileAnotherReadsAShortOrOldListReadsItToo(_ count: Int) throws {
        let store = Fixture(try Self.flights(count))
        let list = store.list()
        let first = try list.current(reading: store.read)
        store.advance(.seconds(60))
        var during: ConsoleFlightList.Snapshot?
        let outer = try list.current {
            store.advance(.milliseconds(10))
            during = try list.current(reading: store.read)
            return store.read()
        }
        #expect(store.reads.withLock { $0 } == 3)
        let inner = try #require(during)
        #expect(inner.readAt > outer.readAt && outer.readAt > first.readAt)
        if count > ConsoleFlightList.alwaysRead {
            #expect(try list.current(reading: store.read).readAt == inner.readAt)
        }
    }

    /// With no list kept yet, an answer waits for the read under way (the console's start-up read) rather than read
    /// it a second time beside it.
    @Test func aFirstAnswerWaitsForTheReadUnderWay() async throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead + 1))
        let list = store.list()
        let (started, release) = (Locked(false), Locked(false))
        let first = Locked<ConsoleFlightList.Snapshot?>(nil)
        let second = Locked<ConsoleFlightList.Snapshot?>(nil)
        Thread {
            let snapshot = try? list.current {
                started.withLock { $0 = true }
                while !release.withLock({ $0 }) { usleep(1_000) }
                return store.read()
            }
            first.withLock { $0 = snapshot }
        }.start()
        try await waitUntil("the first read started") { started.withLock { $0 } }
        Thread {
            let snapshot = try? list.current(reading: store.read)
            second.withLock { $0 = snapshot }
        }.start()
        try await Task.sleep(for: .milliseconds(100))
        #expect(second.withLock { $0 } == nil)
        release.withLock { $0 = true }
        try await waitUntil("both answered") { first.withLock { $0 } != nil && second.withLock { $0 } != nil }
        #expect(store.reads.withLock { $0 } == 1)
        #expect(first.withLock { $0?.readAt } == second.withLock { $0?.readAt })
    }

    /// SQLite's list joins the flights of the orders and of the scans, each sorted, without a set or a sort.
    @Test func theFlightsOfOrdersAndScansAreJoinedInOrderOnce() {
        #expect(SQLiteStore.merged([], []) == [])
        #expect(SQLiteStore.merged(["a"], []) == ["a"])
        #expect(SQLiteStore.merged([], ["a"]) == ["a"])
        #expect(SQLiteStore.merged(["a", "c", "e"], ["b", "c", "d", "f", "g"]) == ["a", "b", "c", "d", "e", "f", "g"])
        #expect(SQLiteStore.merged(["b", "c"], ["a", "b", "c"]) == ["a", "b", "c"])
        let (orders, scans) = ((0..<500).map { "ZA\(1_000 + 2 * $0)" }, (0..<500).map { "ZA\(1_000 + 3 * $0)" })
        #expect(SQLiteStore.merged(orders, scans) == Set(orders + scans).sorted())
    }

    struct Unreadable: Error {}

    @Test func aFailedReadKeepsTheListAndTheNextAnswerReadsAgain() throws {
        let store = Fixture(try Self.flights(ConsoleFlightList.alwaysRead + 1))
        let list = store.list()
        let first = try list.current(reading: store.read)
        store.advance(.seconds(60))
        #expect(throws: Unreadable.self) { try list.current { throw Unreadable() } }
        let next = try list.current(reading: store.read)
        #expect(next.readAt > first.readAt)
        #expect(store.reads.withLock { $0 } == 2)
    }
}
