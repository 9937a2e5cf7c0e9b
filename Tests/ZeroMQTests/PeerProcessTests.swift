import Foundation
import JetbridgeTestKit
import Testing
import ZeroMQ

extension ZeroMQTests {
    /// Faults with a real second process: killed with SIGKILL, or exiting right after closing with a linger.
    @Suite struct PeerProcessTests {
        @Test func monitorReportsDisconnectWhenPeerIsKilled() async throws {
            let context = try ZeroMQContext()
            let router = try makeSocket(context, .router)
            let events = try router.monitor(events: [.accepted, .handshakeSucceeded, .disconnected])
            let endpoint = try bindLoopback(router)

            let peer = try Peer(["connect-and-hang", endpoint])
            #expect(peer.waitForLine("connected"))
            let hello = try #require(try router.receiveMultipart())
            #expect(hello.last == Data("hello".utf8))
            _ = try await firstEvent(in: events, "handshake with the peer") {
                if case .handshakeSucceeded = $0 { return true } else { return false }
            }

            peer.killHard()
            let event = try await firstEvent(in: events, "disconnect after kill -9") {
                if case .disconnected = $0 { return true } else { return false }
            }
            guard case .disconnected(let where_, _) = event else { return }
            #expect(where_.hasPrefix("tcp://127.0.0.1:"))

            try router.close(linger: .zero)
            await context.terminate()
        }

        @Test func closeWithLingerDeliversQueuedMessagesBeforeExit() async throws {
            try await withTemporaryDirectory { directory in
                // The peer queues messages while nothing is bound yet, then closes and terminates: only its linger
                // can get them here.
                let endpoint = "ipc://\(directory.path)/drain.sock"
                let count = 500
                let peer = try Peer(["queue-then-close", endpoint, "\(count)", "30000"])
                #expect(peer.waitForLine("queued"))

                let context = try ZeroMQContext()
                let pull = try makeSocket(context, .pull)
                try pull.bind(endpoint)
                var received: [String] = []
                for _ in 0..<count {
                    let frame = try #require(try pull.receive())
                    received.append(String(decoding: frame, as: UTF8.self))
                }
                #expect(received == (0..<count).map { "message-\($0)" })
                #expect(peer.waitForLine("done"))
                peer.process.waitUntilExit()
                #expect(peer.process.terminationStatus == 0)
                try pull.close()
                await context.terminate()
            }
        }
    }
}
