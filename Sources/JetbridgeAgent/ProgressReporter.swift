import JetbridgeModel
import Synchronization
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Shows a running sync: on a terminal a one-line bar redrawn at most ten times a second, fitted to the terminal's
/// width as it is at each redraw (so it follows a resize); otherwise a plain line every few seconds, fit for logs.
public final class ProgressReporter: Sendable {
    private let terminal: Bool
    private let interval: Double
    /// Draws the bar in place (nil: clears it).
    private let draw: @Sendable (String?) -> Void
    /// Writes a plain line.
    private let write: @Sendable (String) -> Void
    private let columns: @Sendable () -> Int
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
    ///   - write: Where text goes (the bar as `\r\u{1B}[2K` and the bar, a clear as `\r\u{1B}[2K` alone); standard
    ///     error by default, through SystemSupport's `StandardError`, which keeps log lines off the bar's line.
    ///   - columns: The terminal's width, asked at every redraw; standard error's (``terminalColumns()``) by default.
    public init(
        terminal: Bool, interval: Double = 5,
        write: (@Sendable (String) -> Void)? = nil, columns: (@Sendable () -> Int)? = nil
    ) {
        self.terminal = terminal
        self.interval = interval
        if let write {
            self.write = write
            draw = { write(StandardError.clearLine + ($0 ?? "")) }
        } else {
            self.write = { StandardError.write(lines: $0) }
            draw = { line in
                if let line { StandardError.drawStatus(line) } else { StandardError.clearStatus() }
            }
        }
        self.columns = columns ?? { ProgressReporter.terminalColumns() }
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
            return terminal ? "" : Self.line(progress, rate: Self.rate(state.samples)) + "\n"
        }
        guard let text else { return }
        if terminal {
            // The width is asked outside the lock: an ioctl per redraw, at most ten a second.
            let rate = state.withLock { Self.rate($0.samples) }
            draw(Self.fitted(progress, rate: rate, columns: columns()))
        } else {
            write(text)
        }
    }

    /// The width of the terminal on standard error (`TIOCGWINSZ`), else `$COLUMNS`, else 80.
    public static func terminalColumns() -> Int {
        var size = winsize()
        if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let text = ProcessInfo.processInfo.environment["COLUMNS"], let value = Int(text), value > 0 { return value }
        return 80
    }

    /// The bar in at most `columns - 1` characters (a line that fills the last column wraps on some terminals, and
    /// every redraw would then start a new line): the bar narrows from 24 to 10 cells, then the rate, the time left,
    /// the word `acknowledged` and the bar itself go, in that order, and what still does not fit is cut.
    static func fitted(_ progress: SyncProgress, rate: Double, columns: Int) -> String {
        let room = max(columns - 1, 1)
        let counts = "\(grouped(progress.acknowledged))/\(grouped(progress.total))"
        let parts = [
            [counts + " acknowledged", "\(grouped(Int(rate.rounded()))) records/s", timeLeft(progress, rate: rate)],
            [counts + " acknowledged", timeLeft(progress, rate: rate)],
            [counts + " acknowledged"],
            [counts],
        ]
        for texts in parts {
            let tail = texts.joined(separator: "  ")
            // "[" + cells + "] " + tail
            let cells = min(24, room - 3 - tail.count)
            if cells >= 10 { return bar(progress, cells: cells) + tail }
        }
        for texts in parts where texts.joined(separator: "  ").count <= room { return texts.joined(separator: "  ") }
        return String(counts.prefix(room))
    }

    /// Clears the bar so the summary starts on a clean line.
    public func finish() {
        let drawn = state.withLock { state in
            defer { state.drawn = false }
            return state.drawn
        }
        if drawn { draw(nil) }
    }

    static func rate(_ samples: [(Double, Int)]) -> Double {
        guard let first = samples.first, let last = samples.last, last.0 > first.0 else { return 0 }
        return Double(last.1 - first.1) / (last.0 - first.0)
    }

    /// `[##########··········]  5,000/10,000 acknowledged  1,250 records/s  4 s left`
    static func bar(_ progress: SyncProgress, rate: Double, width: Int = 24) -> String {
        bar(progress, cells: width) + "\(grouped(progress.acknowledged))/\(grouped(progress.total)) acknowledged  "
            + "\(grouped(Int(rate.rounded()))) records/s  \(timeLeft(progress, rate: rate))"
    }

    /// `[##########··········] `: `cells` cells, filled by the acknowledged fraction.
    static func bar(_ progress: SyncProgress, cells: Int) -> String {
        let fraction = progress.total > 0 ? min(1, Double(progress.acknowledged) / Double(progress.total)) : 1
        let filled = Int((fraction * Double(cells)).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "·", count: cells - filled) + "] "
    }

    /// `sync: 5,000 of 10,000 records acknowledged (50%), 1,250 records/s, 4 s left, 800 in flight`, with
    /// ` (tcp://10.0.0.2:5560 down: …)` while one of several aggregators is down.
    static func line(_ progress: SyncProgress, rate: Double) -> String {
        let percent = progress.total > 0 ? progress.acknowledged * 100 / progress.total : 100
        let records = progress.total == 1 ? "record" : "records"
        return "sync: \(grouped(progress.acknowledged)) of \(grouped(progress.total)) \(records) acknowledged "
            + "(\(percent)%), \(grouped(Int(rate.rounded()))) records/s, \(timeLeft(progress, rate: rate)), "
            + (progress.problem ?? "\(grouped(progress.inFlight)) in flight")
            + (progress.problem == nil ? progress.down.map { " (\($0))" } ?? "" : "")
    }

    /// Counts as the status and the reports show them: `9,998`.
    private static func grouped(_ number: Int) -> String { NumberText.grouped(number) }

    static func timeLeft(_ progress: SyncProgress, rate: Double) -> String {
        let left = progress.total - progress.acknowledged
        if left <= 0 { return "done" }
        guard rate > 0 else { return "time left unknown" }
        let seconds = Int((Double(left) / rate).rounded(.up))
        return seconds < 120 ? "\(seconds) s left" : "\(seconds / 60) min left"
    }
}
