/// SplitMix64, the one seeded generator of the project: a fixed seed gives the same values on every run and every
/// machine, so the sync window's jitter is reproducible in tests and the window stays a value type; the test kit and
/// the benchmarks draw their seeded data from it too.
package struct SplitMix: RandomNumberGenerator, Sendable {
    package var state: UInt64

    /// - Parameters:
    ///   - state: The seed.
    package init(state: UInt64) {
        self.state = state
    }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
