import Foundation
@testable import JetbridgeAggregator
import JetbridgeStore
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

    /// A full disk names another temporary file at each attempt: still one failure, logged once (seen in CI, where
    /// the receipts refresh logged its full disk three times in 6 s).
    @Test func aFullDiskIsOneFailureWhateverFileItHit() {
        var failures = RepeatedFailure()
        let start = ContinuousClock.now
        let kind = failureKind(StoreError(.fileSystem, "cannot write", path: "/r/.17B.txt.1.tmp", errno: ENOSPC))
        #expect(kind == "no space left on device")
        #expect(failures.failed("no space for /r/.17B.txt.1.tmp", kind: kind, now: start) == .log)
        #expect(failures.failed("no space for /r/.17C.txt.2.tmp", kind: kind, now: start + .seconds(1)) == .quiet)
    }
}
