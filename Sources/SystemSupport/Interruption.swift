internal import CSystemCalls

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// SIGINT and SIGTERM, caught while a command reads a long input (`scan` reading a feed of tags), so that it can stop
/// between two lines, store what it read and say where to go on, where the default action ended the process at once:
/// the scans read but not yet written were lost, and nothing said which lines had been stored.
///
/// The handler (C, `CSystemCalls`: a signal handler may only call async-signal-safe functions) writes the signal's
/// number into a pipe, so whichever thread the signal lands on, a reader polling ``descriptor`` wakes. A second signal
/// ends the process as if nothing had caught it, so a command stuck elsewhere (a hung disk) still stops; a signal
/// that was ignored when the catch began (a job a shell started in the background) stays ignored. One catch at a time
/// per process; ``restore()`` puts the previous actions back.
package final class Interruption: Sendable {
    /// Readable once a signal came (the pipe lives as long as the process).
    package let descriptor: Int32
    private let restored = Locked(false)

    /// Catches `signals`; with none, a catch that only ``trigger(_:)`` sets off (tests).
    /// - Throws: ``SystemError`` when the pipe cannot be made or a handler installed (nothing is left installed).
    package init(catching signals: [Int32] = [SIGINT, SIGTERM]) throws(SystemError) {
        let descriptor = signals.withUnsafeBufferPointer { jb_interruption_install($0.baseAddress, Int32($0.count)) }
        guard descriptor >= 0 else { throw SystemError("sigaction", path: nil, errno: errno) }
        self.descriptor = descriptor
    }

    deinit { restore() }

    /// The signal caught, if any (without waiting; ``descriptor`` stays readable).
    package var signal: Int32? {
        let caught = jb_interruption_caught()
        return caught == 0 ? nil : caught
    }

    /// Puts back the actions the signals had before (idempotent).
    package func restore() {
        restored.withLock { restored in
            guard !restored else { return }
            restored = true
            jb_interruption_restore()
        }
    }

    /// As if `signal` came (tests).
    package func trigger(_ signal: Int32) { jb_interruption_trigger(signal) }

    /// The signal's name for messages (`SIGINT`).
    package static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        default: "signal \(signal)"
        }
    }
}
