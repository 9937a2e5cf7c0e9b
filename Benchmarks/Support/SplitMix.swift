public import JetbridgeTestKit

/// The seeded generator is the test kit's (one copy for tests and benchmarks: same seed, same records); this name
/// keeps `BenchmarkSupport.SplitMix` working for the benchmarks that import only this module.
public typealias SplitMix = JetbridgeTestKit.SplitMix
