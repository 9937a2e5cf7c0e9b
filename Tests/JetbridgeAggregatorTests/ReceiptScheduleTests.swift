import Foundation
import Testing

@testable import JetbridgeAggregator

/// When the receipts thread refreshes (``RefreshSchedule``): the 9t back-off spares a running sync's CPU, and no
/// longer holds a backlog back once the store is idle (issue 29: a refresh that ran during a 300-device sync had the
/// receipts catch up 201 s after the last device).
@Suite("Receipts: when a refresh runs")
struct ReceiptScheduleTests {
    let end = Date(timeIntervalSince1970: 1_000_000)

    @Test func aLongRefreshWaitsNineTimesItsLengthOnlyWhileBatchesKeepComing() {
        var schedule = RefreshSchedule(interval: 2)
        schedule.refreshed(at: end, took: 20, failed: false)
        #expect(schedule.due(storeIdle: false, deferredSince: nil) == end + 180)
        // A commit waiting since before the refresh ended waits for the back-off too.
        #expect(schedule.due(storeIdle: false, deferredSince: end - 10) == end + 180)
        // The store went idle: nothing competes for the CPU, the backlog is written after the interval.
        #expect(schedule.due(storeIdle: true, deferredSince: end - 10) == end + 2)
        #expect(schedule.due(storeIdle: true, deferredSince: nil) == end + 2)
    }

    @Test func batchesKeepComingRefreshWaitsForTheDeferralAtMost() {
        var schedule = RefreshSchedule(interval: 2)
        schedule.refreshed(at: end, took: 0.1, failed: false)
        #expect(schedule.due(storeIdle: false, deferredSince: end + 5) == end + 35)
        #expect(schedule.due(storeIdle: false, deferredSince: nil) == end + 2)
        #expect(RefreshSchedule(interval: 2).due(storeIdle: true, deferredSince: nil) == .distantPast)
    }

    @Test func aFailedRefreshWaitsNineTimesItsLengthAlsoWhenTheStoreIsIdle() {
        // A full disk fails every refresh after rendering every receipt: retrying every interval would spin.
        var schedule = RefreshSchedule(interval: 2)
        schedule.refreshed(at: end, took: 3, failed: true)
        #expect(schedule.due(storeIdle: true, deferredSince: nil) == end + 27)
        schedule.refreshed(at: end, took: 0.01, failed: true)
        #expect(schedule.due(storeIdle: true, deferredSince: nil) == end + 2)
    }
}
