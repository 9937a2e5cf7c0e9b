import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A crash ends `serve` within seconds, with the signal's own status and a trace in its log (issue 23 item 4): the
/// Swift runtime's handler prints a backtrace and returns, so a fatal signal sent from outside (a watchdog's SIGABRT,
/// `kill -SEGV`) used to leave the process running, lock and sockets held, where systemd could not restart it.
@Suite("Fatal signals end serve")
struct FatalSignalTests {
    @Test(arguments: [SIGABRT, SIGSEGV])
    func aFatalSignalEndsServeWithItsStatusAndATrace(signal: Int32) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let serve = try await ServeProcess(store: "jetbridge.sqlite", in: directory.url, name: "ground")
        let sent = ContinuousClock.now
        kill(serve.process.processIdentifier, signal)
        let process = serve.process
        // A bound on a hang, not a pace: the watchdog ends the process 10 s after the signal at the latest.
        try await waitUntil("serve exits after signal \(signal)", timeout: .seconds(60)) { !process.isRunning }
        let took = ContinuousClock.now - sent
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(process.terminationStatus == signal)
        let log = serve.logText
        #expect(log.contains("jetbridge-aggregator: fatal signal \(FatalSignalTests.name(signal)) (\(signal))"))
        // The runtime's backtrace (on unless SWIFT_BACKTRACE turns it off) reaches the same log.
        if ProcessInfo.processInfo.environment["SWIFT_BACKTRACE"]?.contains("enable=no") != true {
            #expect(log.contains("Program crashed"))
        }
        print("serve ended \(took) after signal \(signal)")
    }

    static func name(_ signal: Int32) -> String { signal == SIGABRT ? "SIGABRT" : "SIGSEGV" }
}
