/// Snake-case conversions with the rules `JSONEncoder` and `JSONDecoder` document.
enum KeyConversion {
    /// `myURLValue` → `my_url_value`: a word starts at each uppercase letter that follows a lowercase one, and at
    /// the last uppercase letter of a run that is followed by a lowercase one.
    static func toSnakeCase(_ key: String) -> String {
        let scalars = Array(key.unicodeScalars)
        guard !scalars.isEmpty else { return key }
        var result = String.UnicodeScalarView()
        for (i, scalar) in scalars.enumerated() {
            let isUpper = scalar.properties.isUppercase
            if isUpper && i > 0 {
                let previous = scalars[i - 1]
                let previousIsUpper = previous.properties.isUppercase
                let nextIsLower = i + 1 < scalars.count && scalars[i + 1].properties.isLowercase
                if previous != "_" && (!previousIsUpper || nextIsLower) {
                    result.append("_")
                }
            }
            if isUpper {
                result.append(contentsOf: String(scalar).lowercased().unicodeScalars)
            } else {
                result.append(scalar)
            }
        }
        return String(result)
    }

    /// `my_url_value` → `myUrlValue`; leading and trailing underscores are kept, as `JSONDecoder` keeps them.
    static func fromSnakeCase(_ key: String) -> String {
        guard key.contains("_") else { return key }
        let scalars = Array(key.unicodeScalars)
        guard let first = scalars.firstIndex(where: { $0 != "_" }) else { return key }
        var last = scalars.count - 1
        while scalars[last] == "_" { last -= 1 }
        let words = String(String.UnicodeScalarView(scalars[first...last])).split(separator: "_")
        var result = String(String.UnicodeScalarView(scalars[..<first]))
        for (i, word) in words.enumerated() {
            result += i == 0 ? word.lowercased() : word.prefix(1).uppercased() + word.dropFirst().lowercased()
        }
        result += String(String.UnicodeScalarView(scalars[(last + 1)...]))
        return result
    }
}
