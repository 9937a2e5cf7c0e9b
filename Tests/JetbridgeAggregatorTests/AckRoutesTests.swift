import Foundation
import Testing

@testable import JetbridgeAggregator
import JetbridgeStore

/// The held-ack bookkeeping on its own (issue 17: an ack for a connected device is never dropped for want of a route).
@Suite("AckRoutes")
struct AckRoutesTests {
    @Test func anAckWaitsOutACutLinkAndLeavesWithTheRoute() {
        var routes = AckRoutes()
        let start = ContinuousClock.now
        let dropped = routes.hold(Data("ack".utf8), for: "cart-1", now: start)
        #expect(dropped == 0)
        // A 30 s cut plus the reconnect: still held.
        let early = routes.expire(now: start + .seconds(35))
        #expect(early == 0)
        #expect(routes.heldCount == 1)
        let learned = routes.learn(device: "cart-1", route: Data(repeating: 7, count: 17))
        #expect(learned)
        #expect(routes.firstHeld(for: "cart-1")?.payload == Data("ack".utf8))
        // Bounded in time all the same.
        let late = routes.expire(now: start + .seconds(61))
        #expect(late == 1)
        #expect(routes.heldCount == 0)
    }

    @Test func heldAcksAreBoundedPerDevice() {
        var routes = AckRoutes()
        var dropped = 0
        for index in 0..<(AckRoutes.maxHeldPerDevice + 10) {
            dropped += routes.hold(Data("\(index)".utf8), for: "cart-1", now: .now)
        }
        #expect(dropped == 10)
        #expect(routes.heldCount == AckRoutes.maxHeldPerDevice)
        #expect(routes.firstHeld(for: "cart-1")?.payload == Data("10".utf8))
    }

    @Test func routesAreBoundedAlsoWhenEveryHelloIsBelieved() {
        var routes = AckRoutes()
        for index in 0..<(AckRoutes.maxRoutes + 100) {
            _ = routes.learn(device: "d\(index)", route: Data("route-\(index)-0123456789".utf8))
        }
        #expect(routes.routes.count == AckRoutes.maxRoutes)
        // A device that has a route keeps getting it updated.
        let moved = routes.learn(device: "d0", route: Data("another-route-0123456789".utf8))
        #expect(moved)
    }
}
