import Foundation
import GRDB
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeModel
import JetbridgeProtocol
import Testing

/// `order(…)` in another currency.
func order(in currency: String, _ n: Int, flight: FlightID = flightA, revision: Int = 1) -> JetbridgeModel.Record {
    guard case .order(var order) = order(n, revision: revision, flight: flight) else { fatalError() }
    order.currency = currency
    return .order(order)
}

@Suite("Rules that need the store: an order belongs to its device, a flight sells in one currency")
struct StoreRuleTests {
    @Test func anotherDevicesRevisionIsRefusedWholeBatchAndNotStored() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-a", 1, [order(1, lines: [(peanuts, 1)])])])
        let outcomes = try store.apply([
            batch("cart-b", 1, [order(2), order(1, revision: 51, lines: [(chips, 9)])])
        ])
        let rejection = try #require(outcomes[0].rejection)
        #expect(rejection.status == .rejected)
        #expect(rejection.index == 1)
        #expect(rejection.reason.hasPrefix("record 1: id: order "))
        #expect(rejection.reason.contains("belongs to device 'cart-a'"))
        #expect(rejection.ack?.index == 1)
        #expect(outcomes[0].new == 0 && outcomes[0].duplicates == 0)
        // Nothing of the batch: A's order keeps its items, B's own new order is not stored either.
        let stored = try store.orders()
        #expect(stored.count == 1)
        #expect(stored[0].device == "cart-a")
        #expect(stored[0].revision == 1)
        #expect(stored[0].lineItems == [LineItem(item: peanuts, count: 1)])
        #expect(try store.deviceReport().devices.map(\.device) == ["cart-a"])
        // A lower revision from another device is refused too; the owner's own resend stays a duplicate.
        #expect(try store.apply([batch("cart-b", 2, [order(1, revision: 1)])])[0].rejection?.index == 0)
        let own = try store.apply([batch("cart-a", 1, [order(1, lines: [(peanuts, 1)])])])
        #expect(own == [BatchOutcome(device: "cart-a", first: 1, last: 1, new: 0, duplicates: 1)])
        // The owner may still revise it.
        #expect(try store.apply([batch("cart-a", 2, [order(1, revision: 2, lines: [(chips, 1)])])])[0].new == 1)
    }

    @Test func withinOneTransactionOnlyTheOffendingBatchIsRefused() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let outcomes = try store.apply([
            batch("cart-a", 1, [order(1), scan(10, tag: 1)]),
            batch("cart-b", 1, [scan(11, tag: 2), order(1, revision: 2, lines: [(chips, 1)])]),
            batch("cart-a", 3, [order(3), order(1, revision: 3, lines: [(popcorn, 1)])]),
        ])
        #expect(outcomes.map(\.rejection?.index) == [nil, 1, nil])
        #expect(outcomes.map(\.new) == [2, 0, 2])
        #expect(try store.orders().count == 2)
        #expect(try store.orders().first { $0.id == uuid(1) }?.lineItems == [LineItem(item: popcorn, count: 1)])
        #expect(try store.bags().count == 1)  // cart-b's scan went with its batch
        let devices = try store.deviceReport().devices
        #expect(devices.map(\.device) == ["cart-a"])
    }

    @Test func aRefusedBatchDoesNotDecideForTheBatchesAfterIt() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-a", 1, [order(1)])])  // flight A sells in USD
        // cart-b's batch would create order 5, but its second record is in EUR on flight A: it is refused, so
        // order 5 is cart-a's, created by the next batch of the same transaction.
        let outcomes = try store.apply([
            batch("cart-b", 1, [order(in: "USD", 5, flight: flightB), order(in: "EUR", 6)]),
            batch("cart-a", 2, [order(in: "USD", 5, flight: flightB)]),
        ])
        #expect(outcomes[0].rejection?.index == 1)
        #expect(outcomes[0].rejection?.reason.contains("flight ZA101/2026-11-21 sells in USD") == true)
        #expect(outcomes[1].rejection == nil)
        #expect(outcomes[1].new == 1)
        #expect(try store.orders().first { $0.id == uuid(5) }?.device == "cart-a")
    }

    @Test func aSecondCurrencyOnAFlightIsRefusedAlsoWithinOneBatch() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        let mixed = try store.apply([batch("cart-a", 1, [order(1), order(in: "EUR", 2)])])
        #expect(mixed[0].rejection?.index == 1)
        #expect(mixed[0].rejection?.reason.hasPrefix("record 1: currency: flight ZA101/2026-11-21 sells in USD") == true)
        #expect(try store.orders().isEmpty)
        // The refused batch fixed nothing: EUR may be the flight's currency after all.
        #expect(try store.apply([batch("cart-a", 1, [order(in: "EUR", 2)])])[0].new == 1)
        let later = try store.apply([batch("cart-b", 1, [order(3)]), batch("cart-b", 2, [order(in: "USD", 4, flight: flightB)])])
        #expect(later[0].rejection?.index == 0)
        #expect(later[1].new == 1)
        // A revision moving an order to a flight of another currency is refused as well.
        #expect(try store.apply([batch("cart-a", 2, [order(in: "EUR", 2, flight: flightB, revision: 2)])])[0].rejection != nil)
        #expect(try store.flightReports().flights.map(\.currency) == ["EUR", "USD"])
    }

    /// A stolen key's resend of its own stored order, naming another flight in a bogus currency: a duplicate, acked
    /// as stored, which fixed that flight's currency, so that every honest order of the flight was refused. Only a
    /// stored order fixes a currency now, also within one transaction. Run on both engines (StoreParityTests); the
    /// checks are ``checkResendNamingAnotherFlight(_:)``'s, on the test's own task.
    static func resendNamingAnotherFlight(_ store: any StoreWriter) throws -> [[BatchOutcome]] {
        var outcomes: [[BatchOutcome]] = []
        _ = try store.apply([batch("cart-a", 1, [order(in: "EUR", 1)])], at: date(0))
        outcomes.append(try store.apply([batch("cart-a", 1, [order(in: "XXX", 1, flight: flightB)])], at: date(1)))
        // The same resend first in a transaction, then an honest order of that flight in another currency.
        outcomes.append(
            try store.apply(
                [
                    batch("cart-a", 1, [order(in: "XXX", 1, flight: flightB)]),
                    batch("cart-b", 1, [order(in: "USD", 2, flight: flightB)]),
                ], at: date(2)))
        // The flight's currency is now fixed, by that stored order.
        outcomes.append(try store.apply([batch("cart-b", 2, [order(in: "XXX", 3, flight: flightB)])], at: date(3)))
        #expect(try store.flightReports(flight: nil).flights.map(\.currency) == ["EUR", "USD"])
        return outcomes
    }

    static func checkResendNamingAnotherFlight(_ outcomes: [[BatchOutcome]]) {
        #expect(outcomes.count == 3)
        guard outcomes.count == 3 else { return }
        #expect(outcomes[0].map(\.rejection) == [nil])
        #expect(outcomes[0].map(\.new) == [0] && outcomes[0].map(\.duplicates) == [1])
        #expect(outcomes[1].map(\.rejection) == [nil, nil])
        #expect(outcomes[1].map(\.new) == [0, 1])
        #expect(outcomes[2].first?.rejection?.reason.contains("sells in USD") == true)
    }

    @Test func aResendNamingAnotherFlightFixesNoCurrencyInSQLite() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        Self.checkResendNamingAnotherFlight(try Self.resendNamingAnotherFlight(try fixture.open()))
    }

    @Test func aStoreFromBeforeTheRuleTakesEachFlightsCurrencyFromItsOldestOrder() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        do {
            let store = try fixture.open()
            _ = try store.apply([batch("cart-a", 1, [order(in: "EUR", 1), order(in: "EUR", 2, flight: flightB)])])
            try store.close()
        }
        // As an earlier version left it: no flights table, and a second currency that version let in.
        try DatabaseQueue(path: fixture.storePath).write { db in
            try db.execute(sql: "DROP TABLE flights; DELETE FROM grdb_migrations WHERE identifier = 'v3'")
        }
        let store = try fixture.open()
        #expect(try store.apply([batch("cart-a", 2, [order(in: "USD", 3)])])[0].rejection?.index == 0)
        #expect(try store.apply([batch("cart-a", 2, [order(in: "EUR", 3)])])[0].new == 1)
    }

    @Test func aBatchBreakingBothRulesIsAnsweredWithItsFirstOffendingRecord() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-a", 1, [order(9)])])
        // Record 0 is cart-a's order (found while storing, in id order); record 1 is in a second currency (found
        // first, in arrival order): the ack names record 0.
        let outcome = try store.apply([batch("cart-b", 1, [order(9, revision: 2), order(in: "EUR", 1)])])[0]
        #expect(outcome.rejection?.index == 0)
        #expect(outcome.rejection?.reason.contains("belongs to device 'cart-a'") == true)
    }
}
