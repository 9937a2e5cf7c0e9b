#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The keyed container last handed out by `DecoderImpl.container(keyedBy:)` at one depth, and its key type.
///
/// The runtime looks up three generic metadata records to make a `KeyedDecodingContainer` (about a fifth of decoding
/// time for records like the benchmark's). Only one value at a time is decoded at a given depth, and its container is
/// done with when its `init(from:)` returns, so the next map at that depth read with the same key type reuses the
/// container and its index. (A container kept past its value's `init(from:)` would then read the newer map; Codable
/// never does that.)
class KeyedContainerSlot {
    let keyType: ObjectIdentifier
    let index: KeyIndex

    init(keyType: ObjectIdentifier, index: KeyIndex) {
        self.keyType = keyType
        self.index = index
    }
}
