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
        var bytes: [UInt8] = []
        append(amount, minorDigits: minorUnitDigits(currency: currency), to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// How many characters ``format(_:currency:)`` writes for `amount` with `minorDigits` decimals.
    static func width(_ amount: Int, minorDigits: Int) -> Int {
        let digits = decimalDigits(amount.magnitude)
        let sign = amount < 0 ? 1 : 0
        return minorDigits > 0 ? sign + max(digits, minorDigits + 1) + 1 : sign + digits
    }

    /// Appends what ``format(_:currency:)`` returns, by integer arithmetic: receipts format several amounts for each
    /// of hundreds of orders per seat, and building strings for them was a large share of a receipt's cost.
    static func append(_ amount: Int, minorDigits: Int, to out: inout [UInt8]) {
        if amount < 0 { out.append(UInt8(ascii: "-")) }
        let magnitude = amount.magnitude
        guard minorDigits > 0 else {
            appendDigits(magnitude, to: &out)
            return
        }
        var scale: UInt = 1
        for _ in 0..<minorDigits { scale *= 10 }
        appendDigits(magnitude / scale, to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(magnitude % scale, minimumWidth: minorDigits, to: &out)
    }

    /// The decimal digits of `value`, at least `minimumWidth` of them (zeros in front).
    static func appendDigits(_ value: UInt, minimumWidth: Int = 1, to out: inout [UInt8]) {
        // Digits backwards into a fixed buffer (a UInt has at most 20), then appended in one copy.
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        withUnsafeMutableBytes(of: &digits) { buffer in
            var value = value
            var index = buffer.count
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value % 10)
                value /= 10
            } while value > 0
            while buffer.count - index < minimumWidth && index > 0 {
                index -= 1
                buffer[index] = UInt8(ascii: "0")
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[index...]))
        }
    }

    /// Decimal digits in `value`; 1 for 0.
    static func decimalDigits(_ value: UInt) -> Int {
        var count = 1
        var value = value
        while value >= 10 {
            value /= 10
            count += 1
        }
        return count
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
