#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The write end of the pipe the handler signals on: a plain global, set before the handler is installed, so that
/// the handler reads it without a lock or an allocation (a signal handler may call only async-signal-safe functions).
nonisolated(unsafe) private var interruptionWriteEnd: Int32 = -1

/// SIGINT and SIGTERM, caught while a command reads a long input (`scan` reading a feed of tags), so that it can stop
/// between two lines, store what it read and say where to go on, where the default action ended the process at once:
/// the scans read but not yet written were lost, and nothing said which lines had been stored.
///
/// The handler writes the signal's number into a pipe (a self-pipe: whichever thread the signal lands on, the reader
/// polling ``descriptor`` wakes). One catch at a time per process; ``restore()`` puts the previous actions back.
package final class Interruption {
    /// The read end: readable once a signal came.
    package let descriptor: Int32
    private let writeEnd: Int32
    private let signals: [Int32]
    private var previous: [sigaction]
    private var restored = false

    /// Installs the handler for `signals`.
    /// - Throws: ``SystemError`` when the pipe cannot be made or a handler installed (nothing is left installed).
    package init(catching signals: [Int32] = [SIGINT, SIGTERM]) throws(SystemError) {
        var ends: [Int32] = [-1, -1]
        try syscall("pipe", path: nil) { pipe(&ends) }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        descriptor = ends[0]
        writeEnd = ends[1]
        self.signals = signals
        previous = []
        interruptionWriteEnd = writeEnd
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            var byte = UInt8(truncatingIfNeeded: signal)
            _ = write(interruptionWriteEnd, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        for signal in signals {
            var old = sigaction()
            guard sigaction(signal, &action, &old) == 0 else {
                let code = errno
                restore()
                throw SystemError("sigaction", path: nil, errno: code)
            }
            previous.append(old)
        }
    }

    deinit { restore() }

    /// The first signal caught, if any (without waiting; until ``restore()``).
    package var signal: Int32? {
        if caught == nil, !restored {
            var byte: UInt8 = 0
            if read(descriptor, &byte, 1) == 1 { caught = Int32(byte) }
        }
        return caught
    }
    private var caught: Int32?

    /// Puts back the actions the signals had before (idempotent), and closes the pipe.
    package func restore() {
        guard !restored else { return }
        restored = true
        for (signal, var old) in zip(signals, previous) { _ = sigaction(signal, &old, nil) }
        interruptionWriteEnd = -1
        close(writeEnd)
        close(descriptor)
    }

    /// The signal's name for messages (`SIGINT`).
    package static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }
}
