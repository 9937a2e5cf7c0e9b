internal import CFatalSignals

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Makes a fatal signal end the process at once, with a trace in the log and the signal's own status.
///
/// The Swift runtime's crash handler prints a backtrace and then *returns*. For a fault (a trap, a bad access) the
/// faulting instruction runs again under the default action and the process dies; for the same signal sent from
/// outside (`kill -ABRT`, `kill -SEGV`, a watchdog) nothing runs again and the process carries on, backtrace printed,
/// for as long as nobody notices: systemd's restart-on-failure never sees it fail. And its `swift-backtrace` helper
/// can wait for good when the crash comes from one of libzmq's threads (they block every signal, so the runtime cannot
/// suspend them: `failed to suspend thread … while processing a crash`); a crashed `serve` then held its sockets and
/// its home's lock for minutes, and helpers left behind waited for hours.
///
/// ``install(program:watchdog:)`` puts a handler (C, `CFatalSignals`: a signal handler must not allocate) in front of
/// the runtime's for SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGTRAP. It writes one line naming the program and
/// the signal and the crashing thread's backtrace (glibc's, offsets into the binary) to standard error, restores the
/// default action and raises the signal again: the process ends within milliseconds with the signal's own status (134
/// for SIGABRT). With `SWIFT_BACKTRACE` set (and not `enable=no`), the operator asked for the runtime's backtrace:
/// it is chained to, with a watchdog (a forked child) that after `watchdog` seconds kills the helper and the process.
package enum FatalSignals {
    /// The longest the runtime's backtrace may take, when asked for, before the watchdog ends the process.
    package static let defaultWatchdog = 10

    /// Whether the environment asks for the Swift runtime's own backtrace.
    package static func runtimeBacktraceRequested(_ environment: [String: String]) -> Bool {
        guard let setting = environment["SWIFT_BACKTRACE"], !setting.isEmpty else { return false }
        return !setting.split(separator: ",").contains { $0.trimmingWhitespace() == "enable=no" }
    }

    /// Installs the handler; call once, first thing in `main`.
    /// - Parameters:
    ///   - program: The name for the line on standard error (`jetbridge-aggregator`).
    ///   - watchdog: Seconds the runtime's backtrace may take, when `SWIFT_BACKTRACE` asks for it (at least 1).
    package static func install(
        program: String, watchdog: Int = defaultWatchdog,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        jb_fatal_signals_install(program, Int32(clamping: watchdog), runtimeBacktraceRequested(environment) ? 1 : 0)
    }
}
