import Foundation
import JetbridgeModel
import JetbridgeTestKit
import Testing

/// Record ids as the device mints them: RFC 9562 version 7, the capture time's milliseconds first (docs/PROTOCOL.md,
/// "Record ids").
@Suite struct TimeOrderedIDTests {
    @Test func theLayoutIsVersion7WithTheMillisecondsFirst() {
        var rng = SplitMix(state: 7)
        let id = UUID(timeOrdered: Date(timeIntervalSince1970: 1_795_250_000.123), using: &rng)
        let text = id.uuidString
        // The 48 bits of milliseconds are the text's first 12 hex digits.
        #expect(text.prefix(8) + text.dropFirst(9).prefix(4) == String(format: "%012llX", 1_795_250_000_123 as UInt64))
        #expect(Array(text)[14] == "7")
        #expect("89AB".contains(Array(text)[19]))
        #expect(id.timeOrderedMilliseconds == 1_795_250_000_123)
        // A time cut to whole milliseconds, as the device cuts `createdAt`, gives back its millisecond.
        for milliseconds in [1_795_250_000_001, 1_795_250_000_999, 1_700_000_000_007] as [UInt64] {
            let time = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(UUID(timeOrdered: time, using: &rng).timeOrderedMilliseconds == milliseconds)
        }
    }

    @Test func idsSortByTimeAsTheStoresSortThem() {
        var rng = SplitMix(state: 11)
        var times: [Double] = (0..<2_000).map { _ in 1_700_000_000 + Double(rng.next() % 100_000_000) / 1000 }
        times = Array(Set(times)).sorted()
        let ids = times.map { UUID(timeOrdered: Date(timeIntervalSince1970: $0), using: &rng) }
        // The stores keep an id as its 16 bytes, whose order is the upper-case text's.
        #expect(ids.map(\.uuidString) == ids.map(\.uuidString).sorted())
    }

    @Test func idsOfOneMillisecondDiffer() {
        var rng = SplitMix(state: 13)
        let time = Date(timeIntervalSince1970: 1_795_250_000)
        let ids = (0..<100_000).map { _ in UUID(timeOrdered: time, using: &rng) }
        #expect(Set(ids).count == ids.count)
        #expect(Set(ids.map(\.timeOrderedMilliseconds)) == [1_795_250_000_000])
    }

    @Test func timesOutsideTheFieldAreClampedNotACrash() {
        var rng = SplitMix(state: 17)
        let early = UUID(timeOrdered: Date(timeIntervalSince1970: -86_400), using: &rng)
        #expect(early.timeOrderedMilliseconds == 0)
        let late = UUID(timeOrdered: Date(timeIntervalSince1970: 15_927_000_000_000), using: &rng)
        #expect(late.timeOrderedMilliseconds == (1 << 48) - 1)
        let distant = UUID(timeOrdered: .distantFuture, using: &rng)
        #expect(distant.timeOrderedMilliseconds == 64_092_211_200_000)  // 4001-01-01
    }

    @Test func otherVersionsCarryNoTime() {
        var rng = SplitMix(state: 19)
        #expect(randomUUID(&rng).timeOrderedMilliseconds == nil)
        #expect(UUID(uuidString: "F432BDB8-D84F-4461-8362-AFF89F6C493E")!.timeOrderedMilliseconds == nil)
    }
}
