extension Duration {
    /// The duration in seconds, as a `TimeInterval`.
    package var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Whole nanoseconds (what swift-metrics' timers record).
    package var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Whole milliseconds, clamped to `Int32`, as libzmq's options and `poll(2)` expect.
    package var clampedMilliseconds: Int32 {
        let (seconds, attoseconds) = components
        let milliseconds = seconds.multipliedReportingOverflow(by: 1000)
        guard !milliseconds.overflow else { return seconds < 0 ? Int32.min : Int32.max }
        return Int32(clamping: milliseconds.partialValue + attoseconds / 1_000_000_000_000_000)
    }
}
