#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

// The receipt files' bytes, written straight into one buffer: a bulk sync leaves hundreds of orders per seat, and
// building a String (or a JSONEncoder container) per field was most of the receipts thread's CPU.
extension Receipt {
    /// ``text`` as UTF-8 bytes.
    public func textBytes() -> [UInt8] {
        let minorDigits = Money.minorUnitDigits(currency: currency)
        var nameWidth = 8
        var countWidth = 1
        var unitWidth = 1
        var amountWidth = Money.width(total, minorDigits: minorDigits)
        var size = 128
        for order in orders {
            amountWidth = max(amountWidth, Money.width(order.subtotal, minorDigits: minorDigits))
            size += 128 + order.device.utf8.count
            for line in order.lines {
                nameWidth = max(nameWidth, Self.characterCount(line.name))
                countWidth = max(countWidth, Self.decimalWidth(line.count))
                unitWidth = max(unitWidth, Money.width(line.unitPrice, minorDigits: minorDigits))
                amountWidth = max(amountWidth, Money.width(line.price, minorDigits: minorDigits))
                size += 64 + line.name.utf8.count
            }
        }
        // "  name  count x unit  amount": everything before the amount column has this width.
        let lead = 2 + nameWidth + 2 + countWidth + 3 + unitWidth + 2

        var out: [UInt8] = []
        out.reserveCapacity(size + 8 * lead)
        out.append(ascii: "Jetbridge receipt\nFlight: ")
        out.append(contentsOf: flight.rawValue.utf8)
        out.append(ascii: "\nSeat:   ")
        out.append(contentsOf: seat.rawValue.utf8)
        out.append(ascii: "\n")
        for order in orders {
            out.append(ascii: "\nOrder ")
            out.append(uuid: order.id)
            out.append(ascii: " (revision ")
            out.append(decimal: order.revision)
            out.append(ascii: ")\n")
            out.append(utcSeconds: order.createdAt)
            out.append(ascii: ", device ")
            out.append(inert: order.device)
            out.append(ascii: "\n")
            for line in order.lines {
                out.append(ascii: "  ")
                out.append(inert: line.name)
                out.append(spaces: nameWidth - Self.characterCount(line.name) + 2)
                out.append(spaces: countWidth - Self.decimalWidth(line.count))
                out.append(decimal: line.count)
                out.append(ascii: " x ")
                out.append(money: line.unitPrice, minorDigits: minorDigits, width: unitWidth)
                out.append(ascii: "  ")
                out.append(money: line.price, minorDigits: minorDigits, width: amountWidth)
                out.append(ascii: "\n")
            }
            out.append(ascii: "  Subtotal")
            out.append(spaces: lead - 10)
            out.append(money: order.subtotal, minorDigits: minorDigits, width: amountWidth)
            out.append(ascii: "\n")
        }
        out.append(ascii: "\nTotal")
        out.append(spaces: lead - 5)
        out.append(money: total, minorDigits: minorDigits, width: amountWidth)
        out.append(ascii: " ")
        out.append(contentsOf: currency.utf8)
        out.append(ascii: "\n")
        return out
    }

    /// The receipt as JSON: keys sorted, pretty-printed with two spaces and `" : "`, slashes unescaped, dates as
    /// ISO 8601 UTC seconds, a trailing newline; the bytes `JSONEncoder` writes with
    /// `[.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]` and `.iso8601` dates (the aggregator's tests compare
    /// the two).
    public func jsonBytes() -> [UInt8] {
        var size = 256
        for order in orders {
            size += 256 + order.device.utf8.count
            for line in order.lines { size += 160 + line.name.utf8.count }
        }
        var out: [UInt8] = []
        out.reserveCapacity(size)
        out.append(ascii: "{\n  \"currency\" : ")
        out.append(jsonString: currency)
        out.append(ascii: ",\n  \"flight\" : ")
        out.append(jsonString: flight.rawValue)
        out.append(ascii: ",\n  \"orders\" : [\n")
        for (index, order) in orders.enumerated() {
            out.append(ascii: "    {\n      \"createdAt\" : \"")
            out.append(utcSeconds: order.createdAt)
            out.append(ascii: "\",\n      \"device\" : ")
            out.append(jsonString: order.device)
            out.append(ascii: ",\n      \"id\" : \"")
            out.append(uuid: order.id)
            out.append(ascii: "\",\n      \"lines\" : [\n")
            for (lineIndex, line) in order.lines.enumerated() {
                out.append(ascii: "        {\n          \"count\" : ")
                out.append(decimal: line.count)
                out.append(ascii: ",\n          \"name\" : ")
                out.append(jsonString: line.name)
                out.append(ascii: ",\n          \"price\" : ")
                out.append(decimal: line.price)
                out.append(ascii: ",\n          \"unitPrice\" : ")
                out.append(decimal: line.unitPrice)
                out.append(ascii: lineIndex == order.lines.count - 1 ? "\n        }\n" : "\n        },\n")
            }
            out.append(
                ascii: order.lines.isEmpty ? "\n      ],\n      \"revision\" : " : "      ],\n      \"revision\" : ")
            out.append(decimal: order.revision)
            out.append(ascii: ",\n      \"subtotal\" : ")
            out.append(decimal: order.subtotal)
            out.append(ascii: index == orders.count - 1 ? "\n    }\n" : "\n    },\n")
        }
        out.append(ascii: orders.isEmpty ? "\n  ],\n  \"seat\" : " : "  ],\n  \"seat\" : ")
        out.append(jsonString: seat.rawValue)
        out.append(ascii: ",\n  \"total\" : ")
        out.append(decimal: total)
        out.append(ascii: "\n}\n")
        return out
    }

    /// Characters (grapheme clusters) `text` shows as once escaped by ``InertText``, as `String.count`; counted by
    /// bytes when all are printable ASCII, as item names nearly always are.
    static func characterCount(_ text: String) -> Int {
        var count = 0
        for byte in text.utf8 {
            guard byte >= 0x20, byte < 0x7F else { return InertText.escape(text).count }
            count += 1
        }
        return count
    }

    /// The length of `String(value)`.
    static func decimalWidth(_ value: Int) -> Int {
        Money.decimalDigits(value.magnitude) + (value < 0 ? 1 : 0)
    }
}

extension [UInt8] {
    mutating func append(ascii text: StaticString) {
        text.withUTF8Buffer { append(contentsOf: $0) }
    }

    mutating func append(spaces count: Int) {
        // `append(contentsOf: repeatElement(…))` took a slow generic path (5 % of a refresh in perf).
        var left = count
        while left > 0 {
            let chunk = Swift.min(left, 32)
            ("                                " as StaticString).withUTF8Buffer {
                append(contentsOf: UnsafeBufferPointer(rebasing: $0.prefix(chunk)))
            }
            left -= chunk
        }
    }

    /// `text` as ``InertText/escape(_:)`` shows it: its bytes as they are when all are printable ASCII (one pass, no
    /// copy), escaped otherwise.
    mutating func append(inert text: String) {
        for byte in text.utf8 where byte < 0x20 || byte >= 0x7F {
            append(contentsOf: InertText.escape(text).utf8)
            return
        }
        append(contentsOf: text.utf8)
    }

    /// `String(value)`.
    mutating func append(decimal value: Int) {
        if value < 0 { append(UInt8(ascii: "-")) }
        Money.appendDigits(value.magnitude, to: &self)
    }

    /// ``Money/format(_:currency:)``, right-aligned in `width` characters.
    mutating func append(money amount: Int, minorDigits: Int, width: Int) {
        append(spaces: width - Money.width(amount, minorDigits: minorDigits))
        Money.append(amount, minorDigits: minorDigits, to: &self)
    }

    /// `uuid.uuidString`: upper-case hex, 8-4-4-4-12.
    mutating func append(uuid: UUID) {
        let hex: StaticString = "0123456789ABCDEF"
        Swift.withUnsafeBytes(of: uuid.uuid) { bytes in
            hex.withUTF8Buffer { digits in
                for (index, byte) in bytes.enumerated() {
                    if index == 4 || index == 6 || index == 8 || index == 10 { append(UInt8(ascii: "-")) }
                    append(digits[Int(byte >> 4)])
                    append(digits[Int(byte & 0x0F)])
                }
            }
        }
    }

    /// `2026-11-21T03:53:20Z`, as `Date.ISO8601FormatStyle()` (and `JSONEncoder`'s `.iso8601`) write it, fractions of
    /// a second dropped; by arithmetic for years 1970–9999, by the style otherwise.
    mutating func append(utcSeconds date: Date) {
        let interval = date.timeIntervalSince1970
        guard interval >= 0, interval < 253_402_300_800 else {
            append(contentsOf: date.formatted(Date.ISO8601FormatStyle()).utf8)
            return
        }
        let seconds = Int(interval)
        let days = seconds / 86_400
        let second = seconds % 86_400
        // Days since 1970-01-01 to a civil date (Howard Hinnant's days_from_civil, inverted).
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        Money.appendDigits(UInt(year), minimumWidth: 4, to: &self)
        append(UInt8(ascii: "-"))
        Money.appendDigits(UInt(month), minimumWidth: 2, to: &self)
        append(UInt8(ascii: "-"))
        Money.appendDigits(UInt(day), minimumWidth: 2, to: &self)
        append(UInt8(ascii: "T"))
        Money.appendDigits(UInt(second / 3_600), minimumWidth: 2, to: &self)
        append(UInt8(ascii: ":"))
        Money.appendDigits(UInt(second / 60 % 60), minimumWidth: 2, to: &self)
        append(UInt8(ascii: ":"))
        Money.appendDigits(UInt(second % 60), minimumWidth: 2, to: &self)
        append(UInt8(ascii: "Z"))
    }

    /// A JSON string as `JSONEncoder` spells it with `.withoutEscapingSlashes`: `"`, `\` and C0 controls escaped,
    /// everything else (including non-ASCII) as is.
    mutating func append(jsonString text: String) {
        append(UInt8(ascii: "\""))
        let hex: StaticString = "0123456789abcdef"
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): append(ascii: "\\\"")
            case UInt8(ascii: "\\"): append(ascii: "\\\\")
            case UInt8(ascii: "\n"): append(ascii: "\\n")
            case UInt8(ascii: "\r"): append(ascii: "\\r")
            case UInt8(ascii: "\t"): append(ascii: "\\t")
            case 0x08: append(ascii: "\\b")
            case 0x0C: append(ascii: "\\f")
            case 0..<0x20:
                append(ascii: "\\u00")
                hex.withUTF8Buffer { digits in
                    append(digits[Int(byte >> 4)])
                    append(digits[Int(byte & 0x0F)])
                }
            default: append(byte)
            }
        }
        append(UInt8(ascii: "\""))
    }
}
