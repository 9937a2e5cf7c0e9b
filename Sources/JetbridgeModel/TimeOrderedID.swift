#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

extension UUID {
    /// The largest time a version-7 id can carry: 2^48 − 1 milliseconds after 1970 (the year 10889).
    static let maxTimeOrderedMilliseconds: UInt64 = 1 << 48 - 1

    /// A time-ordered id (RFC 9562, version 7) for a record captured at `time`: the milliseconds since 1970 in the
    /// first 48 bits (big-endian), then the version (7), 12 random bits, the variant (`10`) and 62 random bits.
    ///
    /// The ground stores ids as their 16 bytes, whose order is the order of the canonical text, so ids minted this way
    /// sort by capture time: a sync's new ids land at the recent end of the stores' id indexes instead of on random
    /// pages of the whole index (docs/PROTOCOL.md, "Record ids"). 74 random bits keep ids of the same millisecond apart
    /// (two ids of one millisecond collide with odds of 1 in 2^74). The ground accepts any UUID; this is how the
    /// device mints them.
    ///
    /// - Parameters:
    ///   - time: The record's capture time, to the nearest millisecond; before 1970 (a clock never set) counts as 1970, and past the year 10889
    ///     as its last millisecond.
    ///   - generator: The random bits' source; two `next()` draws.
    public init<Generator: RandomNumberGenerator>(timeOrdered time: Date, using generator: inout Generator) {
        // To the nearest millisecond: a time the device cut to whole milliseconds (`createdAt`, `scannedAt`) is a binary
        // fraction, and its product by 1000 may fall just below the whole number.
        let milliseconds = (time.timeIntervalSince1970 * 1000).rounded()
        let stamp: UInt64
        if milliseconds.isNaN || milliseconds <= 0 {
            stamp = 0
        } else if milliseconds >= Double(Self.maxTimeOrderedMilliseconds) {
            stamp = Self.maxTimeOrderedMilliseconds
        } else {
            stamp = UInt64(milliseconds)
        }
        let high = generator.next()
        let low = generator.next()
        var bytes = (stamp << 16 | high & 0x0FFF | 0x7000).bigEndian
        var tail = (low & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000).bigEndian
        var raw: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &raw) { target in
            withUnsafeBytes(of: &bytes) { target.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 8) }
            withUnsafeBytes(of: &tail) { (target.baseAddress! + 8).copyMemory(from: $0.baseAddress!, byteCount: 8) }
        }
        self.init(uuid: raw)
    }

    /// The milliseconds since 1970 a version-7 id carries, or `nil` for an id of another version.
    public var timeOrderedMilliseconds: UInt64? {
        guard uuid.6 >> 4 == 7 else { return nil }
        return withUnsafeBytes(of: uuid) { raw in
            raw.prefix(6).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
    }
}
