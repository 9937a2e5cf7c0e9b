import Foundation

/// Printing for people and scripts: results on standard output, problems on standard error.
enum Output {
    /// Writes `Error: message` to standard error, as argument-parser does for usage errors.
    static func error(_ message: String) {
        standardError("Error: \(message)\n")
    }

    static func standardError(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }

    /// Prints a value as JSON: sorted keys (Foundation on Linux does not keep declaration order), ISO 8601 dates.
    static func json(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// `9998` as `9,998`, the same in every locale.
    static func grouped(_ number: Int) -> String {
        let digits = String(number.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (number < 0 ? "-" : "") + result
    }

    /// `1 tag`, `2 tags`.
    static func count(_ number: Int, _ singular: String, _ plural: String? = nil) -> String {
        "\(grouped(number)) \(number == 1 ? singular : plural ?? singular + "s")"
    }
}
