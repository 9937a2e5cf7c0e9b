import FileQueue
import Foundation
import Testing

@Suite struct CRC32CTests {
    @Test func standardCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.portableChecksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
    }

    @Test func knownVectors() {
        // RFC 3720 (iSCSI) B.4 test vectors.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
    }

    @Test func chainingEqualsWhole() {
        let bytes = Array("The quick brown fox jumps over the lazy dog".utf8)
        for split in 0...bytes.count {
            let first = CRC32C.checksum(Array(bytes[..<split]))
            #expect(CRC32C.checksum(Array(bytes[split...]), seed: first) == CRC32C.checksum(bytes))
        }
    }

    @Test func hardwareMatchesTableAtEveryLengthAndAlignment() {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<600).map { _ in UInt8.random(in: 0...255, using: &generator) }
        for start in 0..<9 {
            for length in stride(from: 0, through: 500, by: 7) {
                let slice = Array(bytes[start..<start + length])
                #expect(CRC32C.checksum(slice) == CRC32C.portableChecksum(slice))
            }
        }
    }
}
