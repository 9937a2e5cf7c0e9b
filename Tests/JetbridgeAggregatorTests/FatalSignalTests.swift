import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A crash ends `serve` at once, with the signal's own status and a trace in its log (issue 23 item 4): the Swift
/// runtime's handler prints a backtrace and returns, so a fatal signal sent from outside (a watchdog's SIGABRT,
/// `kill -SEGV`) used to leave the process running, lock and sockets held, where systemd could not restart it; and its
/// backtrace helper could wait for good on libzmq's threads.
@Suite("Fatal signals end serve")
struct FatalSignalTests {
    @Test(arguments: [SIGABRT, SIGSEGV])
    func aFatalSignalEndsServeAtOnceWithItsStatusAndATrace(signal: Int32) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // As the units and the docs' commands run it: no SWIFT_BACKTRACE.
        let serve = try await ServeProcess(
            store: "jetbridge.sqlite", in: directory.url, name: "ground", environment: ["SWIFT_BACKTRACE": ""])
        let sent = ContinuousClock.now
        kill(serve.process.processIdentifier, signal)
        let process = serve.process
        // A bound on a hang, not a pace.
        try await waitUntil("serve exits after signal \(signal)", timeout: .seconds(60)) { !process.isRunning }
        let took = ContinuousClock.now - sent
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == signal)
        let log = serve.logText
        #expect(log.contains("jetbridge-aggregator: fatal signal \(Self.name(signal)) (\(signal)); the process ends now"))
        #expect(log.contains("backtrace of the crashing thread"))
        #expect(log.contains("jetbridge-aggregator(+0x"), "no frame of the binary: \(log.suffix(1_500))")
        print("serve ended \(took) after signal \(signal)")
    }

    /// With `SWIFT_BACKTRACE` set, the runtime's backtrace is chained to: the process ends after it with the signal's
    /// status, or by the watchdog's SIGKILL if it takes longer than 10 s (a loaded machine); never lingers.
    @Test func withTheRuntimesBacktraceAskedForServeStillEnds() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let serve = try await ServeProcess(
            store: "jetbridge.sqlite", in: directory.url, name: "ground",
            environment: ["SWIFT_BACKTRACE": "enable=yes,symbolicate=fast,interactive=no,output-to=stderr"])
        kill(serve.process.processIdentifier, SIGABRT)
        let process = serve.process
        try await waitUntil("serve exits after SIGABRT", timeout: .seconds(60)) { !process.isRunning }
        #expect(process.terminationReason == .uncaughtSignal)
        let log = serve.logText
        #expect(log.contains("the process ends after the Swift runtime's backtrace, in at most 10 s"))
        if process.terminationStatus == SIGABRT {
            #expect(log.contains("Program crashed"))
        } else {
            #expect(process.terminationStatus == SIGKILL, "ended by signal \(process.terminationStatus)")
            #expect(log.contains("the backtrace did not finish in time"))
        }
    }

    static func name(_ signal: Int32) -> String { signal == SIGABRT ? "SIGABRT" : "SIGSEGV" }
}
