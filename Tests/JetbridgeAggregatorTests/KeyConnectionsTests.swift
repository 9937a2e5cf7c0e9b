import Foundation
import JetbridgeTestKit
import Testing

@testable import JetbridgeAggregator
@testable import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// The per-key connection count (``KeyConnections``) with real file descriptors.
@Suite("Server: connections per key")
struct KeyConnectionsTests {
    /// A message read after its connection closed: libzmq has closed the descriptor (and the monitor's
    /// `disconnected` came, or comes, for it). Counted, the closed descriptor held one of the key's connections until
    /// its number was reused by another connection.
    @Test func aMessageOfAClosedConnectionDoesNotCountAgainstItsKey() throws {
        let connections = KeyConnections(perKey: 2)
        var ends: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[1]) }
        // A high number, which the tests running beside this one (each new descriptor takes the lowest free number)
        // do not take between the close below and the late message.
        let high = fcntl(ends[0], F_DUPFD_CLOEXEC, 900)
        try #require(high >= 900)
        close(ends[0])
        ends[0] = high
        #expect(connections.admit(key: "k"))
        #expect(connections.note(descriptor: ends[0], key: "k") == false)
        #expect(connections.count(for: "k").known == 1)
        // The connection ends: libzmq closes its descriptor, and the monitor reports it.
        close(ends[0])
        connections.closed(descriptor: ends[0])
        #expect(connections.count(for: "k").known == 0)
        // A message of that connection read only now names the closed descriptor: it is not counted again.
        #expect(connections.note(descriptor: ends[0], key: "k") == false)
        #expect(connections.count(for: "k").known == 0)
        #expect(connections.admit(key: "k") && connections.admit(key: "k"))
    }
}

/// The refused-handshake warnings (``HandshakeMonitor``), with the clock given.
@Suite("Server: refused handshakes in the log")
struct HandshakeWarningTests {
    /// A client making up a new key for each handshake was a new key each time, and got a warning line each: all
    /// keys together now get at most ``HandshakeMonitor/warningsPerMinute`` a minute, and the next one written says
    /// how many the cap left out.
    @Test func aNewKeyPerHandshakeGetsAtMostSoManyWarningsAMinute() throws {
        let key = UUID().uuidString
        let monitor = HandshakeMonitor(logger: CapturingLogHandler.logger(key))
        let start = ContinuousClock.now
        func refuse(_ n: Int, at seconds: Int) {
            monitor.record(
                ZAPHandler.Decision(
                    result: .refusedKey, publicKeyZ85: "key-\(n)", address: "198.51.100.7", mechanism: "CURVE",
                    identity: nil),
                now: start + .seconds(seconds))
        }
        for n in 0..<500 { refuse(n, at: n / 10) }
        var warnings = CapturingLogHandler.lines(key).filter { $0.hasPrefix("warning refused a handshake") }
        #expect(warnings.count == HandshakeMonitor.warningsPerMinute)
        // A minute on, the next one says what the cap left out.
        refuse(1_000, at: 61)
        warnings = CapturingLogHandler.lines(key).filter { $0.hasPrefix("warning refused a handshake") }
        #expect(warnings.count == HandshakeMonitor.warningsPerMinute + 1)
        #expect(warnings.last?.contains("leftOut=\(500 - HandshakeMonitor.warningsPerMinute)") == true, "\(warnings)")
        // Every refusal is still counted.
        #expect(monitor.snapshot.counts["refused-key"] == 501)
    }
}
