import Foundation
import MessagePack
import Testing

/// Values in every encoding worth trying, plus random bytes: each `read` must agree with `MessagePackDecoder`
/// decoding the same type from the same bytes (both fail, or both give the same value).
private let interesting: [[UInt8]] = {
    var cases: [[UInt8]] = [
        [], [0xc0], [0xc1], [0xc2], [0xc3], [0x00], [0x7f], [0xff], [0xe0], [0xcc, 0xff], [0xcd, 0x01, 0x00],
        [0xce, 0xff, 0xff, 0xff, 0xff], [0xcf, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], [0xd0, 0x80], [0xd1, 0x80, 0x00],
        [0xd2, 0x80, 0, 0, 0], [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0], [0xca, 0x40, 0x00, 0x00, 0x00],
        [0xca, 0x40, 0x20, 0x00, 0x00], [0xcb, 0x40, 0x00, 0, 0, 0, 0, 0, 0], [0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0],
        [0xcb, 0x43, 0xe0, 0, 0, 0, 0, 0, 0], [0xca, 0x7f, 0xc0, 0, 0], [0xcc], [0xcd, 0x01], [0xd3, 0, 0],
        [0xa3, 0x61, 0x62, 0x63], [0xa3, 0x61, 0x62], [0xa2, 0xc3, 0xa9], [0xa2, 0xc3, 0x28], [0xa1, 0xff],
        [0xd9, 0x02, 0x68, 0x69], [0xda, 0x00, 0x01, 0x41], [0xdb, 0, 0, 0, 1, 0x41], [0xdb, 0xff, 0xff, 0xff, 0xff],
        [0xd6, 0xff, 0, 0, 0, 1], [0xd7, 0xff, 0, 0, 0, 4, 0, 0, 0, 1],
        [0xd7, 0xff, 0xff, 0xff, 0xff, 0xfc, 0, 0, 0, 0],
        [0xc7, 0x0c, 0xff, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        [0xc7, 0x0c, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0, 0, 0, 0], [0xd6, 0x01, 0, 0, 0, 1],
        [0xd5, 0xff, 0, 0], [0xca, 0xff, 0xaf, 0x8a, 0x1b], [0xcb, 0xff, 0xf1, 0x43, 0x60, 0, 0, 0, 1],
        [0xc7, 0x05, 0xff, 0, 0, 0, 0, 0], [0x90], [0x80], [0xc4, 0x01, 0x00],
        Array("\u{a4}".utf8), [0xa4] + Array("\u{e9}t\u{e9}".utf8).prefix(4),
    ]
    let uuid = Array("3F2504E0-4F89-41D3-9A0C-0305E82C3301".utf8)
    cases.append([0xd9, 36] + uuid)
    cases.append([0xd9, 36] + Array("3f2504e0-4f89-41d3-9a0c-0305e82c3301".utf8))
    cases.append([0xd9, 36] + uuid.prefix(35) + [0x47])
    cases.append([0xd9, 36] + uuid.prefix(8) + [0x2b] + uuid.dropFirst(9))
    cases.append([0xd9, 35] + uuid.prefix(35))
    var rng = SystemRandomNumberGenerator()
    for _ in 0..<3_000 {
        let first = UInt8.random(in: 0...255, using: &rng)
        cases.append(
            [first] + (0..<Int.random(in: 0...12, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
    }
    return cases
}()

/// Reads `bytes` with `read`, then checks the end, as `decode` checks for trailing bytes.
private func readWhole<T>(_ bytes: [UInt8], _ read: (inout MessagePackReader) throws -> T) -> T? {
    try? MessagePackReader.withReader(bytes) { reader in
        let value = try read(&reader)
        try reader.expectEnd()
        return value
    }
}

/// Whether `value` is a floating-point NaN.
private func isNaN(_ value: Any?) -> Bool {
    (value as? Double)?.isNaN == true || (value as? Float)?.isNaN == true
}

private func agree<T: Decodable & Equatable>(
    _ type: T.Type, _ read: (inout MessagePackReader) throws -> T, sourceLocation: SourceLocation = #_sourceLocation
) {
    for bytes in interesting {
        let fast = readWhole(bytes, read)
        let codable = try? MessagePackDecoder().decode(T.self, from: bytes)
        // NaN is not equal to itself; any NaN, signed or with a payload (random bytes give those: `-nan(0x…)`,
        // `-snan(…)`, which the text comparison here missed), counts as the same when both readers give one.
        let same = fast == codable || (isNaN(fast) && isNaN(codable))
        #expect(
            same, "\(T.self) from \(bytes): reader \(String(describing: fast)), decoder \(String(describing: codable))",
            sourceLocation: sourceLocation)
    }
}

@Suite struct MessagePackReaderTests {
    @Test func scalarsAreReadAsTheDecoderReadsThem() {
        agree(Int.self) { try $0.read(Int.self) }
        agree(Int8.self) { try $0.read(Int8.self) }
        agree(Int16.self) { try $0.read(Int16.self) }
        agree(Int32.self) { try $0.read(Int32.self) }
        agree(Int64.self) { try $0.read(Int64.self) }
        agree(UInt.self) { try $0.read(UInt.self) }
        agree(UInt8.self) { try $0.read(UInt8.self) }
        agree(UInt16.self) { try $0.read(UInt16.self) }
        agree(UInt32.self) { try $0.read(UInt32.self) }
        agree(UInt64.self) { try $0.read(UInt64.self) }
        agree(Bool.self) { try $0.read(Bool.self) }
        agree(Double.self) { try $0.read(Double.self) }
        agree(Float.self) { try $0.read(Float.self) }
        agree(String.self) { try $0.read(String.self) }
        agree(Date.self) { try $0.read(Date.self) }
        agree(MessagePackTimestamp.self) { try $0.read(MessagePackTimestamp.self) }
        agree(UUID.self) { try $0.read(UUID.self) }
        agree(String.self) { reader in
            let bytes = try reader.readStringBytes()
            return reader.string(bytes)
        }
    }

    @Test func skippingChecksWhatDecodingAnyValueChecks() {
        for bytes in interesting {
            let skipped = readWhole(bytes) { try $0.skipValue(levels: 4) } != nil
            let decoded = (try? MessagePackDecoder().decode(MessagePackValue.self, from: bytes)) != nil
            #expect(skipped == decoded, "\(bytes)")
        }
        // Structure only: bad UTF-8 passes, a truncated string does not.
        #expect(readWhole([0xa1, 0xff]) { try $0.skipValue(levels: 0, validate: false) } != nil)
        #expect(readWhole([0xa2, 0x41]) { try $0.skipValue(levels: 0, validate: false) } == nil)
        // Nesting: [[1]] needs two levels.
        #expect(readWhole([0x91, 0x91, 0x01]) { try $0.skipValue(levels: 2) } != nil)
        #expect(readWhole([0x91, 0x91, 0x01]) { try $0.skipValue(levels: 1) } == nil)
    }

    @Test func mapsAreReadKeyByKey() throws {
        // {"x": 1, 2: "y", "z": [true]}
        let bytes: [UInt8] = [0x83, 0xa1, 0x78, 0x01, 0x02, 0xa1, 0x79, 0xa1, 0x7a, 0x91, 0xc3]
        let result = try MessagePackReader.withReader(bytes) { reader in
            var x = 0
            var y = ""
            var z = false
            for _ in 0..<(try reader.readMapHeader()) {
                switch try reader.readKey() {
                case .string(let key) where reader.bytes(of: key, equal: "x"): x = try reader.read(Int.self)
                case .integer(2): y = try reader.read(String.self)
                case .string(let key) where reader.bytes(of: key, equal: "z"):
                    #expect(try reader.readArrayHeader() == 1)
                    z = try reader.read(Bool.self)
                default: try reader.skipValue(levels: 3)
                }
            }
            try reader.checkUniqueKeys(inMapAt: 0)
            try reader.expectEnd()
            return (x, y, z)
        }
        #expect(result == (1, "y", true))
    }

    @Test func keysMustBeStringsOrIntegersAndAppearOnce() {
        func key(_ bytes: [UInt8]) -> DecodingError? {
            do {
                _ = try MessagePackReader.withReader(bytes) { try $0.readKey() }
                return nil
            } catch let error as DecodingError {
                return error
            } catch {
                return nil
            }
        }
        #expect(key([0xc3])?.isTypeMismatch == true)
        #expect(key([0xca, 0, 0, 0, 0])?.message.contains("string or integer map key at offset 0") == true)
        #expect(key([0xa1, 0xff])?.message.contains("Invalid UTF-8") == true)
        #expect(key([0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) != nil)

        func unique(_ bytes: [UInt8]) -> Bool {
            (try? MessagePackReader.withReader(bytes) { try $0.checkUniqueKeys(inMapAt: 0) }) != nil
        }
        #expect(unique([0x82, 0xa1, 0x61, 0x01, 0xa1, 0x62, 0x02]))
        #expect(!unique([0x82, 0xa1, 0x61, 0x01, 0xa1, 0x61, 0x02]))
        #expect(!unique([0x82, 0x01, 0x01, 0xcc, 0x01, 0x02]))
        #expect(unique([0x82, 0x01, 0x01, 0xa1, 0x31, 0x02]))
        // A large map is checked by sorting, so a duplicate far apart is found too.
        var large: [UInt8] = [0xde, 0x00, 0x40]
        for i in 0..<64 { large += [0xa2, 0x6b, UInt8(i == 63 ? 0x20 : 0x20 + i), 0xc0] }
        #expect(!unique(large))
        large[large.count - 2] = 0x7f
        #expect(unique(large))
    }

    @Test func errorsNameTheOffsetAndThePathGiven() {
        do {
            _ = try MessagePackReader.withReader([0x91, 0xa1, 0x41, 0xcd, 0x01, 0x00] as [UInt8]) { reader in
                _ = try reader.readArrayHeader()
                _ = try reader.read(String.self)
                return try reader.read(UInt8.self, codingPath: [TestKey(stringValue: "count")])
            }
            Issue.record("read 256 as UInt8")
        } catch let error as DecodingError {
            #expect(error.message.contains("offset 3"))
            #expect(error.path == ["count"])
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func aSubReaderCountsFromItsStart() throws {
        let bytes: [UInt8] = [0x92, 0x01, 0xa1, 0xff]
        try MessagePackReader.withReader(bytes) { reader in
            let inner = reader.reader(for: 2..<4)
            var copy = inner
            #expect(copy.offset == 0 && copy.count == 2)
            #expect(throws: DecodingError.self) { try copy.read(String.self) }
            try copy.skipValue(levels: 0, validate: false)
            #expect(copy.isAtEnd)
        }
    }
}

private struct TestKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}
