/// Checks shared by several types, exposed so that front ends can validate configuration with the same rules.
public enum Validation {
    /// Longest accepted device id.
    public static let maxDeviceIDLength = 64

    /// Checks a device id: 1–64 characters from `A–Z a–z 0–9 . _ -`, beginning with a letter or digit and not ending
    /// with `.`, and not a name Windows reserves for a device (`CON`, `PRN`, `AUX`, `NUL`, `COM0`–`COM9`,
    /// `LPT0`–`LPT9`, in any case, also before a `.` such as `nul.txt`). So an id is safe as a file name, in logs and
    /// as an SQL key, and never reads as a path (`.`, `..`), an option (`-x`) or a device file.
    /// - Throws: ``ValidationError`` with code `invalidDevice`.
    public static func deviceID(_ id: String, path: @autoclosure () -> String = "device") throws {
        // Every record's device passes here: one pass over the bytes decides the usual, valid case.
        if id.utf8.withContiguousStorageIfAvailable(isValidDeviceID) == true { return }
        guard let problem = deviceIDProblem(id) else { return }
        throw ValidationError(
            .invalidDevice,
            "invalid device id '\(visible(id.prefix(80)))': \(problem); use 1–\(maxDeviceIDLength) characters from "
                + "A–Z, a–z, 0–9, '.', '_', '-', beginning with a letter or digit (docs/PROTOCOL.md)",
            path: path())
    }

    /// Whether `bytes` are a valid device id, in one pass; agrees with ``deviceIDProblem(_:)`` returning nil.
    private static func isValidDeviceID(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, let last = bytes.last, bytes.count <= maxDeviceIDLength,
            first.isASCIIAlphanumeric, last != UInt8(ascii: ".")
        else { return false }
        var base = -1  // the length before the first '.'
        for (index, byte) in bytes.enumerated() {
            if byte.isASCIIAlphanumeric || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") { continue }
            guard byte == UInt8(ascii: ".") else { return false }
            if base < 0 { base = index }
        }
        if base < 0 { base = bytes.count }
        // Only a base of 3 or 4 characters can be a reserved name.
        return base > 4 || base < 3 || !isReservedName(String(decoding: bytes, as: UTF8.self))
    }

    /// What is wrong with `id` as a device id, or nil.
    static func deviceIDProblem(_ id: String) -> String? {
        let utf8 = id.utf8
        guard let first = utf8.first, let last = utf8.last else { return "it is empty" }
        guard utf8.count <= maxDeviceIDLength else { return "it is longer than \(maxDeviceIDLength) characters" }
        let allowed = utf8.allSatisfy {
            $0.isASCIIAlphanumeric || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-")
        }
        if !allowed, let bad = id.unicodeScalars.first(where: {
            !($0.isASCII
                && (UInt8($0.value).isASCIIAlphanumeric || $0 == "." || $0 == "_" || $0 == "-"))
        }) {
            return isForbidden(bad) || bad == " " ? "it holds \(describeCharacter(bad))" : "it holds '\(bad)'"
        }
        guard first.isASCIIAlphanumeric else { return "it must begin with a letter or digit" }
        guard last != UInt8(ascii: ".") else { return "it must not end with '.'" }
        if isReservedName(id) { return "it is a name Windows reserves for a device" }
        return nil
    }

    /// `CON`, `PRN`, `AUX`, `NUL`, `COM0`–`COM9`, `LPT0`–`LPT9`, in any case, alone or before a `.`.
    public static func isReservedName(_ name: String) -> Bool {
        // Byte by byte, as every record's device id passes here: only a base of 3 or 4 characters can match.
        var base: (UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0)
        var length = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: ".") { break }
            guard length < 4 else { return false }
            let upper = byte.isASCIILower ? byte - 0x20 : byte
            switch length {
            case 0: base.0 = upper
            case 1: base.1 = upper
            case 2: base.2 = upper
            default: base.3 = upper
            }
            length += 1
        }
        func stem(_ word: StaticString) -> Bool {
            let w = word.utf8Start
            return base.0 == w[0] && base.1 == w[1] && base.2 == w[2]
        }
        if length == 3 { return stem("CON") || stem("PRN") || stem("AUX") || stem("NUL") }
        return length == 4 && (stem("COM") || stem("LPT")) && base.3.isASCIIDigit
    }

    /// Checks an ISO 4217 alphabetic currency code: three uppercase ASCII letters, such as `USD`.
    /// - Throws: ``ValidationError`` with code `invalidCurrency`.
    public static func currency(_ code: String, path: @autoclosure () -> String = "currency") throws {
        guard code.utf8.count == 3, code.utf8.allSatisfy(\.isASCIIUpper) else {
            throw ValidationError(
                .invalidCurrency,
                "invalid currency '\(visible(code.prefix(80)))': use an ISO 4217 code of three uppercase letters, such as USD",
                path: path())
        }
    }
}

extension Validation {
    /// The first character `text` may not carry, or nil when it is inert.
    ///
    /// Free text from a device (item names; every other field of a record has a strict ASCII syntax) ends up in
    /// operators' tables, spreadsheets, passengers' receipts and logs, so it may not hold anything that is invisible
    /// or that moves or hides other text: control characters (Unicode category Cc: C0, DEL, C1), format characters
    /// (Cf: the bidirectional controls U+202A–U+202E and U+2066–U+2069, the marks U+200E/U+200F, the zero-width
    /// U+200B–U+200D and U+2060, U+FEFF, soft hyphen, tag characters…) and the line and paragraph separators U+2028
    /// and U+2029 (Zl, Zp). One rule for the agent and the ground, listed in docs/PROTOCOL.md.
    ///
    /// Printable ASCII, the usual case, is decided from the bytes alone.
    public static func forbiddenCharacter(in text: String) -> Unicode.Scalar? {
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return nil }
        return text.unicodeScalars.first { isForbidden($0) }
    }

    /// Whether `scalar` is one ``forbiddenCharacter(in:)`` refuses: one that is not inert text (``InertText``, the
    /// rule every output of device text escapes by).
    public static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        !InertText.isInert(scalar)
    }

    /// `text` with every character ``isForbidden(_:)`` refuses written as `\u{202E}` (``InertText/escape(_:)``), so
    /// that a message quoting refused text stays inert itself; at most its first ``maxQuotedScalars`` Unicode scalars,
    /// with `…` when cut. Callers cut what they quote to a number of characters, but one character (a grapheme) can
    /// hold millions of scalars, such as a letter followed by zero-width joiners: quoted whole, a 16 MiB device id
    /// became a 45 MB message.
    public static func visible(_ text: some StringProtocol) -> String {
        var quoted = String.UnicodeScalarView()
        var count = 0
        var cut = false
        for scalar in text.unicodeScalars {
            guard count < maxQuotedScalars else {
                cut = true
                break
            }
            quoted.append(scalar)
            count += 1
        }
        return InertText.escape(String(quoted)) + (cut ? "…" : "")
    }

    /// The most Unicode scalars ``visible(_:)`` quotes.
    public static let maxQuotedScalars = 200

    /// What kind of character `scalar` is, for messages.
    static func kind(of scalar: Unicode.Scalar) -> String {
        switch scalar.value {
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C: "a bidirectional control"
        case 0x200B...0x200D, 0x2060, 0xFEFF: "a zero-width character"
        case 0x2028, 0x2029: "a line or paragraph separator"
        default: scalar.properties.generalCategory == .format ? "an invisible format character" : "a control character"
        }
    }

    /// "a space" or "U+202E (a bidirectional control)".
    static func describeCharacter(_ scalar: Unicode.Scalar) -> String {
        scalar == " " ? "a space" : describe(scalar)
    }

    /// "U+202E (a bidirectional control)".
    static func describe(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + " (\(kind(of: scalar)))"
    }
}

extension UInt8 {
    var isASCIIUpper: Bool { self >= UInt8(ascii: "A") && self <= UInt8(ascii: "Z") }
    var isASCIILower: Bool { self >= UInt8(ascii: "a") && self <= UInt8(ascii: "z") }
    var isASCIIDigit: Bool { self >= UInt8(ascii: "0") && self <= UInt8(ascii: "9") }
    var isASCIIAlphanumeric: Bool { isASCIIUpper || isASCIILower || isASCIIDigit }
}
