import Foundation
import JetbridgeAggregator
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The operator's side of `jetbridge-aggregator`, run as operators run it: real processes on a real home.
@Suite("Operations: lock, version, logs, metrics, status")
struct OperationsTests {
    typealias CLI = AggregatorCLITests

    /// A home with a key pair and one allowed device, and the `serve` arguments for kernel-chosen ports.
    static func home(_ fixture: Fixture) throws -> [String] {
        _ = try ServerKeys.generate(in: AggregatorHome(directory: fixture.directory), force: false)
        return ["--home", fixture.directory.path]
    }

    static let anyPorts = ["--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"]

    /// Waits until the log file at `url` contains `text` (or the process ends); returns the log.
    static func waitForLog(_ url: URL, _ text: String, process: Process) async throws -> String {
        var log = ""
        try await waitUntil("the log shows \(text)") {
            log = try String(contentsOf: url, encoding: .utf8)
            return log.contains(text) || !process.isRunning
        }
        return log
    }

    @Test func aSecondServeOnTheSameHomeRefusesAtOnceNamingTheHomeAndThePID() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try Self.home(fixture)
        let (first, _, firstLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(firstLog, "aggregator serving", process: first)
        #expect(first.isRunning)

        // Without the lock the second one would serve on other ports: bounded by waitUntil, not waited on for good.
        let (second, _, secondLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if second.isRunning { kill(second.processIdentifier, SIGKILL) } }
        try await waitUntil("the second serve exits") { !second.isRunning }
        let refusal = try String(contentsOf: secondLog, encoding: .utf8)
        #expect(second.terminationStatus == 69)
        #expect(refusal.contains("pid \(first.processIdentifier)"), "\(refusal)")
        #expect(refusal.contains(fixture.directory.path), "\(refusal)")
        #expect(!refusal.contains("aggregator serving"))
        #expect(first.isRunning)

        // A holder killed with SIGKILL leaves the lock file, never the lock.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let (third, _, thirdLog) = try CLI.start(home + ["serve"] + Self.anyPorts, in: fixture.directory)
        defer { if third.isRunning { kill(third.processIdentifier, SIGKILL) } }
        _ = try await Self.waitForLog(thirdLog, "aggregator serving", process: third)
        #expect(third.isRunning)
        #expect(HomeLock.holder(of: AggregatorHome(directory: fixture.directory)) == third.processIdentifier)
        third.terminate()
        third.waitUntilExit()
        #expect(third.terminationStatus == 0)
        #expect(HomeLock.holder(of: AggregatorHome(directory: fixture.directory)) == nil)
    }
}
