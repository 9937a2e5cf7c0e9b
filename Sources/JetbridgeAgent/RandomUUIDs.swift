import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random (version 4) UUIDs for bulk scans, drawn from the system's CSPRNG many at a time.
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for every id: three system calls per scan,
/// a large share of the bulk scan's system time. This reads 64 KiB (4,096 ids) from `/dev/urandom` at a time.
struct RandomUUIDs {
    private var buffer = [UInt8](repeating: 0, count: 16 * 4096)
    private var next = 16 * 4096

    mutating func make() -> UUID {
        if next == buffer.count {
            refill()
            next = 0
        }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { target in
            buffer.withUnsafeBytes { source in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[next..<next + 16]))
            }
            target[6] = (target[6] & 0x0F) | 0x40  // version 4
            target[8] = (target[8] & 0x3F) | 0x80  // RFC 4122 variant
        }
        next += 16
        return UUID(uuid: bytes)
    }

    private mutating func refill() {
        buffer.withUnsafeMutableBytes { raw in
            var filled = 0
            let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                filled = (try? FileSystem.readFully(fd, into: raw)) ?? 0
                close(fd)
            }
            // Without /dev/urandom (a chroot), the standard library's generator (getrandom) fills the rest.
            var generator = SystemRandomNumberGenerator()
            for index in filled..<raw.count { raw[index] = generator.next() }
        }
    }
}
