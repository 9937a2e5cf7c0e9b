/// Suggestions for a mistyped name: a subcommand (`reprot` for `report`), an item, a status.
public enum Spelling {
    /// The name in `candidates` closest to `text` by edit distance (insertions, deletions, substitutions and swaps of
    /// neighbours, case ignored), if it is close enough to be what was meant: at most 2 edits, and fewer than half
    /// the length of the longer of the two.
    public static func closest(to text: String, among candidates: some Sequence<String>) -> String? {
        let typed = Array(text.lowercased())
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = Self.distance(typed, Array(candidate.lowercased()))
            let limit = min(2, (max(typed.count, candidate.count) - 1) / 2)
            guard distance <= limit, distance < (best?.distance ?? .max) else { continue }
            best = (candidate, distance)
        }
        return best?.name
    }

    /// Optimal string alignment distance.
    static func distance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous2 = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[b.count]
    }
}
