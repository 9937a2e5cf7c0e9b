internal import CCRC32C

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// CRC-32C (Castagnoli) as the batch header carries it: reflected, initial value and final xor `0xFFFFFFFF`.
public enum Checksum: Sendable {
    /// The CRC-32C of `bytes`; `"123456789"` gives `0xE3069283`.
    public static func crc32c(_ bytes: some ContiguousBytes) -> UInt32 {
        bytes.withUnsafeBytes { jb_crc32c(0, $0.baseAddress, $0.count) }
    }
}
