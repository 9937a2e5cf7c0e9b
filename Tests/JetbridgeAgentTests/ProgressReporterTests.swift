import Foundation
import Synchronization
import Testing

@testable import JetbridgeAgent

@Suite("Progress bar: fits the terminal and follows a resize")
struct ProgressReporterTests {
    static let progress = SyncProgress(acknowledged: 123_456, total: 1_234_567, inFlight: 8_000, elapsed: 12)

    /// Issue 10, defect 6: in a 60-column terminal every redraw wrapped. No line may reach the last column.
    @Test(arguments: [200, 120, 80, 79, 60, 50, 40, 30, 20, 12, 8, 2, 1])
    func fitsEveryWidth(columns: Int) {
        let line = ProgressReporter.fitted(Self.progress, rate: 12_345.4, columns: columns)
        #expect(line.count <= max(columns - 1, 1), "\(line.count) characters for \(columns) columns: \(line)")
        #expect(!line.isEmpty)
        #expect(!line.contains("\n"))
    }

    @Test func keepsTheMostUsefulPartsFirst() {
        let wide = ProgressReporter.fitted(Self.progress, rate: 12_345.4, columns: 120)
        #expect(wide == ProgressReporter.bar(Self.progress, rate: 12_345.4))
        let sixty = ProgressReporter.fitted(Self.progress, rate: 12_345.4, columns: 60)
        #expect(sixty.hasPrefix("[#"))
        #expect(sixty.contains("123,456/1,234,567 acknowledged"))
        let narrow = ProgressReporter.fitted(Self.progress, rate: 12_345.4, columns: 30)
        #expect(narrow.contains("123,456/1,234,567"))
    }

    /// The width is asked at every redraw, so a resize applies to the next one.
    @Test func followsAResize() {
        let columns = Mutex(100)
        let lines = Mutex<[String]>([])
        let reporter = ProgressReporter(
            terminal: true, write: { text in lines.withLock { $0.append(text) } },
            columns: { columns.withLock { $0 } })
        reporter.report(SyncProgress(acknowledged: 1, total: 1_000_000, inFlight: 0, elapsed: 1))
        columns.withLock { $0 = 40 }
        reporter.report(SyncProgress(acknowledged: 2, total: 1_000_000, inFlight: 0, elapsed: 2))
        let drawn = lines.withLock { $0 }.map { $0.replacingOccurrences(of: "\r\u{1B}[2K", with: "") }
        #expect(drawn.count == 2)
        #expect(drawn.first.map { $0.count > 40 } == true)
        #expect(drawn.last.map { $0.count <= 39 } == true)
    }

    /// The piped line too: "0 of 1 record", not "0 of 1 records" (docs/AGENT.md promises the singular for one).
    @Test func pipedLineCountsInTheRightNumber() {
        let one = ProgressReporter.line(SyncProgress(acknowledged: 0, total: 1, inFlight: 1, elapsed: 1), rate: 0)
        #expect(one.hasPrefix("sync: 0 of 1 record acknowledged "), "\(one)")
        let two = ProgressReporter.line(SyncProgress(acknowledged: 1, total: 2, inFlight: 1, elapsed: 1), rate: 1)
        #expect(two.hasPrefix("sync: 1 of 2 records acknowledged "), "\(two)")
    }

    @Test func summaryCountsInTheRightNumber() {
        var statistics = SyncStatistics()
        statistics.recordsSent = 1
        statistics.batchesSent = 1
        statistics.acknowledged = 1
        statistics.new = 1
        statistics.duplicates = 1
        let one = SyncOutcome(ending: .drained, statistics: statistics, acknowledgedThrough: 1, remaining: 0).summary
        #expect(one.contains("sent 1 record in 1 batch ("), "\(one)")
        #expect(one.contains("1 duplicate)"), "\(one)")
        statistics.recordsSent = 2
        statistics.batchesSent = 2
        let two = SyncOutcome(ending: .drained, statistics: statistics, acknowledgedThrough: 1, remaining: 0).summary
        #expect(two.contains("sent 2 records in 2 batches ("), "\(two)")
    }
}
