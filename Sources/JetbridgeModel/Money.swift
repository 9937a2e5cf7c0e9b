/// Money is an `Int` of minor units of the flight's currency (cents for USD); these helpers keep its arithmetic
/// checked and its formatting exact. Never floating point.
public enum Money {
    /// Currencies whose minor unit is not 1/100 (ISO 4217 exponent), the rest use 2.
    private static let exponents: [String: Int] = [
        "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0, "RWF": 0,
        "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
        "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
        "CLF": 4, "UYW": 4,
    ]

    /// How many decimal digits a currency's minor unit has: 2 for USD, 0 for JPY, 3 for KWD.
    public static func minorUnitDigits(currency: String) -> Int {
        exponents[currency] ?? 2
    }

    /// Formats minor units as a decimal amount without grouping or symbol: `1234` USD is `"12.34"`.
    ///
    /// - Parameters:
    ///   - amount: Minor units.
    ///   - currency: The ISO 4217 code that decides the number of decimals.
    /// - Returns: Digits with a `.` before the minor part and a leading `-` when negative.
    public static func format(_ amount: Int, currency: String) -> String {
        let digits = minorUnitDigits(currency: currency)
        let magnitude = String(amount.magnitude)
        let sign = amount < 0 ? "-" : ""
        guard digits > 0 else { return sign + magnitude }
        let padded = String(repeating: "0", count: max(0, digits + 1 - magnitude.count)) + magnitude
        let split = padded.index(padded.endIndex, offsetBy: -digits)
        return sign + padded[..<split] + "." + padded[split...]
    }

    /// Adds with overflow checked; `what` and `path` are only built on failure, as this runs for every line.
    /// - Throws: ``ValidationError`` with code `overflow`, naming `what`.
    public static func add(
        _ a: Int, _ b: Int, what: @autoclosure () -> String, path: @autoclosure () -> String = ""
    ) throws -> Int {
        let (sum, overflow) = a.addingReportingOverflow(b)
        guard !overflow else {
            throw ValidationError(
                .overflow, "\(what()) overflows: \(a) + \(b) is beyond \(Int.max) minor units", path: path())
        }
        return sum
    }

    /// Multiplies with overflow checked.
    /// - Throws: ``ValidationError`` with code `overflow`, naming `what`.
    public static func multiply(
        _ a: Int, _ b: Int, what: @autoclosure () -> String, path: @autoclosure () -> String = ""
    ) throws -> Int {
        let (product, overflow) = a.multipliedReportingOverflow(by: b)
        guard !overflow else {
            throw ValidationError(
                .overflow, "\(what()) overflows: \(a) × \(b) is beyond \(Int.max) minor units", path: path())
        }
        return product
    }
}
