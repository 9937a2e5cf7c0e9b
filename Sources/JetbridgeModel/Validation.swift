/// Checks shared by several types, exposed so that front ends can validate configuration with the same rules.
public enum Validation {
    /// Longest accepted device id.
    public static let maxDeviceIDLength = 64

    /// Checks a device id: 1–64 characters from `A–Z a–z 0–9 . _ -` (safe in file names, logs and SQL keys).
    /// - Throws: ``ValidationError`` with code `invalidDevice`.
    public static func deviceID(_ id: String, path: @autoclosure () -> String = "device") throws {
        let ok =
            !id.isEmpty && id.utf8.count <= maxDeviceIDLength
            && id.utf8.allSatisfy {
                $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
            }
        guard ok else {
            throw ValidationError(
                .invalidDevice,
                "invalid device id '\(id.prefix(80))': use 1–\(maxDeviceIDLength) characters from A–Z, a–z, 0–9, '.', '_', '-'",
                path: path())
        }
    }

    /// Checks an ISO 4217 alphabetic currency code: three uppercase ASCII letters, such as `USD`.
    /// - Throws: ``ValidationError`` with code `invalidCurrency`.
    public static func currency(_ code: String, path: @autoclosure () -> String = "currency") throws {
        guard code.utf8.count == 3, code.utf8.allSatisfy(\.isASCIIUpper) else {
            throw ValidationError(
                .invalidCurrency,
                "invalid currency '\(code.prefix(80))': use an ISO 4217 code of three uppercase letters, such as USD",
                path: path())
        }
    }
}

extension UInt8 {
    var isASCIIUpper: Bool { self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z") }
    var isASCIILower: Bool { self >= UInt8(ascii: "a") && self <= UInt8(ascii: "z") }
    var isASCIIDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    var isASCIIAlphanumeric: Bool { isASCIIUpper || isASCIILower || isASCIIDigit }
}
