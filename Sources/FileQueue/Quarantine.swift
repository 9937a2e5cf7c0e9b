import Glibc

/// The `quarantine` file: damaged bytes copied out of segments before repair changes them.
///
/// Append-only sequence of entries, each a 48-byte header then the raw bytes (integers little-endian):
/// ```
/// offset size field
///      0    4 magic             F7 4A 51 51 ("\xF7JQQ")
///      4    4 rawLength
///      8    8 segment           first sequence of the segment (its file name)
///     16    8 offset            byte offset of the bytes in that segment
///     24    8 previousSequence  last good record before them in the segment (0: none)
///     32    8 nextSequence      first good record after them in the segment (0: none)
///     40    4 rawCRC            CRC-32C of the raw bytes
///     44    4 headerCRC         CRC-32C of bytes 0..<44
///     48    n raw bytes
/// ```
/// The entry is synced before the segment is touched, so a crash in between only repeats the copy; an entry
/// equal to one already present (same segment, offset and bytes) is not written twice.
struct QuarantineEntry: Equatable {
    static let magic: UInt32 = 0x5151_4AF7
    static let headerSize = 48

    var segment: UInt64
    var offset: Int64
    var previousSequence: UInt64
    var nextSequence: UInt64
    var rawLength: Int
    var rawCRC: UInt32
    /// Whether the raw bytes still match `rawCRC`.
    var intact = true
}

struct QuarantineFile {
    static let name = "quarantine"

    /// The entries and the offset after the last one (a torn entry at the end is ignored).
    ///
    /// An entry whose header checks out counts, its raw bytes damaged or not: the header alone says where it was
    /// and which sequences it bounds. Bytes that are no entry header (damage inside the file) are stepped over to the
    /// next header that checks out. Before, the first bad entry read as the file's end, and the next append cut every
    /// entry after it: the only copies of those damaged records, and the sequence bounds a tail's reload needs.
    static func read(_ path: String) throws(FileQueueError) -> (entries: [QuarantineEntry], validEnd: Int64) {
        guard let file = try FileDescriptor.openIfExists(path, O_RDONLY) else { return ([], 0) }
        let bytes = try file.readAll(to: try file.size())
        return bytes.withUnsafeBytes { buffer in
            var entries: [QuarantineEntry] = []
            var offset = 0
            var end = 0
            while offset + QuarantineEntry.headerSize <= buffer.count {
                guard isEntryHeader(buffer, offset) else {
                    offset += 1
                    continue
                }
                let header = UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + QuarantineEntry.headerSize])
                let rawLength = Int(Frame.load32(header, 4))
                // Cut short: an entry a crash tore at the end.
                let entryEnd = offset + QuarantineEntry.headerSize + rawLength
                guard entryEnd <= buffer.count else { break }
                let rawCRC = Frame.load32(header, 40)
                let intact =
                    crc32c(UnsafeRawBufferPointer(rebasing: buffer[(offset + QuarantineEntry.headerSize)..<entryEnd]))
                    == rawCRC
                // The last entry with bad raw bytes is torn too (a crash before its sync: the repair it was for has
                // not happened), so the next append writes it again; one inside the file is kept as it is.
                if !intact && entryEnd == buffer.count { break }
                entries.append(
                    QuarantineEntry(
                        segment: Frame.load64(header, 8), offset: Int64(Frame.load64(header, 16)),
                        previousSequence: Frame.load64(header, 24), nextSequence: Frame.load64(header, 32),
                        rawLength: rawLength, rawCRC: rawCRC, intact: intact))
                offset = entryEnd
                end = offset
            }
            return (entries, Int64(end))
        }
    }

    /// True if a checked entry header starts at `offset`.
    private static func isEntryHeader(_ buffer: UnsafeRawBufferPointer, _ offset: Int) -> Bool {
        guard offset + QuarantineEntry.headerSize <= buffer.count else { return false }
        let header = UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + QuarantineEntry.headerSize])
        guard Frame.load32(header, 0) == QuarantineEntry.magic,
            crc32c(UnsafeRawBufferPointer(rebasing: header[0..<44])) == Frame.load32(header, 44)
        else { return false }
        return true
    }

    /// Appends `raw` (from `segment` at `offset`) and syncs, unless the same entry is already there.
    static func append(
        _ raw: [UInt8], segment: UInt64, offset: Int64, previousSequence: UInt64?, nextSequence: UInt64?,
        path: String, sync: Bool
    ) throws(FileQueueError) {
        let rawCRC = raw.withUnsafeBytes { crc32c($0) }
        let (entries, validEnd) = try read(path)
        if entries.contains(where: {
            $0.intact && $0.segment == segment && $0.offset == offset && $0.rawLength == raw.count
                && $0.rawCRC == rawCRC
        }) {
            return
        }
        var entry = [UInt8](repeating: 0, count: QuarantineEntry.headerSize)
        entry.withUnsafeMutableBytes { header in
            header.storeBytes(of: QuarantineEntry.magic.littleEndian, toByteOffset: 0, as: UInt32.self)
            header.storeBytes(of: UInt32(raw.count).littleEndian, toByteOffset: 4, as: UInt32.self)
            header.storeBytes(of: segment.littleEndian, toByteOffset: 8, as: UInt64.self)
            header.storeBytes(of: UInt64(offset).littleEndian, toByteOffset: 16, as: UInt64.self)
            header.storeBytes(of: (previousSequence ?? 0).littleEndian, toByteOffset: 24, as: UInt64.self)
            header.storeBytes(of: (nextSequence ?? 0).littleEndian, toByteOffset: 32, as: UInt64.self)
            header.storeBytes(of: rawCRC.littleEndian, toByteOffset: 40, as: UInt32.self)
            let headerCRC = crc32c(UnsafeRawBufferPointer(rebasing: header[0..<44]))
            header.storeBytes(of: headerCRC.littleEndian, toByteOffset: 44, as: UInt32.self)
        }
        entry += raw
        let file = try FileDescriptor.open(path, O_RDWR | O_CREAT)
        do {
            // A torn entry from an earlier crash is cut off so that the new entry is readable after it.
            if try file.size() != validEnd { try file.truncate(to: validEnd) }
            try file.write(entry, at: validEnd)
            if sync { try file.sync() }
        } catch {
            try? file.truncate(to: validEnd)
            throw error
        }
    }
}
