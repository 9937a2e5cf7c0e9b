#if canImport(Glibc)
    import Glibc
#endif

/// Makes a fatal signal end the process within seconds, after the Swift runtime's backtrace.
///
/// The runtime's crash handler prints a backtrace and then *returns*. For a fault (a trap, a bad access) the faulting
/// instruction runs again under the default action and the process dies; for the same signal sent from outside
/// (`kill -ABRT`, `kill -SEGV`, a watchdog) nothing runs again and the process carries on, backtrace printed, for as
/// long as nobody notices: systemd's restart-on-failure never sees it fail. And symbolicating a large binary can take
/// minutes, during which the crashed process holds its sockets and its home's lock.
///
/// ``install(program:watchdog:)`` chains a handler in front of the runtime's for SIGABRT, SIGSEGV, SIGBUS, SIGILL,
/// SIGFPE and SIGTRAP. It writes one line to standard error (the signal and the program), arms a watchdog, lets the
/// runtime write its backtrace, then restores the default action and raises the signal again, so the process ends
/// with the signal's own status (134 for SIGABRT) whichever way the signal came. The watchdog is `alarm(2)` with
/// SIGALRM at its default action, unblocked on the crashing thread: if the backtrace is not done in time, the kernel
/// ends the process. Everything the handler does is async-signal-safe (`write`, `alarm`, `sigaction`,
/// `pthread_sigmask`, `raise`); its state is fixed before the first signal can arrive.
package enum FatalSignals {
    /// The signals whose default action is a crash with a core.
    static let signals: [Int32] = [SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP]

    /// The longest the runtime's backtrace may take before the watchdog ends the process.
    package static let defaultWatchdog = 10

    /// Installs the handler; call once, first thing in `main`.
    /// - Parameters:
    ///   - program: The name for the line on standard error (`jetbridge-aggregator`).
    ///   - watchdog: Seconds the backtrace may take before the process is ended without it (at least 1).
    package static func install(program: String, watchdog: Int = defaultWatchdog) {
        let watchdog = max(1, watchdog)
        let messages = UnsafeMutablePointer<Message>.allocate(capacity: Int(NSIG))
        messages.initialize(repeating: Message(bytes: nil, count: 0), count: Int(NSIG))
        let previous = UnsafeMutablePointer<sigaction>.allocate(capacity: Int(NSIG))
        previous.initialize(repeating: sigaction(), count: Int(NSIG))
        for signal in signals {
            sigaction(signal, nil, previous + Int(signal))
            let line = Array(
                "\(program): fatal signal \(name(of: signal)) (\(signal)); the process ends after the backtrace, in at "
                    .utf8) + Array("most \(watchdog) s\n".utf8)
            let bytes = UnsafeMutablePointer<UInt8>.allocate(capacity: line.count)
            bytes.initialize(from: line, count: line.count)
            messages[Int(signal)] = Message(bytes: UnsafeRawPointer(bytes), count: line.count)
        }
        fatalSignalState = State(messages: messages, previous: previous, watchdog: UInt32(watchdog))
        for signal in signals {
            var action = sigaction()
            action.__sigaction_handler.sa_sigaction = fatalSignalHandler
            // The runtime's flags (its alternate stack among them) and mask, plus siginfo for the chained call. Its
            // mask, not a full one: the runtime's backtrace needs signals (a full mask made it fault midway).
            action.sa_flags = previous[Int(signal)].sa_flags | SA_SIGINFO | SA_ONSTACK
            action.sa_mask = previous[Int(signal)].sa_mask
            sigaction(signal, &action, nil)
        }
    }

    static func name(of signal: Int32) -> String {
        switch signal {
        case SIGABRT: "SIGABRT"
        case SIGSEGV: "SIGSEGV"
        case SIGBUS: "SIGBUS"
        case SIGILL: "SIGILL"
        case SIGFPE: "SIGFPE"
        case SIGTRAP: "SIGTRAP"
        default: "signal \(signal)"
        }
    }

    struct Message {
        let bytes: UnsafeRawPointer?
        let count: Int
    }

    struct State {
        /// The line written to standard error, indexed by signal number.
        let messages: UnsafeMutablePointer<Message>
        /// The actions in place before ``install(program:watchdog:)``, indexed by signal number.
        let previous: UnsafeMutablePointer<sigaction>
        let watchdog: UInt32
    }
}

/// Set once by ``FatalSignals/install(program:watchdog:)`` before any handler is installed; read only by the handler.
nonisolated(unsafe) private var fatalSignalState: FatalSignals.State?

private func fatalSignalHandler(
    _ signal: Int32, _ info: UnsafeMutablePointer<siginfo_t>?, _ context: UnsafeMutableRawPointer?
) {
    guard let state = fatalSignalState else {
        Glibc.signal(signal, SIG_DFL)
        raise(signal)
        return
    }
    let message = state.messages[Int(signal)]
    if let bytes = message.bytes { _ = write(2, bytes, message.count) }
    // The watchdog: SIGALRM at its default action ends the process; unblocked here, where the crash is handled.
    Glibc.signal(SIGALRM, SIG_DFL)
    var alarmOnly = sigset_t()
    sigemptyset(&alarmOnly)
    sigaddset(&alarmOnly, SIGALRM)
    pthread_sigmask(SIG_UNBLOCK, &alarmOnly, nil)
    alarm(state.watchdog)
    let previous = state.previous[Int(signal)]
    if previous.sa_flags & SA_SIGINFO != 0 {
        previous.__sigaction_handler.sa_sigaction?(signal, info, context)
    } else if let handler = previous.__sigaction_handler.sa_handler, unsafeBitCast(handler, to: Int.self) != 1 {
        // A function, not SIG_DFL (nil) or SIG_IGN (1).
        handler(signal)
    }
    // Whatever the runtime did, end with the signal's own default action.
    Glibc.signal(signal, SIG_DFL)
    var only = sigset_t()
    sigemptyset(&only)
    sigaddset(&only, signal)
    pthread_sigmask(SIG_UNBLOCK, &only, nil)
    raise(signal)
    _exit(128 + signal)
}
