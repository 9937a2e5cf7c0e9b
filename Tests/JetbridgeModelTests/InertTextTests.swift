import Foundation
import JetbridgeModel
import Testing

@Suite("InertText: device text shown without side effects")
struct InertTextTests {
    /// Each class of issue 16: terminal controls, bidi controls, zero-width characters, line separators.
    static let hostile: [(String, String)] = [
        ("\u{1B}[2J\u{1B}[HPeanuts", #"\u{1B}[2J\u{1B}[HPeanuts"#),
        ("bell\u{07} and CR\r forged\nline\ttab", #"bell\u{7} and CR\u{D} forged\u{A}line\u{9}tab"#),
        ("DEL\u{7F} C1\u{9B}31m", #"DEL\u{7F} C1\u{9B}31m"#),
        ("abc\u{202E}00.2 Peanuts", #"abc\u{202E}00.2 Peanuts"#),
        ("\u{2066}x\u{2069}\u{200E}\u{200F}\u{61C}", #"\u{2066}x\u{2069}\u{200E}\u{200F}\u{61C}"#),
        ("Pea\u{200B}nuts\u{200C}\u{200D}\u{2060}\u{FEFF}", #"Pea\u{200B}nuts\u{200C}\u{200D}\u{2060}\u{FEFF}"#),
        ("one\u{2028}two\u{2029}", #"one\u{2028}two\u{2029}"#),
        ("soft\u{AD}hyphen", #"soft\u{AD}hyphen"#),
    ]

    @Test func escapesEveryHostileClass() {
        for (input, expected) in Self.hostile {
            #expect(InertText.escape(input) == expected)
            #expect(InertText.needsEscape(input))
            #expect(!InertText.needsEscape(InertText.escape(input)))
        }
    }

    @Test func leavesPrintableTextAlone() {
        for text in ["Peanuts", "Café au lait", "Cafe\u{301}", "🍺🇿🇦", "日本茶", "back\\slash", "", "a\u{A0}b", "½ / é"] {
            #expect(InertText.escape(text) == text)
            #expect(!InertText.needsEscape(text))
        }
    }
}
