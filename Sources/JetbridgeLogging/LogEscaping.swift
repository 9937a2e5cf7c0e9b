import JetbridgeModel

/// Escapes for log output.
public enum LogEscaping {
    /// Whether `scalar` must never reach a log raw: what ``InertText`` does not call inert (C0 and C1 controls, DEL,
    /// format characters such as bidi controls and zero-width characters, line and paragraph separators), the same
    /// set every other output of device text escapes.
    public static func mustEscape(_ scalar: Unicode.Scalar) -> Bool {
        !InertText.isInert(scalar)
    }

    /// `text` with `\n`, `\r`, `\t` and `\u{XXXX}` in place of what ``mustEscape(_:)`` names.
    public static func text(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: mustEscape) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard mustEscape(scalar) else {
                out.append(scalar)
                continue
            }
            switch scalar {
            case "\n": out.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": out.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": out.append(contentsOf: #"\t"#.unicodeScalars)
            default: out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            }
        }
        return String(out)
    }

    /// A JSON string literal (quotes included) with `"`, `\` and everything ``mustEscape(_:)`` names escaped
    /// (``InertText/jsonLiteral(_:)``).
    public static func jsonString(_ text: String) -> String {
        InertText.jsonLiteral(text)
    }
}
