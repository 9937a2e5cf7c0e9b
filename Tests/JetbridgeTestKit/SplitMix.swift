public import Foundation

/// SplitMix64: a fixed seed gives the same values on every run and every machine, so a failing random test fails
/// again, and two runs (or two halves of one run, such as a store and its direct floor) work on the same data.
public struct SplitMix: RandomNumberGenerator, Sendable {
    public var state: UInt64

    /// - Parameters:
    ///   - state: The seed.
    public init(state: UInt64) {
        self.state = state
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A version-4 UUID from two draws of `rng`, laid out in memory order (little-endian), with the version and variant
/// bits set.
/// - Parameters:
///   - rng: The generator; advanced by two draws.
/// - Returns: The UUID.
public func randomUUID(_ rng: inout SplitMix) -> UUID {
    var bytes = (rng.next(), rng.next())
    return withUnsafeMutableBytes(of: &bytes) { raw in
        raw[6] = raw[6] & 0x0F | 0x40
        raw[8] = raw[8] & 0x3F | 0x80
        return UUID(uuid: raw.load(as: uuid_t.self))
    }
}
