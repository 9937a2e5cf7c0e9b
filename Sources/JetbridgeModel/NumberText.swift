/// Counts for people, the same on every host: Foundation's number formatters follow the locale, and a progress line,
/// a status or a report must read the same in a CI log as on a terminal.
public enum NumberText {
    /// `1234567` as `1,234,567`.
    /// - Parameters:
    ///   - number: Any integer; a negative one keeps its sign in front.
    /// - Returns: The digits with a comma between each group of three.
    public static func grouped(_ number: Int) -> String {
        (number < 0 ? "-" : "") + groupDigits(String(number.magnitude))
    }

    /// ``Money/format(_:currency:)`` with thousands separators in the whole units: `12,345.00`.
    public static func groupedMoney(_ amount: Int, currency: String) -> String {
        let text = Money.format(amount, currency: currency)
        let negative = text.hasPrefix("-")
        let unsigned = negative ? text.dropFirst() : Substring(text)
        let whole = unsigned.prefix { $0 != "." }
        return (negative ? "-" : "") + groupDigits(whole) + unsigned.dropFirst(whole.count)
    }

    /// `digits` (a run of decimal digits) with a comma between each group of three, counted from the right.
    static func groupDigits(_ digits: some StringProtocol) -> String {
        var result = ""
        result.reserveCapacity(digits.count + digits.count / 3)
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return result
    }
}
