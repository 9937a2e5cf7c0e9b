import JetbridgeModel
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Printing for people and scripts: results on standard output, problems on standard error.
enum Output {
    /// Writes whole lines to standard error, on lines of their own (SystemSupport's `StandardError`).
    static func standardError(_ text: String) {
        StandardError.write(lines: text)
    }

    /// Prints a value as JSON: sorted keys (Foundation on Linux does not keep declaration order), ISO 8601 dates.
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// `1 tag`, `2 tags`.
    static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(NumberText.grouped(number)) \(number == 1 ? singular : plural ?? singular + "s")"
    }
}
