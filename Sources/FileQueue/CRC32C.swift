internal import CCRC32C

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// CRC-32C (Castagnoli), the checksum of queue frames; public so the tests can compare the two implementations and
/// the benchmark can say which one runs. The wire protocol does not use this type: JetbridgeProtocol calls the same
/// C primitive (CCRC32C) through its own `Checksum`.
///
/// Uses the SSE4.2 `crc32` instruction when the CPU has it and a slicing-by-8 table otherwise; both give the
/// same values (`"123456789"` → `0xE3069283`).
public enum CRC32C: Sendable {
    /// The checksum of `bytes`, continuing from `seed` — the checksum of the bytes before (0 to start).
    public static func checksum(_ bytes: some ContiguousBytes, seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { jb_crc32c(seed, $0.baseAddress, $0.count) }
    }

    /// The same checksum computed with the portable table, whatever the CPU (for tests and comparisons).
    public static func portableChecksum(_ bytes: some ContiguousBytes, seed: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { jb_crc32c_portable(seed, $0.baseAddress, $0.count) }
    }

    /// True when ``checksum(_:seed:)`` uses a hardware instruction on this machine.
    public static var isHardwareAccelerated: Bool { jb_crc32c_is_hardware() != 0 }
}
