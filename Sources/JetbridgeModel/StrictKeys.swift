/// Refuses keys a configuration object does not know, so a misspelt key is an error that names it rather than a
/// silent fallback to a default: the agent's `agent.json` and the aggregator's `aggregator.json` both check with it.
package enum StrictKeys {
    /// The first unknown key, in sorted order (the same one on every run), with its path and the keys known there.
    package struct UnknownKey: Error {
        /// The key with `prefix` before it: `ground[1].dta`.
        package var path: String
        /// The key as it stands in the object.
        package var key: String
        /// The keys the object may hold, with the same prefix.
        package var known: [String]

        /// `unknown key 'recordPerSecond'; known keys: bytesPerSecond, …`: the key shown escaped and at most 60
        /// characters long (it comes from the file as typed), the known keys sorted.
        package var message: String {
            "unknown key '\(Validation.visible(key.prefix(60)))'; known keys: \(known.sorted().joined(separator: ", "))"
        }
    }

    /// Any key of an object, for reading the keys it holds.
    package struct AnyKey: CodingKey {
        package var stringValue: String
        package var intValue: Int? { nil }
        package init(stringValue: String) { self.stringValue = stringValue }
        package init?(intValue: Int) { nil }
    }

    /// Throws ``UnknownKey`` when the object `decoder` reads holds a key outside `known`.
    /// - Parameter prefix: Where the object stands in the file, for the message (`sync.`, `ground[1].`).
    package static func check<Keys: CodingKey & CaseIterable>(
        _ decoder: any Decoder, known: Keys.Type, prefix: String = ""
    ) throws {
        let names = Keys.allCases.map(\.stringValue)
        let container = try decoder.container(keyedBy: AnyKey.self)
        if let unknown = container.allKeys.map(\.stringValue).sorted().first(where: { !names.contains($0) }) {
            throw UnknownKey(path: prefix + unknown, key: unknown, known: names.map { prefix + $0 })
        }
    }
}
