public import Foundation
import SystemSupport

/// SplitMix64: a fixed seed gives the same values on every run and every machine, so a failing random test fails
/// again, and two runs (or two halves of one run, such as a store and its direct floor) work on the same data.
///
/// The project's one generator (SystemSupport's, which the sync window's jitter uses) behind a public face: its
/// members are `package`, and a test file would otherwise have to import SystemSupport to call them.
public struct SplitMix: RandomNumberGenerator, Sendable {
    private var generator: SystemSupport.SplitMix

    /// - Parameters:
    ///   - state: The seed.
    public init(state: UInt64) {
        generator = SystemSupport.SplitMix(state: state)
    }

    public mutating func next() -> UInt64 {
        generator.next()
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
