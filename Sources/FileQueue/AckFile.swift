import Glibc
import SystemSupport

/// The `ack` file: the consumer's position, replaced atomically.
///
/// ```
/// offset size field
///      0    4 magic                F7 4A 51 41 ("\xF7JQA")
///      4    4 version              1
///      8    8 acknowledgedThrough  every record with a sequence ≤ this is acknowledged
///     16    4 crc                  CRC-32C of bytes 0..<16
///     20    …  zero padding (the file is written as 4096 bytes, see below)
/// ```
///
/// A new position is written into `ack.spare`, synced, renamed over `ack`, and the directory is synced.
/// `ack.spare` is created with 4096 zero bytes *after* each acknowledgement, while there is room, and is
/// overwritten in place: so on a full disk the consumer can still acknowledge — which is what frees space —
/// without allocating a block. A crash before the rename leaves the old position; after it, the new one.
extension FileQueue {
    /// The on-disk format version (docs/FILEQUEUE.md), written in the `ack` file; `--version` shows it.
    public static let formatVersion: UInt32 = 1
}

enum AckFile {
    static let name = "ack"
    static let spareName = "ack.spare"
    static let magic: UInt32 = 0x4151_4AF7
    static let size = 20
    static let spareSize = 4096

    enum Contents: Equatable {
        case missing
        case position(UInt64)
        case damaged
    }

    static func read(directory: String) throws(FileQueueError) -> Contents {
        let path = directory + "/" + name
        guard let file = try FileDescriptor.openIfExists(path, O_RDONLY) else { return .missing }
        let bytes = try file.readAll(to: Int64(size))
        guard bytes.count == size else { return .damaged }
        return bytes.withUnsafeBytes { buffer in
            guard Frame.load32(buffer, 0) == magic, Frame.load32(buffer, 4) == FileQueue.formatVersion,
                crc32c(UnsafeRawBufferPointer(rebasing: buffer[0..<16])) == Frame.load32(buffer, 16)
            else { return .damaged }
            return .position(Frame.load64(buffer, 8))
        }
    }

    static func encode(_ position: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size)
        bytes.withUnsafeMutableBytes { buffer in
            buffer.storeBytes(of: magic.littleEndian, toByteOffset: 0, as: UInt32.self)
            buffer.storeBytes(of: FileQueue.formatVersion.littleEndian, toByteOffset: 4, as: UInt32.self)
            buffer.storeBytes(of: position.littleEndian, toByteOffset: 8, as: UInt64.self)
            let crc = crc32c(UnsafeRawBufferPointer(rebasing: buffer[0..<16]))
            buffer.storeBytes(of: crc.littleEndian, toByteOffset: 16, as: UInt32.self)
        }
        return bytes
    }

    /// Persists `position`: spare written and synced, renamed over `ack`, directory synced.
    static func write(
        _ position: UInt64, directory: FileDescriptor, sync: Bool, hook: (String) -> Void
    ) throws(FileQueueError) {
        let sparePath = directory.path + "/" + spareName
        let spare = try FileDescriptor.open(sparePath, O_RDWR | O_CREAT)
        try spare.write(encode(position), at: 0)
        if sync { try spare.sync() }
        hook("ack.written")
        try io(FileSystem.rename(sparePath, to: directory.path + "/" + name))
        hook("ack.renamed")
        if sync { try directory.sync() }
    }

    /// Makes the next spare, best effort: failing here (a full disk) only means the next acknowledgement
    /// has to allocate its block.
    static func prepareSpare(directory: String) {
        let path = directory + "/" + spareName
        guard !FileSystem.exists(path) else { return }
        guard let spare = try? FileDescriptor.open(path + ".new", O_RDWR | O_CREAT | O_TRUNC) else { return }
        let zeros = [UInt8](repeating: 0, count: spareSize)
        do {
            try spare.write(zeros, at: 0)
            try spare.sync()
            try io(FileSystem.rename(path + ".new", to: path))
        } catch {
            try? FileSystem.unlinkIfExists(path + ".new")
        }
    }
}
