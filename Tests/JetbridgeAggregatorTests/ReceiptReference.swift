import Foundation
import JetbridgeModel
import JetbridgeTestKit

// The receipt renderers as they were before receipts were written as bytes (aae59bc), kept as the reference the
// byte writers must equal: `Receipt.text` built from Strings, `Money.format` by string padding, and the sort by
// `(createdAt, id.uuidString)`.

enum ReceiptReference {
    static let exponents: [String: Int] = [
        "BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0, "RWF": 0,
        "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
        "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
        "CLF": 4, "UYW": 4,
    ]

    static func money(_ amount: Int, currency: String) -> String {
        let digits = exponents[currency] ?? 2
        let magnitude = String(amount.magnitude)
        let sign = amount < 0 ? "-" : ""
        guard digits > 0 else { return sign + magnitude }
        let padded = String(repeating: "0", count: max(0, digits + 1 - magnitude.count)) + magnitude
        let split = padded.index(padded.endIndex, offsetBy: -digits)
        return sign + padded[..<split] + "." + padded[split...]
    }

    static func text(_ receipt: Receipt) -> String {
        let money = { (amount: Int) in Self.money(amount, currency: receipt.currency) }
        let allLines = receipt.orders.flatMap(\.lines)
        let nameWidth = max(8, allLines.map { InertText.escape($0.name).count }.max() ?? 0)
        let countWidth = allLines.map { String($0.count).count }.max() ?? 1
        let unitWidth = allLines.map { money($0.unitPrice).count }.max() ?? 1
        let amounts = allLines.map(\.price) + receipt.orders.map(\.subtotal) + [receipt.total]
        let amountWidth = amounts.map { money($0).count }.max() ?? 1
        let lead = 2 + nameWidth + 2 + countWidth + 3 + unitWidth + 2

        func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
            let fill = String(repeating: " ", count: max(0, width - text.count))
            return right ? fill + text : text + fill
        }
        let iso = Date.ISO8601FormatStyle()

        var out = "Jetbridge receipt\nFlight: \(receipt.flight)\nSeat:   \(receipt.seat)\n"
        for order in receipt.orders {
            out += "\nOrder \(order.id.uuidString) (revision \(order.revision))\n"
            out += "\(order.createdAt.formatted(iso)), device \(InertText.escape(order.device))\n"
            for line in order.lines {
                out +=
                    "  " + pad(InertText.escape(line.name), nameWidth) + "  "
                    + pad(String(line.count), countWidth, right: true)
                out += " x " + pad(money(line.unitPrice), unitWidth, right: true) + "  "
                out += pad(money(line.price), amountWidth, right: true) + "\n"
            }
            out += pad("  Subtotal", lead) + pad(money(order.subtotal), amountWidth, right: true) + "\n"
        }
        out +=
            "\n" + pad("Total", lead) + pad(money(receipt.total), amountWidth, right: true) + " \(receipt.currency)\n"
        return out
    }

    /// The ids of a seat's latest revisions in receipt order.
    static func sortedIDs(_ orders: [Order], flight: FlightID, seat: Seat) -> [UUID] {
        Order.latestRevisions(orders.filter { $0.flight == flight && $0.seat == seat })
            .sorted { ($0.createdAt, $0.id.uuidString) < ($1.createdAt, $1.id.uuidString) }
            .map(\.id)
    }

    /// Receipts that exercise every branch of both renderers: random orders, escapes, non-ASCII and wide names,
    /// fractional, negative and far dates, empty receipts and orders, currencies with 0, 2, 3 and 4 decimals, extreme
    /// amounts.
    static func variedReceipts() throws -> [Receipt] {
        var receipts = [Receipt.example]
        receipts += try Receipt.all(orders: orders(randomRecords(seed: 11, count: 400)))
        let odd = Receipt.Entry(
            id: uuid(7), revision: 3, createdAt: Date(timeIntervalSince1970: 1_795_200_000.987), device: "cart/1",
            lines: [
                Receipt.Line(
                    name: "Tea \"Earl\" Grey\\ ½ / é\t\n\r\u{8}\u{C}\u{1}\u{1F}", count: 1, unitPrice: 5, price: 5),
                Receipt.Line(name: "", count: 0, unitPrice: 0, price: 0),
            ], subtotal: -5)
        let empty = Receipt.Entry(
            id: uuid(8), revision: 1, createdAt: Date(timeIntervalSince1970: -1.5), device: "d", lines: [],
            subtotal: 0)
        receipts.append(
            Receipt(flight: flightB, seat: try Seat("1A"), currency: "EUR", orders: [odd, empty], total: 0))
        receipts.append(Receipt(flight: flightA, seat: try Seat("2B"), currency: "", orders: [], total: Int.min))
        // Names whose characters are not their bytes: combining accents, emoji, flags, CR LF (one character), DEL.
        let wide = Receipt.Entry(
            id: UUID(uuidString: "FFFFFFFF-ABCD-EF01-2345-6789ABCDEF00")!, revision: Int.max,
            createdAt: Date(timeIntervalSince1970: 253_402_300_800.25), device: "galley ☕",
            lines: [
                Receipt.Line(name: "Cafe\u{301} au lait, grande", count: -12, unitPrice: Int.min, price: Int.max),
                Receipt.Line(name: "🍺🇿🇦 a\r\nb \u{7F}", count: 99, unitPrice: 1, price: -99),
                Receipt.Line(name: "x", count: 0, unitPrice: 10, price: 0),
                Receipt.Line(name: "ASCII\r\nwith CR LF\tand a tab", count: 1, unitPrice: 10, price: 10),
                Receipt.Line(name: "\u{1B}[2J\u{7}abc\u{202E}00.2\u{200B}\u{2028}", count: 1, unitPrice: 10, price: 10),
            ], subtotal: Int.min)
        for currency in ["USD", "JPY", "KWD", "CLF", "", "usd"] {
            receipts.append(
                Receipt(
                    flight: flightA, seat: try Seat("9F"), currency: currency, orders: [wide, odd, empty],
                    total: -1_234_567))
        }
        // Amounts of every width from 1 to 19 digits, both signs, in a 3-decimal currency.
        var generator = SplitMix(state: 9)
        let amounts =
            (0..<200).map { n -> Int in
                var limit: UInt64 = 10
                for _ in 0..<(n % 18) { limit *= 10 }
                let value = Int(generator.next() % limit)
                return n % 3 == 0 ? -value : value
            } + [Int.max, Int.min, Int.min + 1, -1, 0]
        receipts.append(
            Receipt(
                flight: flightB, seat: try Seat("12C"), currency: "KWD",
                orders: amounts.enumerated().map {
                    Receipt.Entry(
                        id: uuid($0.offset), revision: 1, createdAt: Date(timeIntervalSince1970: Double($0.offset)),
                        device: "d",
                        lines: [Receipt.Line(name: "n\($0.offset)", count: $0.offset, unitPrice: $0.element, price: 1)],
                        subtotal: 0 &- $0.element)
                }, total: amounts.last!))
        // Dates across leap days, year ends and centuries, with and without fractions.
        let dates =
            (0..<2_000).map { _ in
                Date(
                    timeIntervalSince1970: Double(generator.next() % 8_000_000_000) + Double(generator.next() % 1000)
                        / 1000)
            }
            + [0, 951_782_400, 951_868_799.999, 4_107_542_400, 253_402_300_799.5, -86_400.5, -62_135_596_800].map {
                Date(timeIntervalSince1970: $0)
            }
        receipts.append(
            Receipt(
                flight: flightA, seat: try Seat("3C"), currency: "USD",
                orders: dates.enumerated().map {
                    Receipt.Entry(
                        id: uuid($0.offset), revision: 1, createdAt: $0.element, device: "d", lines: [], subtotal: 0)
                }, total: 0))
        return receipts
    }
}
