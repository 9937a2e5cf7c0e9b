import SystemSupport
import Testing

@Suite("SystemSupport: the seeded generator")
struct SplitMixTests {
    /// The reference SplitMix64 (Vigna's splitmix64.c) from seed 0: the sync window's jitter and every seeded test
    /// and benchmark depend on these exact values.
    @Test func seedZeroGivesTheReferenceSequence() {
        var generator = SplitMix(state: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
        #expect(generator.next() == 0x06C4_5D18_8009_454F)
    }
}
