/// Counts for people, the same on every host: Foundation's number formatters follow the locale, and a progress line,
/// a status or a report must read the same in a CI log as on a terminal.
public enum NumberText {
    /// `1234567` as `1,234,567`.
    /// - Parameters:
    ///   - number: Any integer; a negative one keeps its sign in front.
    /// - Returns: The digits with a comma between each group of three.
    public static func grouped(_ number: Int) -> String {
        let digits = String(number.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (number < 0 ? "-" : "") + result
    }
}
