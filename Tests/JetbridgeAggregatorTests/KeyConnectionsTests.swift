import Foundation
import Testing

@testable import JetbridgeAggregator

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
