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

    /// `value` with one decimal, as C's `%.1f` prints it (`12.3`); a value that is not finite as Swift prints it.
    public static func oneDecimal(_ value: Double) -> String {
        let tenths = (value * 10).rounded()
        guard tenths.isFinite, tenths.magnitude < 1e17 else { return "\(value)" }
        let whole = Int(tenths.magnitude)
        return (tenths < 0 ? "-" : "") + "\(whole / 10).\(whole % 10)"
    }

    /// `value` as briefly as it reads: a whole number without a decimal point (`5`, `-3`), anything else as Swift
    /// prints it (`0.5`, `nan`, `-inf`).
    public static func brief(_ value: Double) -> String {
        guard value.isFinite, value == value.rounded(), value.magnitude < 1e15 else { return "\(value)" }
        return "\(Int(value))"
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
