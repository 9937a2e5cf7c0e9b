/// Makes text that came from a device safe to show: every character that could move the cursor, clear a screen,
/// forge a line, reorder or hide text is written as a visible escape instead.
///
/// The escape is Swift's `\u{…}` spelling with upper-case hex and no padding: ESC becomes `\u{1B}`, a right-to-left
/// override `\u{202E}`, a zero-width space `\u{200B}`. Escaped are:
/// - C0 controls (U+0000–U+001F, tab, CR and LF included), DEL (U+007F) and C1 controls (U+0080–U+009F);
/// - format characters (general category Cf): bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E,
///   U+2066–U+2069), zero-width characters (U+200B–U+200D, U+2060, U+FEFF), the soft hyphen and the like;
/// - the line and paragraph separators U+2028 and U+2029.
///
/// Everything else, including a backslash, prints as is: the escape is for display, not a reversible encoding. Text
/// the ground accepts never holds such characters (validation refuses them); this is the second fence, for text
/// quoted in error messages and for stores written before that rule.
public enum InertText {
    /// `text` with every character that is not inert escaped; `text` itself (no copy) when nothing needs it.
    public static func escape(_ text: String) -> String {
        guard needsEscape(text) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            if isInert(scalar) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            }
        }
        return out
    }

    /// A JSON string literal (quotes included) of `text` that is inert too: `"` and `\` escaped, `\n`, `\r`, `\t`, `\b`
    /// and `\f` in their short forms, and every other character that is not inert as `\uXXXX` (a surrogate pair past
    /// U+FFFF). A JSON parser reads back exactly `text`; a person reading the file sees no control take effect. For
    /// reports and JSON log lines (a receipt's JSON is JSONEncoder's bytes instead).
    public static func jsonLiteral(_ text: String) -> String {
        var out = "\""
        out.reserveCapacity(text.utf8.count + 2)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where !isInert(scalar):
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16, uppercase: false)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
        return out
    }

    /// Whether ``escape(_:)`` would change `text`; one pass over the bytes when they are printable ASCII.
    public static func needsEscape(_ text: String) -> Bool {
        var ascii = true
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F { return true }
            if byte >= 0x80 { ascii = false }
        }
        return ascii ? false : text.unicodeScalars.contains { !isInert($0) }
    }

    /// Whether `scalar` prints as itself without side effects on a terminal, in a log line or in a spreadsheet.
    public static func isInert(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x20..<0x7F: return true
        case 0..<0x20, 0x7F...0x9F, 0x2028, 0x2029: return false
        case 0xA0..<0xAD: return true
        default:
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator: return false
            default: return true
            }
        }
    }
}
