import Foundation
import JetbridgeModel

/// A JSON value whose objects keep their keys in the order given, so reports print keys in a fixed order
/// (Foundation's JSONEncoder on Linux does not keep declaration order, and `.sortedKeys` would not match docs/STORE.md).
indirect enum JSONText {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONText])
    case object([(String, JSONText)])

    static func optional(_ date: Date?) -> JSONText { date.map { .string(isoDate($0)) } ?? .null }
    static func optional(_ text: String?) -> JSONText { text.map { .string($0) } ?? .null }
    /// A report's whole document: one key holding its rows.
    static func list(_ key: String, _ rows: [JSONText]) -> JSONText { .object([(key, .array(rows))]) }

    /// Compact RFC 8259 text.
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value):
            // Reports only hold finite values (weights are 0–1000 lb per bag); Swift's shortest round-trip spelling
            // (`1234.5`, `40.0`) is valid JSON.
            out += value.isFinite ? "\(value)" : "null"
        case .string(let value): out += InertText.jsonLiteral(value)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                out += InertText.jsonLiteral(key)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }
}

/// UTC, second precision, `2026-11-21T03:53:20Z`: the same text in every format and locale.
func isoDate(_ date: Date) -> String {
    date.formatted(Date.ISO8601FormatStyle())
}
