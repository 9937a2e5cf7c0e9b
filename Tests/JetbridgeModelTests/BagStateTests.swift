import Foundation
import JetbridgeModel
import Testing

@Suite struct BagStateTests {
    static let tag = LuggageTag.example
    static let otherOwner = try! Owner(initial: "A", family: "BCD")

    static func scan(
        _ n: Int, _ point: ScanPoint, at seconds: Double, owner: Owner = Owner.example, weight: Double = 42,
        tag: UUID = LuggageTag.example.id, flight: FlightID = .example
    ) -> Scan {
        Scan(
            id: uuid(n), tag: LuggageTag(id: tag, owner: owner, weight: weight), point: point,
            scannedAt: date(seconds), flight: flight, device: "ramp-\(n % 3)")
    }

    static let scans: [Scan] = [
        scan(1, .origin, at: 100, weight: 40),
        scan(2, .origin, at: 50, weight: 41),
        scan(3, .destination, at: 5000, weight: 43),
        scan(4, .destination, at: 7000, owner: otherOwner, weight: 44),
        scan(5, .origin, at: 7000, weight: 45),  // same time as 4; higher scan id wins the tie
        scan(6, .destination, at: 6000, weight: 46),
    ]

    @Test func mergeRules() throws {
        let bags = BagState.bags(from: Self.scans)
        #expect(bags.count == 1)
        let bag = try #require(bags.first)
        #expect(bag.departedAt == date(50))
        #expect(bag.arrivedAt == date(7000))
        #expect(bag.owner == Owner.example)
        #expect(bag.weight == 45)
        #expect(bag.newestScanID == uuid(5))
        #expect(bag.ownerConflict)
        #expect(!bag.isMissing)
    }

    @Test func orderIndependentAndIdempotent() {
        let expected = BagState.bags(from: Self.scans)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            var shuffled = Self.scans + Self.scans.prefix(Int.random(in: 0...6, using: &generator))
            shuffled.shuffle(using: &generator)
            #expect(BagState.bags(from: shuffled) == expected)
        }
        // Every permutation of a smaller set, and applying a duplicate changes nothing.
        let few = Array(Self.scans.prefix(4))
        for permutation in permutations(few) {
            var state = BagState(scan: permutation[0])
            for scan in permutation.dropFirst() { state.apply(scan) }
            #expect(state == BagState.bags(from: few)[0])
            for scan in few { #expect(state.applying(scan) == state) }
        }
    }

    @Test func noConflictWhenOwnersAgree() {
        let bag = BagState.bags(from: [Self.scan(1, .origin, at: 1), Self.scan(2, .origin, at: 2)])[0]
        #expect(!bag.ownerConflict)
        #expect(bag.isMissing)
        #expect(bag.arrivedAt == nil)
    }

    @Test func bagsAreKeyedByFlightAndTag() throws {
        let otherFlight = try FlightID("ZA102/2026-11-22")
        let bags = BagState.bags(from: [
            Self.scan(1, .origin, at: 1),
            Self.scan(2, .origin, at: 2, tag: uuid(99)),
            Self.scan(3, .origin, at: 3, flight: otherFlight),
        ])
        #expect(bags.count == 3)
        #expect(bags.map(\.flight) == [.example, .example, otherFlight])
        #expect(try roundTrip(bags) == bags)
    }

    func permutations<T>(_ items: [T]) -> [[T]] {
        guard items.count > 1 else { return [items] }
        return items.indices.flatMap { index -> [[T]] in
            var rest = items
            let first = rest.remove(at: index)
            return permutations(rest).map { [first] + $0 }
        }
    }
}
