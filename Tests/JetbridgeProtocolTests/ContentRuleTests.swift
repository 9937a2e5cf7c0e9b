import Foundation
import JetbridgeModel
import JetbridgeProtocol
import MessagePack
import Testing

/// Issue 16: text that reorders or hides itself, prices that overflow sums, timestamps from any century. The ground
/// refuses them through both decode paths (RecordDecoder and Codable) with the record's index and reason.
@Suite struct ContentRuleTests {
    static let hostileNames = [
        "Pea\u{202E}stun", "Pea\u{202A}nuts", "Pea\u{202D}nuts", "Pea\u{2066}nuts", "Pea\u{2069}nuts",
        "Pea\u{200B}nuts", "Pea\u{200C}nuts", "Pea\u{200D}nuts", "Pea\u{2060}nuts", "\u{FEFF}Peanuts",
        "Pea\u{2028}nuts", "Pea\u{2029}nuts", "Pea\u{1B}[2Jnuts", "Pea\rnuts", "Pea\u{7}nuts", "Pea\u{85}nuts",
        "Pea\u{7F}nuts", "Pea\u{200F}nuts", "Pea\u{E0041}nuts",
    ]

    func order(name: String = "Peanuts", unitPrice: Int = 200, createdAt: Date = Order.example.createdAt) -> Order {
        var order = Order.example
        order.device = "cart-1"
        order.lineItems[0].item = Item(name: name, unitPrice: unitPrice)
        order.createdAt = createdAt
        return order
    }

    /// The ack's verdict both ways: the fast path and the reference give the same status, index and reason.
    func verdict(_ records: [Record]) throws -> BatchRejection? {
        let frames = try batch(records.map(encoded)).frames()
        let fast = rejection(IncomingBatch.decode(frames: frames, authenticatedDevice: "cart-1"))
        let reference = rejection(IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1"))
        #expect(fast == reference)
        return fast
    }

    @Test(arguments: hostileNames)
    func anItemNameWithAnInvisibleOrControlCharacterIsRefused(name: String) throws {
        let found = try #require(try verdict([.order(order()), .order(order(name: name))]))
        #expect(found.status == .rejected)
        #expect(found.index == 1)
        #expect(found.reason.hasPrefix("record 1: lineItems[0].item.name: invalid item name"))
        // The reason quotes the name with the character spelled out, never raw.
        #expect(!found.reason.unicodeScalars.contains { Validation.isForbidden($0) })
        #expect(throws: ValidationError.self) { try order(name: name).validate() }
    }

    @Test func theReasonNamesTheCharacter() throws {
        let found = try #require(try verdict([.order(order(name: "Pea\u{202E}nuts"))]))
        #expect(found.reason.contains("U+202E (a bidirectional control)"))
        #expect(found.reason.contains(#"Pea\u{202E}nuts"#))
        let zw = try #require(try verdict([.order(order(name: "Pea\u{200B}nuts"))]))
        #expect(zw.reason.contains("U+200B (a zero-width character)"))
    }

    @Test func printableUnicodeNamesStayAccepted() throws {
        for name in ["Café au lait", "Crème brûlée", "東京バナナ", "Ayran (ایران)", "Pretzel 🥨", "Çay"] {
            #expect(try verdict([.order(order(name: name))]) == nil, "\(name)")
        }
    }

    @Test func aPriceAboveTheMaximumIsRefusedAtTheGround() throws {
        #expect(try verdict([.order(order(unitPrice: Item.maxUnitPrice))]) == nil)
        let found = try #require(try verdict([.order(order()), .order(order(unitPrice: 1 << 62))]))
        #expect(found.index == 1)
        #expect(found.reason.contains("lineItems[0].item.unitPrice"))
        #expect(found.reason.contains("highest accepted unit price is 100000000"))
    }

    @Test func tooManyLinesAreRefusedAtTheGround() throws {
        var big = order()
        big.lineItems = (0...Order.maxLines).map { LineItem(item: Item(name: "Item \($0)", unitPrice: 1), count: 1) }
        let found = try #require(try verdict([.order(big)]))
        #expect(found.index == 0)
        #expect(found.reason.contains("at most 64"))
    }

    static let outside: [Double] = [
        946_684_799, -210_866_760_000, 0, 4_102_444_800, 15_927_000_000_000, -62_135_596_800, .nan, .infinity,
    ]

    @Test(arguments: outside)
    func aTimestampOutsideTheWindowIsRefusedAtTheGround(seconds: Double) throws {
        let when = Date(timeIntervalSince1970: seconds)
        var late = scan()
        late.scannedAt = when
        if seconds.isFinite {
            // NaN and infinity cannot be written as a MessagePack timestamp at all.
            let order = try #require(try verdict([.order(order()), .order(order(createdAt: when))]))
            #expect(order.index == 1)
            #expect(order.reason.contains("createdAt: the time"))
            #expect(order.reason.contains("outside 2000-01-01T00:00:00Z"))
            let scan = try #require(try verdict([.scan(late)]))
            #expect(scan.reason.contains("scannedAt"))
        }
        #expect(throws: ValidationError.self) { try late.validate() }
    }

    @Test func theWindowsEdgesAreInclusiveThenExclusive() throws {
        #expect(try verdict([.order(order(createdAt: Date(timeIntervalSince1970: 946_684_800)))]) == nil)
        #expect(try verdict([.order(order(createdAt: Date(timeIntervalSince1970: 4_102_444_799.999)))]) == nil)
        #expect(try verdict([.order(order(createdAt: Date(timeIntervalSince1970: 4_102_444_800)))]) != nil)
    }

    /// Issue 16, defect 3 at its source: a reason that quotes a device's refused text spells its control characters
    /// out, so an ack, a log line or `report devices` never carries the raw ESC, CR or BEL.
    @Test(arguments: ["seat", "flight", "id", "currency", "type", "device"])
    func aRefusedFieldIsQuotedInertly(field: String) throws {
        let hostile = "\u{1B}[2J\r\u{7}\u{202E}x"
        guard case .map(let pairs) = try MessagePackDecoder().decode(
            MessagePackValue.self, from: encoded(.order(order())))
        else { return }
        let tree = MessagePackValue.map(pairs.map { $0.key == .string(field) ? ($0.key, .string(hostile)) : $0 })
        let frames = try batch([try MessagePackEncoder().encode(tree)]).frames()
        let fast = rejection(IncomingBatch.decode(frames: frames, authenticatedDevice: "cart-1"))
        let reference = rejection(IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1"))
        #expect(fast == reference)
        let reason = try #require(fast?.reason)
        #expect(!reason.unicodeScalars.contains { Validation.isForbidden($0) }, "\(reason)")
        #expect(reason.contains(#"\u{1B}[2J\u{D}\u{7}\u{202E}x"#), "\(reason)")
    }
}
