import SystemSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random bits for bulk scans' ids, drawn from the system's CSPRNG many at a time.
///
/// Foundation's `UUID()` on Linux opened, read and closed `/dev/urandom` for every id: three system calls per scan,
/// a large share of the bulk scan's system time. This reads 64 KiB (8,192 draws, 4,096 ids) from `/dev/urandom` at a
/// time. Ids are `UUID(timeOrdered:using:)` (JetbridgeModel): the scan's time and two draws.
struct BufferedRandom: RandomNumberGenerator {
    private var buffer = [UInt64](repeating: 0, count: 8192)
    private var position = 8192

    mutating func next() -> UInt64 {
        if position == buffer.count {
            refill()
            position = 0
        }
        defer { position += 1 }
        return buffer[position]
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
