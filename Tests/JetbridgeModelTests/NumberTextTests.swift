import Foundation
import JetbridgeModel
import Testing

/// The numbers people read in progress lines, `status` and errors: the same on every host, and as C's `printf` would
/// print them (they replaced `String(format:)`, which FoundationEssentials does not have).
@Suite struct NumberTextTests {
    @Test func oneDecimalReadsAsPrintfDoes() {
        for value in [0, 0.04, 0.06, 1, 2.96, 12.34, 99.95001, 3_600.5, 123_456.78, -1.26] {
            #expect(NumberText.oneDecimal(value) == String(format: "%.1f", value), "\(value)")
        }
        #expect(NumberText.oneDecimal(.nan) == "nan")
    }

    @Test func briefDropsTheDecimalPointOfWholeNumbers() {
        for value in [0, 5, -3, 3_600, 0.5, -0.25, 1e-3] {
            #expect(NumberText.brief(value) == String(format: "%g", value), "\(value)")
        }
        #expect(NumberText.brief(.nan) == "nan")
        #expect(NumberText.brief(-.infinity) == "-inf")
    }

    @Test func groupedPutsACommaBetweenThousands() {
        #expect(NumberText.grouped(0) == "0")
        #expect(NumberText.grouped(1_234_567) == "1,234,567")
        #expect(NumberText.grouped(-1_000) == "-1,000")
    }
}
