import Foundation
import Synchronization

/// Shows a running sync: on a terminal a one-line bar redrawn at most ten times a second; otherwise a plain line
/// every few seconds, fit for logs.
public final class ProgressReporter: Sendable {
    private let terminal: Bool
    private let interval: Double
    private let write: @Sendable (String) -> Void
    private let state = Mutex(State())

    private struct State {
        var lastDraw = -Double.infinity
        var drawn = false
        /// (elapsed, acknowledged) over the last few seconds, for the rate.
        var samples: [(Double, Int)] = []
    }

    /// - Parameters:
    ///   - terminal: Draw a bar (standard error is a terminal) rather than log lines.
    ///   - interval: Seconds between plain lines.
    ///   - write: Where text goes; standard error by default.
    public init(
        terminal: Bool, interval: Double = 5,
        write: (@Sendable (String) -> Void)? = nil
    ) {
        self.terminal = terminal
        self.interval = interval
        self.write = write ?? { FileHandle.standardError.write(Data($0.utf8)) }
        // Log lines start after one interval: a sync that finishes sooner prints only its summary.
        state.withLock { $0.lastDraw = terminal ? -.infinity : 0 }
    }

    /// Takes one snapshot; draws only when it is time to.
    public func report(_ progress: SyncProgress) {
        let text: String? = state.withLock { state in
            state.samples.append((progress.elapsed, progress.acknowledged))
            state.samples.removeAll { $0.0 < progress.elapsed - 5 }
            guard progress.elapsed - state.lastDraw >= (terminal ? 0.1 : interval) else { return nil }
            state.lastDraw = progress.elapsed
            state.drawn = terminal
            let rate = Self.rate(state.samples)
            return terminal ? "\r\u{1B}[2K" + Self.bar(progress, rate: rate) : Self.line(progress, rate: rate) + "\n"
        }
        if let text { write(text) }
    }

    /// Clears the bar so the summary starts on a clean line.
    public func finish() {
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if drawn { write("\r\u{1B}[2K") }
    }

    static func rate(_ samples: [(Double, Int)]) -> Double {
        guard let first = samples.first, let last = samples.last, last.0 > first.0 else { return 0 }
        return Double(last.1 - first.1) / (last.0 - first.0)
    }

    /// `[##########··········]  5,000/10,000 acknowledged  1,200 records/s  4 s left`
    static func bar(_ progress: SyncProgress, rate: Double, width: Int = 24) -> String {
        let fraction = progress.total > 0 ? min(1, Double(progress.acknowledged) / Double(progress.total)) : 1
        let filled = Int((fraction * Double(width)).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "·", count: width - filled) + "] "
            + "\(grouped(progress.acknowledged))/\(grouped(progress.total)) acknowledged  "
            + "\(grouped(Int(rate.rounded()))) records/s  \(timeLeft(progress, rate: rate))"
    }

    /// `sync: 5,000 of 10,000 records acknowledged (50%), 1,200 records/s, 4 s left, 800 in flight`
    static func line(_ progress: SyncProgress, rate: Double) -> String {
        let percent = progress.total > 0 ? progress.acknowledged * 100 / progress.total : 100
        return "sync: \(grouped(progress.acknowledged)) of \(grouped(progress.total)) records acknowledged "
            + "(\(percent)%), \(grouped(Int(rate.rounded()))) records/s, \(timeLeft(progress, rate: rate)), "
            + (progress.problem ?? "\(grouped(progress.inFlight)) in flight")
    }

    static func timeLeft(_ progress: SyncProgress, rate: Double) -> String {
        let left = progress.total - progress.acknowledged
        if left <= 0 { return "done" }
        guard rate > 0 else { return "time left unknown" }
        let seconds = Int((Double(left) / rate).rounded(.up))
        return seconds < 120 ? "\(seconds) s left" : "\(seconds / 60) min left"
    }

    static func grouped(_ number: Int) -> String {
        let digits = String(number.magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { result.append(",") }
            result.append(digit)
        }
        return (number < 0 ? "-" : "") + result
    }
}
