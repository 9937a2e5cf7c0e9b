import Foundation
import Testing
import ZeroMQ

extension ZeroMQTests {
    @Suite struct CurveTests {
        @Test func z85MatchesTheRFCExample() throws {
            let bytes = Data([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
            #expect(try Z85.encode(bytes) == "HelloWorld")
            #expect(try Z85.decode("HelloWorld") == bytes)
            #expect(throws: ZeroMQError.self) { try Z85.encode(Data([1, 2, 3])) }
            #expect(throws: ZeroMQError.self) { try Z85.decode("Hell~\u{7F}") }
            #expect(throws: ZeroMQError.self) { try Z85.decode("Hell") }
        }

        @Test func keyPairsAreBinaryAndZ85() throws {
            let pair = try CurveKeyPair.generate()
            #expect(pair.publicKey.count == 32)
            #expect(pair.secretKey.count == 32)
            #expect(pair.publicKeyZ85.count == 40)
            #expect(try Z85.decode(pair.publicKeyZ85) == pair.publicKey)
            let again = try CurveKeyPair(publicKeyZ85: pair.publicKeyZ85, secretKeyZ85: pair.secretKeyZ85)
            #expect(again == pair)
            #expect(try CurveKeyPair.generate() != pair)
        }

        /// The one check of a key's text: 40 characters of Z85 that decode to 32 bytes.
        @Test func aCurveKeyIsFortyCharactersOfZ85() throws {
            let pair = try CurveKeyPair.generate()
            #expect(Z85.curveKey(pair.publicKeyZ85) == pair.publicKey)
            #expect(Z85.curveKey(String(pair.publicKeyZ85.dropLast(5))) == nil)  // 35 characters, 28 bytes
            #expect(Z85.curveKey(pair.publicKeyZ85 + "HelloWorld".prefix(5)) == nil)  // 45 characters
            #expect(Z85.curveKey(String(repeating: "~", count: 40)) == nil)  // the length, not the alphabet
            #expect(Z85.curveKey("") == nil)
        }

        /// A CURVE server (PULL unless told) on its own context with a ZAP handler, and its monitor.
        struct Server {
            let context: ZeroMQContext
            let keys: CurveKeyPair
            let zap: ZAPHandler
            let socket: Socket
            let events: AsyncStream<MonitorEvent>
            let endpoint: String

            init(allowlist: [String: String], type: SocketType = .pull) throws {
                context = try ZeroMQContext()
                keys = try CurveKeyPair.generate()
                zap = try ZAPHandler(context: context, allowlist: allowlist)
                socket = try makeSocket(context, type)
                try socket.makeCurveServer(keys: keys)
                events = try socket.monitor(events: [.handshakeSucceeded, .handshakeFailed, .accepted])
                endpoint = try bindLoopback(socket)
            }

            func stop() throws {
                try socket.close(linger: .zero)
                zap.stop()
                context.terminate()
            }
        }

        @Test func allowListedClientIsAdmittedWithItsIdentity() async throws {
            let client = try CurveKeyPair.generate()
            let server = try Server(allowlist: [client.publicKeyZ85: "device-7"])
            let clientContext = try ZeroMQContext()
            let push = try makeSocket(clientContext, .push)
            try push.makeCurveClient(keys: client, serverPublicKey: server.keys.publicKey)
            try push.connect(server.endpoint)
            try push.send([Data("batch".utf8), Data("records".utf8)])

            let message = try #require(try server.socket.receiveWithMetadata())
            #expect(message.frames == [Data("batch".utf8), Data("records".utf8)])
            #expect(message.userID == "device-7")
            #expect(message.peerAddress == "127.0.0.1")
            _ = try await firstEvent(in: server.events, "handshake succeeded") {
                if case .handshakeSucceeded = $0 { return true } else { return false }
            }

            // The allowlist changes at runtime: a revoked key is refused on its next connection.
            server.zap.revoke(publicKeyZ85: client.publicKeyZ85)
            let second = try makeSocket(clientContext, .push)
            try second.makeCurveClient(keys: client, serverPublicKey: server.keys.publicKey)
            try second.connect(server.endpoint)
            let refused = try await firstEvent(in: server.events, "refusal after revoke") {
                if case .handshakeFailed = $0 { return true } else { return false }
            }
            #expect(refused.isAuthenticationFailure(status: 400))

            try push.close()
            try second.close()
            await clientContext.terminate()
            try server.stop()
        }

        /// On a ROUTER the first frame is the routing id the socket prepends, which carries no metadata; the
        /// identity must still come through from the peer's frames.
        @Test func routerSeesTheIdentityBehindItsRoutingIDFrame() async throws {
            let client = try CurveKeyPair.generate()
            let server = try Server(allowlist: [client.publicKeyZ85: "device-8"], type: .router)
            let clientContext = try ZeroMQContext()
            let dealer = try makeSocket(clientContext, .dealer)
            try dealer.set(.routingID, Data("peer-1".utf8))
            try dealer.makeCurveClient(keys: client, serverPublicKey: server.keys.publicKey)
            try dealer.connect(server.endpoint)
            try dealer.send(Data("hello".utf8))

            let message = try #require(try server.socket.receiveWithMetadata())
            #expect(message.frames == [Data("peer-1".utf8), Data("hello".utf8)])
            #expect(message.userID == "device-8")
            #expect(message.peerAddress == "127.0.0.1")

            try dealer.close()
            await clientContext.terminate()
            try server.stop()
        }

        @Test func unknownKeyIsRefusedAndMonitorSaysWhy() async throws {
            let known = try CurveKeyPair.generate()
            let server = try Server(allowlist: [known.publicKeyZ85: "device-1"])
            let clientContext = try ZeroMQContext()
            let stranger = try CurveKeyPair.generate()
            let push = try makeSocket(clientContext, .push)
            try push.makeCurveClient(keys: stranger, serverPublicKey: server.keys.publicKey)
            try push.connect(server.endpoint)
            try push.send(Data("let me in".utf8), options: .dontWait)

            let event = try await firstEvent(in: server.events, "handshake failure") {
                if case .handshakeFailed = $0 { return true } else { return false }
            }
            #expect(event.isAuthenticationFailure(status: 400))
            #expect(try server.socket.receive(options: .dontWait) == nil)

            try push.close()
            await clientContext.terminate()
            try server.stop()
        }

        @Test func plaintextClientCannotTalkToCurveServer() async throws {
            let server = try Server(allowlist: [:])
            let clientContext = try ZeroMQContext()
            let push = try makeSocket(clientContext, .push)
            try push.connect(server.endpoint)
            try push.send(Data("plaintext".utf8), options: .dontWait)

            // Which side notices the mechanism mismatch first varies: the server reports either a protocol error
            // or the client hanging up mid-handshake. Either way the handshake fails and nothing is delivered.
            let event = try await firstEvent(in: server.events, "handshake failure") {
                if case .handshakeFailed = $0 { return true } else { return false }
            }
            if case .handshakeFailed(_, .authentication) = event {
                Issue.record("a plaintext client must fail before ZAP, got \(event)")
            }
            #expect(try server.socket.receive(options: .dontWait) == nil)

            try push.close()
            await clientContext.terminate()
            try server.stop()
        }
    }
}

extension ZeroMQTests.CurveTests {
    @Test func handlerRefusesTheNullMechanismWhenAsked() async throws {
        // A non-CURVE server consults ZAP only when it has a ZAP domain; the handler then refuses it too.
        let context = try ZeroMQContext()
        let zap = try ZAPHandler(context: context, allowlist: [:])
        let pull = try makeSocket(context, .pull)
        try pull.set(.zapDomain, "jetbridge")
        let events = try pull.monitor(events: .handshakeFailed)
        let endpoint = try bindLoopback(pull)
        let push = try makeSocket(context, .push)
        try push.connect(endpoint)
        try push.send(Data("null mechanism".utf8), options: .dontWait)

        let event = try await firstEvent(in: events, "ZAP refusal") { _ in true }
        #expect(event.isAuthenticationFailure(status: 400))
        #expect(try pull.receive(options: .dontWait) == nil)
        try push.close()
        try pull.close()
        zap.stop()
        await context.terminate()
    }
}

extension MonitorEvent {
    func isAuthenticationFailure(status: Int) -> Bool {
        if case .handshakeFailed(_, .authentication(status)) = self { return true }
        return false
    }
}
