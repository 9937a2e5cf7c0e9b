@testable import JetbridgeAggregator
import Testing

/// A failure that repeats (a full disk) is logged once, then as a count at most every 30 s; a success after it once.
@Suite("Repeated failures")
struct RepeatedFailureTests {
    @Test("the same failure: logged first, quiet for 30 s, then a count; a different one or a success at once")
    func rateLimited() {
        var failures = RepeatedFailure()
        let start = ContinuousClock.now
        #expect(failures.succeeded() == nil)
        #expect(failures.failed("disk full", now: start) == .log)
        for second in 1..<30 { #expect(failures.failed("disk full", now: start + .seconds(second)) == .quiet) }
        #expect(failures.failed("disk full", now: start + .seconds(30)) == .summary(count: 30))
        #expect(failures.failed("disk full", now: start + .seconds(31)) == .quiet)
        #expect(failures.failed("locked", now: start + .seconds(32)) == .log)
        #expect(failures.succeeded() == 33)
        #expect(failures.succeeded() == nil)
        #expect(failures.failed("locked", now: start + .seconds(33)) == .log)
    }
}
