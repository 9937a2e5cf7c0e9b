internal import CCRC32C

/// CRC-32C (Castagnoli) of `bytes`, continuing from `seed` (0 to start).
func crc32c(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
    jb_crc32c(seed, bytes.baseAddress, bytes.count)
}

/// The on-disk frame: a 24-byte header, then the payload. All integers little-endian.
///
/// ```
/// offset size field
///      0    4 magic          F7 4A 51 52 ("\xF7JQR") for a record, F7 4A 51 53 ("\xF7JQS") for a skip frame
///      4    4 payloadLength  bytes after the header
///      8    8 sequence       the record's sequence number (0 in a skip frame)
///     16    4 payloadCRC     CRC-32C of the payload (0 in a skip frame)
///     20    4 headerCRC      CRC-32C of bytes 0..<20
///     24    n payload
/// ```
///
/// The header has its own checksum so a reader can trust `payloadLength` before it reads the payload — it can
/// skip records cheaply, tell a frame cut short at the end of a file (torn) from one with bad bytes (corrupt),
/// and find the next good frame after damage by looking for the magic and checking a 20-byte header.
/// A skip frame covers bytes that were copied to the quarantine file, so readers step over them.
enum Frame {
    static let headerSize = 24
    static let recordMagic: UInt32 = 0x5251_4AF7
    static let skipMagic: UInt32 = 0x5351_4AF7
    static let magicFirstByte: UInt8 = 0xF7
    /// No frame is longer than this, whatever the configuration; a larger length is damage.
    static let maxPayloadLength = 1 << 30

    /// Writes a record header for `payload` at `destination`.
    static func writeRecordHeader(
        into destination: UnsafeMutableRawPointer, sequence: UInt64, payload: UnsafeRawBufferPointer
    ) {
        writeHeader(
            into: destination, magic: recordMagic, length: UInt32(payload.count), sequence: sequence,
            payloadCRC: crc32c(payload))
    }

    /// Sets the sequence of the record header at `destination` and recomputes its header checksum.
    static func setSequence(_ sequence: UInt64, header destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: sequence.littleEndian, toByteOffset: 8, as: UInt64.self)
        let headerCRC = crc32c(UnsafeRawBufferPointer(start: destination, count: 20))
        destination.storeBytes(of: headerCRC.littleEndian, toByteOffset: 20, as: UInt32.self)
    }

    static func writeHeader(
        into destination: UnsafeMutableRawPointer, magic: UInt32, length: UInt32, sequence: UInt64,
        payloadCRC: UInt32
    ) {
        destination.storeBytes(of: magic.littleEndian, toByteOffset: 0, as: UInt32.self)
        destination.storeBytes(of: length.littleEndian, toByteOffset: 4, as: UInt32.self)
        destination.storeBytes(of: sequence.littleEndian, toByteOffset: 8, as: UInt64.self)
        destination.storeBytes(of: payloadCRC.littleEndian, toByteOffset: 16, as: UInt32.self)
        let headerCRC = crc32c(UnsafeRawBufferPointer(start: destination, count: 20))
        destination.storeBytes(of: headerCRC.littleEndian, toByteOffset: 20, as: UInt32.self)
    }

    /// A skip-frame header covering `totalLength` bytes (header included); `totalLength` ≥ 24.
    static func skipHeader(totalLength: Int) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: headerSize)
        header.withUnsafeMutableBytes {
            writeHeader(
                into: $0.baseAddress!, magic: skipMagic, length: UInt32(totalLength - headerSize), sequence: 0,
                payloadCRC: 0)
        }
        return header
    }

    enum Decoded: Equatable {
        /// A complete record; the payload is at `offset + 24 ..< offset + 24 + payloadLength`.
        case record(sequence: UInt64, payloadLength: Int)
        /// A complete skip frame of `totalLength` bytes.
        case skip(totalLength: Int)
        /// The bytes end before the frame does: `needed` bytes from the frame's start are required.
        /// With fewer than 24 bytes nothing was checked yet.
        case incomplete(needed: Int)
        /// Bad magic, a header checksum mismatch, an impossible length or a payload checksum mismatch.
        case invalid
    }

    static func load32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    static func load64(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// Decodes the frame that starts at `offset` in `bytes`.
    static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Decoded {
        let available = bytes.count - offset
        guard available >= headerSize else { return .incomplete(needed: headerSize) }
        let magic = load32(bytes, offset)
        guard magic == recordMagic || magic == skipMagic else { return .invalid }
        let headerCRC = load32(bytes, offset + 20)
        guard crc32c(UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + 20])) == headerCRC else {
            return .invalid
        }
        let length = Int(load32(bytes, offset + 4))
        guard length <= maxPayloadLength else { return .invalid }
        guard available >= headerSize + length else { return .incomplete(needed: headerSize + length) }
        if magic == skipMagic { return .skip(totalLength: headerSize + length) }
        let payloadStart = offset + headerSize
        let payload = UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<payloadStart + length])
        guard crc32c(payload) == load32(bytes, offset + 16) else { return .invalid }
        return .record(sequence: load64(bytes, offset + 8), payloadLength: length)
    }
}

/// The segment file that holds records from `firstSequence` on: `00000000000000000001.seg`.
enum SegmentName {
    static let suffix = ".seg"

    static func name(_ firstSequence: UInt64) -> String {
        let digits = String(firstSequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + suffix
    }

    static func parse(_ name: String) -> UInt64? {
        guard name.hasSuffix(suffix) else { return nil }
        let digits = name.dropLast(suffix.count)
        guard digits.count == 20, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(digits)
    }
}
