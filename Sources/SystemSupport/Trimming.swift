extension StringProtocol {
    /// The text without the whitespace (newlines included) at either end: Foundation's
    /// `trimmingCharacters(in: .whitespacesAndNewlines)`, which FoundationEssentials does not have.
    package func trimmingWhitespace() -> String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }
}
