import Foundation
import JetbridgeModel
import JetbridgeTestKit
import MessagePack
import Testing

@testable import JetbridgeProtocol

// Differential tests: the hand-written RecordDecoder (and IncomingBatch's one-pass records) against the Codable
// MessagePackDecoder (and the reference batch path), on generated records, encoded with every width MessagePack
// allows, and on mutated, truncated and hostile variants of them.

/// Draws for generated cases from the test kit's seeded generator: the same cases on every run.
extension SplitMix {
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
}

// MARK: Generating records

enum Gen {
    static let flights = ["ZA101/2026-11-21", "9W1/2024-02-29", "ZA1234A/2026-12-31", "U2999/2000-02-29"]
    static let badFlights = ["ZA0101/2026-11-21", "za101/2026-11-21", "ZA101/2026-02-30", "ZA101", "99101/2026-11-21"]
    static let seats = ["1A", "17B", "99K", "30F", "5H"]
    static let badSeats = ["17I", "0A", "17b", "100A", "A", "07B", "17L", ""]
    static let names = ["Peanuts", "Chips", "Crème brûlée", "🥜 nuts", String(repeating: "x", count: 64), "Tea"]
    static let devices = ["cart-1", "cart-2", "galley.1_a"]

    static func uuid(_ rng: inout SplitMix) -> UUID {
        var bytes = (rng.next(), rng.next())
        return withUnsafeMutableBytes(of: &bytes) { UUID(uuid: $0.load(as: uuid_t.self)) }
    }

    static func date(_ rng: inout SplitMix) -> Date {
        switch rng.below(5) {
        case 0: Date(timeIntervalSince1970: Double(rng.below(2_000_000_000)))
        case 1: Date(timeIntervalSince1970: Double(rng.below(2_000_000_000)) + Double(rng.below(1000)) / 1000)
        case 2: Date(timeIntervalSince1970: -Double(rng.below(2_000_000_000)))
        case 3: Date(timeIntervalSince1970: 17_179_869_184 + Double(rng.below(1000)))  // past 2^34 s: 96-bit form
        default: Date(timeIntervalSince1970: 0)
        }
    }

    static func order(_ rng: inout SplitMix, device: String) -> Order {
        let lines = (0..<rng.pick([1, 1, 2, 2, 3, 0, 5])).map { index in
            LineItem(
                item: Item(
                    name: names[(index + rng.below(2)) % names.count],
                    unitPrice: rng.pick([0, 1, 200, 65_535, 65_536, Int(Int32.max), Int.max, -1])),
                count: rng.pick([1, 2, 99, 0, 100]))
        }
        return Order(
            id: uuid(&rng), revision: rng.pick([1, 2, 127, 128, 65_536, Int.max, 0, -1, Int.min]),
            flight: try! FlightID(rng.pick(flights)), seat: try! Seat(rng.pick(seats)), lineItems: lines,
            currency: rng.pick(["USD", "USD", "JPY", "usd"]), createdAt: date(&rng),
            device: rng.chance(90) ? device : rng.pick(devices))
    }

    static func scan(_ rng: inout SplitMix, device: String) -> Scan {
        let letters = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefz")
        func letter() -> String { String(letters[rng.below(letters.count)]) }
        let owner = try! Owner(initial: letter(), family: letter() + letter() + letter())
        let tag = LuggageTag(
            id: uuid(&rng), owner: owner, weight: rng.pick([0, 42.5, 42.3, 1000, 0.001, 999.999, 1001, -1, 12]))
        return Scan(
            id: uuid(&rng), tag: tag, point: rng.chance(50) ? .origin : .destination, scannedAt: date(&rng),
            flight: try! FlightID(rng.pick(flights)), device: rng.chance(90) ? device : rng.pick(devices))
    }

    static func record(_ rng: inout SplitMix, device: String = "cart-1") -> Record {
        rng.chance(50) ? .order(order(&rng, device: device)) : .scan(scan(&rng, device: device))
    }

    /// A record as a value tree, to reorder and mutate.
    static func tree(_ record: Record) -> MessagePackValue {
        try! MessagePackDecoder().decode(MessagePackValue.self, from: MessagePackEncoder().encode(record))
    }

    /// Any value, nested at most `depth` levels, for keys a record does not read.
    static func anyValue(_ rng: inout SplitMix, depth: Int = 3) -> MessagePackValue {
        switch rng.below(depth > 0 ? 14 : 11) {
        case 0: return .nil
        case 1: return .bool(rng.chance(50))
        case 2: return .uint(rng.next() >> rng.below(64))
        case 3: return .int(-Int64(rng.below(1 << 40)) - 1)
        case 4: return .float32(Float(rng.below(1000)) / 8)
        case 5: return .float64(rng.pick([0.5, -0.0, .infinity, .nan, 1e300]))
        case 6: return .string(rng.pick(["", "x", "héllo", String(repeating: "é", count: 40), "🥜"]))
        case 7: return .binary(Data((0..<rng.below(40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }))
        case 8:
            return .extension(type: Int8(rng.below(128)), data: Data(repeating: 7, count: rng.pick([1, 2, 3, 16, 20])))
        case 9:
            return .timestamp(MessagePackTimestamp(seconds: Int64(rng.below(1 << 35)) - (1 << 20), nanoseconds: 999))
        case 10: return .string("order")
        case 11: return .array((0..<rng.below(4)).map { _ in anyValue(&rng, depth: depth - 1) })
        case 12: return .map((0..<rng.below(4)).map { i in (.string("k\(i)"), anyValue(&rng, depth: depth - 1)) })
        default: return .map([(.uint(1), anyValue(&rng, depth: depth - 1))])
        }
    }

    static func nested(_ levels: Int) -> MessagePackValue {
        var value = MessagePackValue.uint(1)
        for level in 0..<levels { value = level % 2 == 0 ? .array([value]) : .map([(.string("a"), value)]) }
        return value
    }
}

// MARK: Encoding with every width

/// Writes values in a randomly chosen form among all that hold them, as a reader must accept.
struct AnyWidthWriter {
    var rng: SplitMix
    var bytes: [UInt8] = []

    mutating func put(_ value: UInt64, _ count: Int) {
        for i in (0..<count).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    mutating func write(_ value: MessagePackValue) {
        switch value {
        case .nil: bytes.append(0xc0)
        case .bool(let b): bytes.append(b ? 0xc3 : 0xc2)
        case .uint(let u):
            var forms: [Int] = [0xcf]
            if u < 128 { forms.append(0) }
            if u <= 0xff { forms.append(0xcc) }
            if u <= 0xffff { forms.append(0xcd) }
            if u <= 0xffff_ffff { forms.append(0xce) }
            if u <= 0x7f { forms.append(0xd0) }
            if u <= 0x7fff { forms.append(0xd1) }
            if u <= 0x7fff_ffff { forms.append(0xd2) }
            if u <= UInt64(Int64.max) { forms.append(0xd3) }
            switch rng.pick(forms) {
            case 0: bytes.append(UInt8(u))
            case let form:
                bytes.append(UInt8(form))
                put(u, [0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8][form]!)
            }
        case .int(let i):
            if i >= 0 { return write(.uint(UInt64(i))) }
            var forms: [Int] = [0xd3]
            if i >= -32 { forms.append(0) }
            if i >= -128 { forms.append(0xd0) }
            if i >= -32768 { forms.append(0xd1) }
            if i >= Int64(Int32.min) { forms.append(0xd2) }
            let bits = UInt64(bitPattern: i)
            switch rng.pick(forms) {
            case 0: bytes.append(UInt8(truncatingIfNeeded: bits))
            case let form:
                bytes.append(UInt8(form))
                put(bits, [0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8][form]!)
            }
        case .float32(let f):
            bytes.append(0xca)
            put(UInt64(f.bitPattern), 4)
        case .float64(let d):
            bytes.append(0xcb)
            put(d.bitPattern, 8)
        case .string(let s):
            let utf8 = Array(s.utf8)
            header(utf8.count, fix: utf8.count < 32 ? 0xa0 : nil, [0xd9, 0xda, 0xdb])
            bytes += utf8
        case .binary(let data):
            header(data.count, fix: nil, [0xc4, 0xc5, 0xc6])
            bytes += data
        case .array(let elements):
            header(elements.count, fix: elements.count < 16 ? 0x90 : nil, [0xdc, 0xdd], noEight: true)
            for element in elements { write(element) }
        case .map(let pairs):
            header(pairs.count, fix: pairs.count < 16 ? 0x80 : nil, [0xde, 0xdf], noEight: true)
            for (key, element) in pairs {
                write(key)
                write(element)
            }
        case .extension(let type, let data):
            extensionHeader(data.count, type: type)
            bytes += data
        case .timestamp(let t):
            var forms = [12]
            if t.seconds >= 0 && t.seconds < 1 << 34 { forms.append(8) }
            if t.seconds >= 0 && t.seconds <= 0xffff_ffff && t.nanoseconds == 0 { forms.append(4) }
            let form = rng.pick(forms)
            extensionHeader(form, type: -1)
            switch form {
            case 4: put(UInt64(t.seconds), 4)
            case 8: put(UInt64(t.nanoseconds) << 34 | UInt64(t.seconds), 8)
            default:
                put(UInt64(t.nanoseconds), 4)
                put(UInt64(bitPattern: t.seconds), 8)
            }
        }
    }

    mutating func header(_ count: Int, fix: UInt8?, _ forms: [UInt8], noEight: Bool = false) {
        var choices: [UInt8] = []
        if let fix { choices.append(fix) }
        let sizes: [UInt8: Int] = [
            0xd9: 1, 0xc4: 1, 0xda: 2, 0xc5: 2, 0xdc: 2, 0xde: 2, 0xdb: 4, 0xc6: 4, 0xdd: 4, 0xdf: 4,
        ]
        for form in forms where count < 1 << (8 * sizes[form]!) { choices.append(form) }
        let form = rng.pick(choices)
        if form == fix {
            bytes.append(form | UInt8(count))
        } else {
            bytes.append(form)
            put(UInt64(count), sizes[form]!)
        }
    }

    mutating func extensionHeader(_ count: Int, type: Int8) {
        var choices: [UInt8] = [0xc7, 0xc8, 0xc9]
        if let fixed = [1: UInt8(0xd4), 2: 0xd5, 4: 0xd6, 8: 0xd7, 16: 0xd8][count] { choices.append(fixed) }
        if count > 0xff { choices.removeFirst() }
        let form = rng.pick(choices)
        bytes.append(form)
        switch form {
        case 0xc7: put(UInt64(count), 1)
        case 0xc8: put(UInt64(count), 2)
        case 0xc9: put(UInt64(count), 4)
        default: break
        }
        bytes.append(UInt8(bitPattern: type))
    }

    static func encode(_ value: MessagePackValue, _ rng: inout SplitMix) -> [UInt8] {
        var writer = AnyWidthWriter(rng: SplitMix(state: rng.next()))
        writer.write(value)
        return writer.bytes
    }
}

// MARK: Mutations

enum Mutate {
    static let recordKeys = [
        "type", "id", "revision", "flight", "seat", "lineItems", "currency", "createdAt", "device", "tag", "point",
        "scannedAt", "item", "count", "name", "unitPrice", "owner", "weight", "Type", "ids", "",
    ]

    /// A value that each field might wrongly hold, or rightly in another spelling.
    static func replacement(_ rng: inout SplitMix, for key: String) -> MessagePackValue {
        switch rng.below(4) {
        case 0: return Gen.anyValue(&rng, depth: 2)
        case 1:
            return .string(
                rng.pick(
                    Gen.badFlights + Gen.badSeats + Gen.flights + Gen.seats + [
                        "order", "scan", "origin", "destination", "Origin", "ORDER",
                        "3f2504e0-4f89-41d3-9a0c-0305e82c3301",
                        "3F2504E0-4F89-41D3-9A0C-0305E82C330", "{3F2504E0-4F89-41D3-9A0C-0305E82C3301}",
                        "3F2504E04F8941D39A0C0305E82C3301", " 3F2504E0-4F89-41D3-9A0C-0305E82C3301",
                        "3F2504E0-4F89-41D3-9A0C-0305E82C3301", "3F2504E0+4F89-41D3-9A0C-0305E82C3301",
                        "3F2504E0-4F89-41D3-9A0C-0305E82C330G", "USD", "", "cart-1", "D", "ZMU",
                    ]))
        case 2:
            return rng.pick([
                .uint(UInt64(Int.max) + 1), .uint(.max), .int(.min), .float64(2), .float64(2.5), .float32(3),
                .float64(.nan), .float32(42.3), .float64(1e20), .uint(0), .int(-5), .nil, .bool(true),
            ])
        default:
            return rng.pick([
                .array([.string("D")]), .array([.string("d"), .string("zmu")]), .array([.string("D"), .string("ZM1")]),
                .array([.string("D"), .string("ZMU"), .string("X")]), .array([.string("DD"), .string("ZMU")]),
                .array([.uint(1), .string("ZMU")]), .array([]), .map([]),
                .map([(.string("name"), .string("Tea")), (.string("unitPrice"), .uint(5))]),
                .array([
                    .map([
                        (.string("item"), .map([(.string("name"), .string("Tea")), (.string("unitPrice"), .uint(5))])),
                        (.string("count"), .uint(1)),
                    ])
                ]),
                .map([
                    (.string("id"), .string("F432BDB8-D84F-4461-8362-AFF89F6C493E")),
                    (.string("owner"), .array([.string("D"), .string("ZMU")])), (.string("weight"), .float32(1)),
                ]),
                .timestamp(MessagePackTimestamp(seconds: 5)), .extension(type: 1, data: Data([1, 2, 3, 4])),
            ])
        }
    }

    /// One change to a map somewhere in the tree: drop, duplicate, add, rename or replace an entry, or reorder.
    static func tree(_ value: MessagePackValue, _ rng: inout SplitMix) -> MessagePackValue {
        switch value {
        case .map(var pairs):
            // Sometimes go deeper instead.
            let nested = pairs.indices.filter {
                switch pairs[$0].value {
                case .map, .array: true
                default: false
                }
            }
            if !nested.isEmpty && rng.chance(35) {
                let i = rng.pick(nested)
                pairs[i].value = tree(pairs[i].value, rng: &rng)
                return .map(pairs)
            }
            switch rng.below(8) {
            case 0 where !pairs.isEmpty: pairs.remove(at: rng.below(pairs.count))
            case 1 where !pairs.isEmpty:
                let pair = pairs[rng.below(pairs.count)]
                pairs.insert(
                    (pair.key, rng.chance(50) ? pair.value : replacement(&rng, for: "")), at: rng.below(pairs.count + 1)
                )
            case 2:
                let key: MessagePackValue =
                    rng.chance(80)
                    ? .string(rng.pick(recordKeys + ["extra", "note", "v2"]))
                    : rng.pick([.uint(1), .int(-1), .uint(.max)])
                pairs.insert((key, Gen.anyValue(&rng)), at: rng.below(pairs.count + 1))
            case 3 where !pairs.isEmpty:
                let i = rng.below(pairs.count)
                pairs[i].key = .string(rng.pick(recordKeys))
            case 4 where !pairs.isEmpty:
                let i = rng.below(pairs.count)
                pairs[i].value = replacement(&rng, for: "")
            case 5: pairs.shuffle(using: &rng)
            case 6:
                // Nesting at the limit's edge, under a key nobody reads.
                pairs.append((.string("deep"), Gen.nested(rng.pick([28, 29, 30, 31, 32, 33]))))
            default:
                pairs.append((.string("extra"), Gen.anyValue(&rng)))
            }
            return .map(pairs)
        case .array(var elements) where !elements.isEmpty:
            let i = rng.below(elements.count)
            if rng.chance(70) {
                elements[i] = tree(elements[i], rng: &rng)
            } else if rng.chance(50) {
                elements.remove(at: i)
            } else {
                elements.append(elements[i])
            }
            return .array(elements)
        default:
            return replacement(&rng, for: "")
        }
    }

    static func tree(_ value: MessagePackValue, rng: inout SplitMix) -> MessagePackValue { tree(value, &rng) }

    /// One change to the bytes: a byte set, flipped, inserted or removed, a truncation, or bad UTF-8 in a string.
    static func bytes(_ bytes: [UInt8], _ rng: inout SplitMix) -> [UInt8] {
        var bytes = bytes
        guard !bytes.isEmpty else { return [0xc1] }
        let i = rng.below(bytes.count)
        switch rng.below(7) {
        case 0: bytes[i] = UInt8(truncatingIfNeeded: rng.next())
        case 1: bytes[i] ^= 1 << UInt8(rng.below(8))
        case 2: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: i)
        case 3: bytes.remove(at: i)
        case 4: bytes.removeLast(rng.below(bytes.count) + 1)
        case 5:
            // Bad UTF-8 (a lone continuation byte, an overlong form, a truncated sequence) in a printable run.
            if let j = (i..<bytes.count).first(where: { bytes[$0] >= 0x41 && bytes[$0] <= 0x7a }) {
                bytes[j] = rng.pick([0x80, 0xc0, 0xe2, 0xff, 0xed])
            }
        default: bytes.append(UInt8(truncatingIfNeeded: rng.next()))
        }
        return bytes
    }
}

// MARK: Comparing

func recordDecoder(validating: Bool) -> RecordDecoder {
    var decoder = RecordDecoder()
    decoder.validatesUnreadValues = validating
    return decoder
}

let referenceDecoder: MessagePackDecoder = {
    var decoder = MessagePackDecoder()
    decoder.nestingLimit = WireProtocol.recordNestingLimit
    return decoder
}()

/// Equal values, where a NaN weight equals itself.
func same(_ a: Record, _ b: Record) -> Bool {
    a == b || (try? MessagePackEncoder().encode(a)) == (try? MessagePackEncoder().encode(b))
}

struct Disagreement: CustomStringConvertible {
    var what: String
    var bytes: [UInt8]
    var description: String { "\(what): \(bytes.map { String(format: "%02x", $0) }.joined(separator: " "))" }
}

@Test("a map without 'type' and with an integer key twice: both decoders name the duplicate key first (fuzz find)")
func duplicateKeyBeforeMissingType() {
    // {"AA": 1, 65: 1, 65: 2}: no `type`, and the integer key 65 twice.
    let bytes: [UInt8] = [0x83, 0xA2, 0x41, 0x41, 0x01, 0x41, 0x01, 0x41, 0x02]
    #expect(compareBatch([bytes]) == nil)
    #expect(compare(bytes) == nil)
    #expect(throws: DecodingError.self) { try recordDecoder(validating: false).decode(from: bytes) }
}

/// Decodes `bytes` both ways, as Codable alone and as the batch path checks a record; nil when they agree.
func compare(_ bytes: [UInt8]) -> Disagreement? {
    let fast = Result { try recordDecoder(validating: false).decode(from: bytes) }
    let reference = Result { try referenceDecoder.decode(Record.self, from: bytes) }
    switch (fast, reference) {
    case (.success(let a), .success(let b)) where !same(a, b):
        return Disagreement(what: "different values \(a) vs \(b)", bytes: bytes)
    case (.success(let a), .failure(let error)):
        return Disagreement(what: "fast accepted \(a), Codable refused: \(error)", bytes: bytes)
    case (.failure(let error), .success(let b)):
        return Disagreement(what: "fast refused (\(error)), Codable accepted \(b)", bytes: bytes)
    default: break
    }
    // With every byte checked, against the element check of frame 2 followed by Codable.
    let strict = Result { try recordDecoder(validating: true).decode(from: bytes) }
    let checked =
        (try? MessagePackStructure.arrayElements(
            in: MessagePackStructure.arrayHeader(count: 1) + bytes, nestingLimit: WireProtocol.recordNestingLimit + 1))
        != nil
    switch (strict, checked ? reference : .failure(CancellationError())) {
    case (.success(let a), .success(let b)) where !same(a, b):
        return Disagreement(what: "strict: different values", bytes: bytes)
    case (.success, .failure):
        return Disagreement(what: "strict accepted, the checked reference refused", bytes: bytes)
    case (.failure(let error), .success):
        return Disagreement(what: "strict refused (\(error)), the checked reference accepted", bytes: bytes)
    default: return nil
    }
}

/// Frames `payloads` as a batch from cart-1 and decodes it through both batch paths; nil when they agree exactly.
func compareBatch(_ payloads: [[UInt8]]) -> Disagreement? {
    let outgoing = OutgoingBatch(
        device: "cart-1", records: payloads.enumerated().map { (UInt64($0.offset + 1), Data($0.element)) })
    let frames = try! outgoing.frames()
    let reference = IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1")
    let quick = IncomingBatch.quickRecords(frames[1], header: outgoing.header)
    let all = payloads.flatMap { $0 }
    switch (quick, reference) {
    case (.some(let records), .success(let batch)):
        guard records.count == batch.records.count,
            zip(records, batch.records).allSatisfy({ same($0.record, $1.record) && $0.bytes == $1.bytes })
        else { return Disagreement(what: "batch: different records", bytes: all) }
    case (.some, .failure(let rejection)):
        return Disagreement(what: "batch: quick accepted, reference refused: \(rejection)", bytes: all)
    case (.none, .success):
        return Disagreement(what: "batch: quick refused, reference accepted", bytes: all)
    case (.none, .failure): break
    }
    // And what the aggregator calls answers exactly as the reference does.
    switch (IncomingBatch.decode(frames: frames, authenticatedDevice: "cart-1"), reference) {
    case (.failure(let a), .failure(let b)) where a != b:
        return Disagreement(what: "batch: rejections differ: \(a) vs \(b)", bytes: all)
    case (.success, .failure), (.failure, .success):
        return Disagreement(what: "batch: decode and reference disagree", bytes: all)
    default: return nil
    }
}

// MARK: Tests

@Suite struct RecordDecoderTests {
    @Test func theDocumentedRecordDecodesToTheExample() throws {
        #expect(try RecordDecoder().decode(from: documentedRecord) == .order(exampleOrder))
        #expect(compare(Array(documentedRecord)) == nil)
    }

    @Test func generatedRecordsInEveryWidthDecodeAsCodableDecodesThem() {
        var rng = SplitMix(state: 1)
        var failures: [Disagreement] = []
        for _ in 0..<600 {
            let record = Gen.record(&rng)
            var tree = Gen.tree(record)
            if rng.chance(30), case .map(var pairs) = tree {
                pairs.shuffle(using: &rng)
                tree = .map(pairs)
            }
            let bytes = AnyWidthWriter.encode(tree, &rng)
            #expect((try? RecordDecoder().decode(from: bytes)).map { same($0, record) } == true)
            if let failure = compare(bytes) { failures.append(failure) }
        }
        #expect(
            failures.isEmpty,
            "\(failures.count) disagreements, first: \(failures.first.map(String.init(describing:)) ?? "")")
    }

    @Test func mutatedRecordsAreAcceptedAndRefusedAsCodableDoes() {
        var rng = SplitMix(state: 2)
        var failures: [Disagreement] = []
        var accepted = 0
        var cases = 0
        for _ in 0..<1_500 {
            var tree = Gen.tree(Gen.record(&rng))
            for _ in 0...rng.below(3) { tree = Mutate.tree(tree, &rng) }
            let bytes = AnyWidthWriter.encode(tree, &rng)
            cases += 1
            if let failure = compare(bytes) { failures.append(failure) }
            if (try? referenceDecoder.decode(Record.self, from: bytes)) != nil { accepted += 1 }
        }
        #expect(
            failures.isEmpty,
            "\(failures.count) of \(cases) disagree, first: \(failures.first.map(String.init(describing:)) ?? "")")
        // Both outcomes are well represented, or the comparison proves little.
        #expect(accepted > cases / 5 && accepted < cases * 4 / 5, "\(accepted) of \(cases) accepted")
    }

    @Test func corruptedBytesAreAcceptedAndRefusedAsCodableDoes() {
        var rng = SplitMix(state: 3)
        var failures: [Disagreement] = []
        var cases = 0
        for _ in 0..<400 {
            var tree = Gen.tree(Gen.record(&rng))
            // Half carry keys no record reads, so that corruption lands there too.
            if rng.chance(50) { tree = Mutate.tree(tree, &rng) }
            let valid = AnyWidthWriter.encode(tree, &rng)
            for _ in 0..<12 {
                var bytes = valid
                for _ in 0...rng.below(2) { bytes = Mutate.bytes(bytes, &rng) }
                cases += 1
                if let failure = compare(bytes) { failures.append(failure) }
            }
            // Every truncation.
            for length in stride(from: 0, to: valid.count, by: 7) {
                cases += 1
                if let failure = compare(Array(valid[..<length])) { failures.append(failure) }
            }
        }
        #expect(
            failures.isEmpty,
            "\(failures.count) of \(cases) disagree, first: \(failures.first.map(String.init(describing:)) ?? "")")
    }

    /// The agent's archive reads only what identifies a record (`RecordCoding.Stream.identity`): for every record the
    /// full decoder accepts (generated in any width and key order, mutated, corrupted) it answers that record's
    /// identity; for the rest it may throw or answer, and never traps. Records of one stream share a flight check.
    @Test func identityIsTheDecodedRecordsWheneverTheRecordDecodes() {
        var rng = SplitMix(state: 4)
        var stream = RecordCoding.Stream()
        var wrong: [String] = []
        var decoded = 0
        var refusedBoth = 0
        func check(_ bytes: [UInt8]) {
            let identity = try? stream.identity(bytes)
            guard let record = try? RecordDecoder().decode(from: bytes) else {
                if identity == nil { refusedBoth += 1 }
                return
            }
            decoded += 1
            if identity != RecordIdentity(record) {
                wrong.append("\(bytes.count) bytes: \(String(describing: identity))")
            }
        }
        for round in 0..<1_200 {
            var tree = Gen.tree(Gen.record(&rng))
            if round % 3 == 1, case .map(var pairs) = tree {
                pairs.shuffle(using: &rng)
                tree = .map(pairs)
            }
            if round % 3 == 2 { tree = Mutate.tree(tree, &rng) }
            let bytes = AnyWidthWriter.encode(tree, &rng)
            check(bytes)
            check(Mutate.bytes(bytes, &rng))
            check(Array(bytes[..<rng.below(bytes.count)]))
        }
        let differing = wrong.count
        #expect(differing == 0, "identities that differ from the decoded record's, first: \(wrong.first ?? "")")
        #expect(decoded > 1_000 && refusedBoth > 1_000, "\(decoded) decoded, \(refusedBoth) refused by both")
        // An order without its revision, or a record without its id or flight, has no identity.
        for key in ["id", "flight", "revision"] {
            guard case .map(let pairs) = Gen.tree(.order(Gen.order(&rng, device: "cart-1"))) else { continue }
            let without = MessagePackValue.map(
                pairs.filter {
                    guard case .string(let name) = $0.key else { return true }
                    return name != key
                })
            #expect(throws: DecodingError.self, "without \(key)") {
                try stream.identity(AnyWidthWriter.encode(without, &rng))
            }
        }
    }

    @Test func badStringsAndTimestampsUnderUnreadKeysAreRefusedOnTheBatchPath() {
        var rng = SplitMix(state: 7)
        var failures: [Disagreement] = []
        var refused = 0
        let marker = Array("MARKER".utf8)
        for round in 0..<400 {
            guard case .map(var pairs) = Gen.tree(Gen.record(&rng)) else { continue }
            var unread: MessagePackValue =
                round % 2 == 0
                ? .string("MARKER") : .timestamp(MessagePackTimestamp(seconds: 1 << 35, nanoseconds: 999_999_999))  // 96-bit form
            for _ in 0..<rng.below(3) {
                unread = rng.chance(50) ? .array([.nil, unread]) : .map([(.string("k"), unread)])
            }
            pairs.insert((.string("note"), unread), at: rng.below(pairs.count + 1))
            var bytes = AnyWidthWriter.encode(.map(pairs), &rng)
            if round % 2 == 0 {
                // Bad UTF-8 in the string.
                if let i = (0...(bytes.count - marker.count)).first(where: { Array(bytes[$0..<($0 + 6)]) == marker }) {
                    bytes[i + rng.below(6)] = rng.pick([0x80, 0xc0, 0xff, 0xed, 0xf8])
                }
            } else if let i = (0...(bytes.count - 4)).first(where: { bytes[$0] == 0x3b && bytes[$0 + 1] == 0x9a }) {
                // Nanoseconds 999,999,999 (0x3b9ac9ff) become 1,000,000,000 or more.
                bytes[i] = rng.pick([0x3b, 0x3c, 0xff])
                bytes[i + 2] = 0xca
            }
            if let failure = compare(bytes) { failures.append(failure) }
            if let failure = compareBatch([bytes]) { failures.append(failure) }
            if (try? recordDecoder(validating: true).decode(from: bytes)) == nil { refused += 1 }
        }
        #expect(
            failures.isEmpty, "\(failures.count) disagree, first: \(failures.first.map(String.init(describing:)) ?? "")"
        )
        #expect(refused > 380, "only \(refused) of 400 refused: the corruption missed")
    }

    @Test func batchesOfMixedRecordsDecodeAsTheReferencePathDecodesThem() {
        var rng = SplitMix(state: 4)
        var failures: [Disagreement] = []
        for round in 0..<300 {
            var payloads = (0..<rng.pick([1, 2, 5, 20])).map { _ in
                AnyWidthWriter.encode(Gen.tree(Gen.record(&rng)), &rng)
            }
            // Two in three batches carry one bad record somewhere; the rest are as generated (mostly valid).
            if round % 3 != 0 {
                let i = rng.below(payloads.count)
                payloads[i] =
                    rng.chance(50)
                    ? Mutate.bytes(payloads[i], &rng)
                    : AnyWidthWriter.encode(Mutate.tree(Gen.tree(Gen.record(&rng)), &rng), &rng)
            }
            if let failure = compareBatch(payloads) { failures.append(failure) }
        }
        #expect(
            failures.isEmpty, "\(failures.count) disagree, first: \(failures.first.map(String.init(describing:)) ?? "")"
        )
    }

    @Test func aBatchWithTrailingBytesOrAShortArrayIsRefusedAsBefore() {
        var rng = SplitMix(state: 5)
        let records = (0..<3).map { _ in Array(try! MessagePackEncoder().encode(Gen.record(&rng))) }
        for body in [
            [0x93] + records.joined() + [0xc0], [0x94] + records.joined(), [0x92] + records.joined(),
            [0xdc, 0x00, 0x03] + records.joined(), [0x93] + records[0] + records[1],
        ] {
            let header = BatchHeader(
                device: "cart-1", first: 1, last: 3, count: 3, crc32c: Checksum.crc32c(Data(body)))
            let frames = [try! MessagePackEncoder().encode(header), Data(body)]
            let reference = IncomingBatch.referenceDecode(frames: frames, authenticatedDevice: "cart-1")
            let quick = IncomingBatch.quickRecords(Data(body), header: header)
            #expect((quick != nil) == ((try? reference.get()) != nil))
        }
    }

    @Test func recordBytesAreSlicesOfFrameTwo() throws {
        let payloads = [encoded(.order(exampleOrder)), encoded(.scan(scan()))]
        let frames = try batch(payloads).frames()
        let incoming = try decode(frames).get()
        #expect(incoming.records.map(\.bytes) == payloads)
        #expect(incoming.records[1].bytes.startIndex == 1 + payloads[0].count)
    }

    @Test func errorsNameTheFieldAndTheOffset() throws {
        func failure(_ tree: MessagePackValue) -> ValidationError? {
            do {
                _ = try RecordDecoder().decode(from: MessagePackEncoder().encode(tree))
                return nil
            } catch let error as DecodingError {
                return ValidationError(error)
            } catch {
                return nil
            }
        }
        guard case .map(let pairs) = Gen.tree(.order(exampleOrder)) else { return }
        func with(_ key: String, _ value: MessagePackValue) -> MessagePackValue {
            .map(pairs.map { $0.key == .string(key) ? ($0.key, value) : $0 })
        }
        #expect(failure(with("seat", .string("17I")))?.code == .invalidSeat)
        #expect(failure(with("seat", .string("17I")))?.path == "seat")
        #expect(failure(with("id", .string("nope")))?.code == .invalidUUID)
        #expect(failure(with("revision", .uint(.max)))?.message.contains("offset") == true)
        #expect(failure(with("revision", .uint(.max)))?.path == "revision")
        let badLine = MessagePackValue.array([
            .map([
                (.string("item"), .map([(.string("name"), .string("Tea")), (.string("unitPrice"), .string("5"))])),
                (.string("count"), .uint(1)),
            ])
        ])
        #expect(failure(with("lineItems", badLine))?.path == "lineItems[0].item.unitPrice")
        #expect(failure(.map(pairs.filter { $0.key != .string("currency") }))?.code == .missingField)
        #expect(
            failure(.map(pairs + [(.string("seat"), .string("1A"))]))?.message.contains("Duplicate key \"seat\"")
                == true)
        #expect(failure(with("type", .string("invoice")))?.code == .invalidRecordType)
    }

    @Test func fieldMasksNameTheirFields() {
        func mask(_ fields: [Field]) -> UInt32 { fields.reduce(0) { $0 | $1.bit } }
        #expect(
            Field.orderFields
                == mask([.type, .id, .revision, .flight, .seat, .lineItems, .currency, .createdAt, .device]))
        #expect(Field.scanFields == mask([.type, .id, .tag, .point, .scannedAt, .flight, .device]))
        #expect(Field.lineItemFields == mask([.item, .count]))
        #expect(Field.itemFields == mask([.name, .unitPrice]))
        #expect(Field.tagFields == mask([.id, .owner, .weight]))
        for field in Field.allCases {
            var name = Array(field.name.description.utf8)
            #expect(name.withUnsafeMutableBufferPointer { Field(UnsafeBufferPointer($0)) } == field)
        }
    }

    /// Both record paths take the canonical form only (docs/PROTOCOL.md), and read it as Foundation does; Foundation
    /// on Linux also reads some other spellings (sscanf-style), which must not become a second name for one id.
    @Test func uuidTextMustBeCanonicalOnBothPaths() {
        var rng = SplitMix(state: 6)
        let alphabet = Array("0123456789abcdefABCDEFgG-{} \u{e9}")
        var lenient = 0
        for _ in 0..<20_000 {
            var text = Array(UUID().uuidString)
            if rng.chance(50) { text = Array(String(text).lowercased()) }
            for _ in 0..<rng.below(3) {
                let i = rng.below(text.count)
                switch rng.below(3) {
                case 0: text[i] = alphabet[rng.below(alphabet.count)]
                case 1: text.remove(at: i)
                default: text.insert(alphabet[rng.below(alphabet.count)], at: i)
                }
            }
            let string = String(text)
            var utf8 = Array(string.utf8)
            let fast = utf8.withUnsafeMutableBufferPointer { MessagePackReader.uuid(UnsafeBufferPointer($0)) }
            let model = UUID(canonical: string)
            let foundation = UUID(uuidString: string)
            #expect(fast == model, "\(string)")
            #expect(model == nil || model == foundation, "\(string)")
            if model == nil && foundation != nil { lenient += 1 }
        }
        // The mutations do produce text that only the lenient parser takes, so the refusals above were exercised.
        #expect(lenient > 0)
        #expect(UUID(canonical: " 3F2504E0-4F89-41D3-9A0C-0305E82C3301") == nil)
        #expect(UUID(canonical: "3f2504e0-4f89-41d3-9a0c-0305e82c3301") == Order.example.id)
    }
}
