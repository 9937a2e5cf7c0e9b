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
    /// its number was reused by another connection, and for good when a file took the number (no monitor reports a
    /// file closed).
    @Test func aMessageOfAClosedConnectionDoesNotCountAgainstItsKey() throws {
        let (port, accepted, client) = try Self.tcpConnection()
        defer { close(client) }
        // A high number, which the tests running beside this one (each new descriptor takes the lowest free number)
        // do not take between the close below and the late message.
        let descriptor = fcntl(accepted, F_DUPFD_CLOEXEC, 900)
        try #require(descriptor >= 900)
        close(accepted)
        let connections = KeyConnections(perKey: 2)
        let isConnection = { (fd: Int32) in KeyConnections.isConnection(fd, localPorts: [port], orLocal: false) }
        #expect(connections.admit(key: "k"))
        #expect(connections.note(descriptor: descriptor, key: "k", isConnection: isConnection) == false)
        #expect(connections.count(for: "k").known == 1)
        // The connection ends: libzmq closes its descriptor, and the monitor reports it.
        close(descriptor)
        connections.closed(descriptor: descriptor)
        #expect(connections.count(for: "k").known == 0)
        // A message of that connection read only now names the closed descriptor: it is not counted again.
        #expect(connections.note(descriptor: descriptor, key: "k", isConnection: isConnection) == false)
        #expect(connections.count(for: "k").known == 0)
        // Nor when a file has taken the number meanwhile.
        let file = open("/dev/null", O_RDONLY)
        #expect(dup2(file, descriptor) == descriptor)
        close(file)
        defer { close(descriptor) }
        #expect(connections.note(descriptor: descriptor, key: "k", isConnection: isConnection) == false)
        #expect(connections.count(for: "k").known == 0)
        #expect(connections.admit(key: "k") && connections.admit(key: "k"))
    }

    /// Silent connections (accepted, no message yet) are shut down only when more than the budget have been silent
    /// for `silentAfter` (younger ones, such as handshakes still under way, never count), first from the host holding
    /// the most of them, newest first; a connection that sent something is never among them, even when the monitor
    /// reports its `accepted` after its first message, nor one that is not TCP.
    @Test func silentConnectionsPastTheBudgetAreShedFromTheBusiestHostNewestFirst() {
        let connections = KeyConnections(silentAfter: .seconds(30))
        let start = ContinuousClock.now
        let honest = KeyConnections.Peer(host: "10.0.0.2", port: 40_000)
        connections.accepted(descriptor: 50, peer: honest, now: start)
        for n in 0..<5 {
            connections.accepted(
                descriptor: 100 + Int32(n), peer: .init(host: "10.0.0.9", port: 50_000 + UInt16(n)),
                now: start + .seconds(n + 1))
        }
        connections.accepted(descriptor: 300, peer: nil, now: start)
        #expect(connections.silentCount == 6)
        #expect(connections.shed(budget: 6, now: start + .seconds(60)).isEmpty)
        // At 31 s, two are due (50 and 100): under a budget of 3 nothing goes, however many younger ones there are.
        #expect(connections.shed(budget: 1, now: start + .seconds(31)).map(\.descriptor) == [100])
        #expect(connections.shed(budget: 3, now: start + .seconds(33)).isEmpty)
        let shed = connections.shed(budget: 1, now: start + .seconds(40))
        #expect(shed.map(\.descriptor) == [104, 103, 102, 101])
        #expect(shed.first?.peer == .init(host: "10.0.0.9", port: 50_004))
        // A message makes a connection not silent; so does one seen before the monitor's `accepted`.
        connections.accepted(descriptor: 103, peer: honest, now: start)
        _ = connections.note(descriptor: 103, key: "k", isConnection: { _ in true })
        _ = connections.note(descriptor: 200, key: "k", isConnection: { _ in true })
        connections.accepted(descriptor: 200, peer: honest, now: start)
        #expect(connections.silentCount == 1)
        connections.closed(descriptor: 50)
        #expect(connections.silentCount == 0)
        #expect(connections.silentBudget(allowedKeys: 10) == KeyConnections.silentFloor + 20)
    }

    /// The peer of a real TCP connection, and a shutdown that leaves a descriptor alone once another peer has it.
    @Test func aSilentConnectionIsShutDownOnlyWhileItsDescriptorHasTheSamePeer() throws {
        let (port, accepted, client) = try Self.tcpConnection()
        defer { close(accepted); close(client) }
        let peer = try #require(KeyConnections.peer(of: accepted))
        #expect(peer.host == "127.0.0.1")
        #expect(KeyConnections.peer(of: client)?.port == port)
        var other = peer
        other.port &+= 1
        #expect(!KeyConnections.shutDown(descriptor: accepted, localPorts: [port], peer: other))
        #expect(KeyConnections.shutDown(descriptor: accepted, localPorts: [port], peer: peer))
        var byte: UInt8 = 0
        #expect(read(client, &byte, 1) == 0)  // the client sees the end
    }

    /// A TCP connection on loopback: the listening port, the accepted end and the client end.
    static func tcpConnection() throws -> (port: UInt16, accepted: Int32, client: Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
        }
        try #require(connected)
        let accepted = accept(listener, nil, nil)
        try #require(accepted >= 0)
        return (UInt16(bigEndian: address.sin_port), accepted, client)
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
