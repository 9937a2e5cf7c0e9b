import Foundation
import Testing
import ZeroMQ

extension ZeroMQTests {
    @Suite struct SocketTests {
        @Test func multipartRoundTripOverTCP() throws {
            let context = try ZeroMQContext()
            let pull = try makeSocket(context, .pull)
            let push = try makeSocket(context, .push)
            try push.connect(try bindLoopback(pull))

            let frames = [Data("header".utf8), Data(), Data(repeating: 0xAB, count: 100_000), Data([0, 1, 2])]
            try push.send(frames)
            try push.send(Data("single".utf8))

            #expect(try pull.receiveMultipart() == frames)
            #expect(try pull.receiveMultipart() == [Data("single".utf8)])
            try push.close()
            try pull.close()
            context.terminate()
        }

        @Test func multipartRoundTripOverIPC() async throws {
            try await withTemporaryDirectory { directory in
                let context = try ZeroMQContext()
                let endpoint = "ipc://\(directory.path)/pair.sock"
                let a = try makeSocket(context, .pair)
                let b = try makeSocket(context, .pair)
                try a.bind(endpoint)
                try b.connect(endpoint)
                try a.send(Data("ping".utf8), more: true)
                try a.send(Data("1".utf8))
                #expect(try b.receive() == Data("ping".utf8))
                #expect(try b.get(.receiveMore))
                #expect(try b.receive() == Data("1".utf8))
                #expect(try b.get(.receiveMore) == false)
                try b.send([Data("pong".utf8)])
                #expect(try a.receiveMultipart() == [Data("pong".utf8)])
                try a.unbind(endpoint)
                try b.disconnect(endpoint)
                #expect(throws: ZeroMQError.self) { try b.disconnect(endpoint) }
            }
        }

        @Test func dealerAndRouterAddressEachOtherByRoutingID() throws {
            let context = try ZeroMQContext()
            let router = try makeSocket(context, .router)
            try router.set(.routerMandatory, true)
            try router.set(.routingID, Data("aggregator".utf8))
            let endpoint = try bindLoopback(router)
            let dealer = try makeSocket(context, .dealer)
            try dealer.set(.routingID, Data("device-1".utf8))
            #expect(try dealer.get(.routingID) == Data("device-1".utf8))
            try dealer.connect(endpoint)

            try dealer.send([Data("batch".utf8), Data("42".utf8)])
            let request = try #require(try router.receiveMultipart())
            #expect(request == [Data("device-1".utf8), Data("batch".utf8), Data("42".utf8)])

            try router.send([Data("device-1".utf8), Data("ack".utf8), Data("42".utf8)])
            #expect(try dealer.receiveMultipart() == [Data("ack".utf8), Data("42".utf8)])

            // With ROUTER_MANDATORY an unknown peer is an error, not a silent drop.
            let error = #expect(throws: ZeroMQError.self) {
                try router.send([Data("nobody".utf8), Data("lost".utf8)])
            }
            #expect(error?.code == .hostUnreachable)
        }

        @Test func routerHandoverGivesARoutingIDToTheNewestConnection() throws {
            let context = try ZeroMQContext()
            let router = try makeSocket(context, .router)
            try router.set(.routerMandatory, true)
            try router.set(.routerHandover, true)
            let endpoint = try bindLoopback(router)
            let old = try makeSocket(context, .dealer)
            try old.set(.routingID, Data("device-1".utf8))
            try old.connect(endpoint)
            try old.send(Data("hello from old".utf8))
            #expect(try router.receiveMultipart() == [Data("device-1".utf8), Data("hello from old".utf8)])

            // A restarted agent connects with the same id while the old connection is still open.
            let new = try makeSocket(context, .dealer)
            try new.set(.routingID, Data("device-1".utf8))
            try new.connect(endpoint)
            try new.send(Data("hello from new".utf8))
            #expect(try router.receiveMultipart() == [Data("device-1".utf8), Data("hello from new".utf8)])

            try router.send([Data("device-1".utf8), Data("ack".utf8)])
            #expect(try new.receive() == Data("ack".utf8))
            try old.set(.receiveTimeout, .milliseconds(200))
            #expect(try old.receive() == nil)
        }

        @Test func subscribersGetOnlyTheirPrefixes() throws {
            let context = try ZeroMQContext()
            let publisher = try makeSocket(context, .pub)
            let subscriber = try makeSocket(context, .sub)
            try subscriber.subscribe("orders.")
            try subscriber.subscribe(Data("scan".utf8))
            try subscriber.subscribe("sync")
            try subscriber.connect(try bindLoopback(publisher))

            // Subscriptions travel to the publisher asynchronously: publish until one arrives (bounded).
            try subscriber.set(.receiveTimeout, .milliseconds(50))
            var joined = false
            for _ in 0..<400 where !joined {
                try publisher.send(Data("sync".utf8))
                joined = try subscriber.receive() != nil
            }
            #expect(joined)
            try subscriber.unsubscribe("sync")
            try subscriber.set(.receiveTimeout, .seconds(20))

            for topic in ["orders.new", "bags.lost", "scan.origin", "order", "orders.x", "syncx"] {
                try publisher.send([Data(topic.utf8), Data("body".utf8)])
            }
            try publisher.send([Data("orders.end".utf8)])

            var topics: [String] = []
            while true {
                let frames = try #require(try subscriber.receiveMultipart())
                let topic = String(decoding: frames[0], as: UTF8.self)
                if topic == "orders.end" { break }
                if topic.hasPrefix("sync") { continue }  // stray warm-up messages still in flight
                topics.append(topic)
            }
            #expect(topics == ["orders.new", "scan.origin", "orders.x"])
        }

        @Test func nonBlockingSendAtHighWaterMarkSaysTryAgain() throws {
            let context = try ZeroMQContext()
            let pull = try makeSocket(context, .pull)
            try pull.set(.receiveHighWaterMark, 5)
            let push = try makeSocket(context, .push)
            try push.set(.sendHighWaterMark, 5)
            try push.connect(try bindLoopback(pull))

            let payload = Data(repeating: 7, count: 1024)
            var sent = 0
            var sawTryAgain = false
            while !sawTryAgain && sent < 1_000_000 {
                let outcome = Result { () throws(ZeroMQError) in try push.send(payload, options: .dontWait) }
                switch outcome {
                case .success: sent += 1
                case .failure(let error):
                    try #require(error.isTryAgain, "\(error)")
                    sawTryAgain = true
                }
            }
            #expect(sawTryAgain)
            #expect(sent > 0)

            // Everything that was accepted arrives; nothing accepted is lost.
            for _ in 0..<sent { _ = try #require(try pull.receive()) }
            #expect(try pull.receive(options: .dontWait) == nil)
        }

        @Test func pollReportsWhichSocketIsReadable() throws {
            let context = try ZeroMQContext()
            let quiet = try makeSocket(context, .pull)
            let busy = try makeSocket(context, .pull)
            _ = try bindLoopback(quiet)
            let push = try makeSocket(context, .push)
            try push.connect(try bindLoopback(busy))
            try push.send(Data("x".utf8))

            let ready = try poll([PollItem(quiet, .readable), PollItem(busy, .readable)], timeout: .seconds(20))
            #expect(ready == [[], .readable])
            #expect(try poll([PollItem(quiet, .readable)], timeout: .zero) == [[]])
        }

        @Test func optionsRoundTrip() throws {
            let context = try ZeroMQContext()
            let socket = try context.socket(.dealer)
            try roundTrip(socket, .linger, .milliseconds(1500))
            try roundTrip(socket, .linger, nil)
            try roundTrip(socket, .sendHighWaterMark, 123)
            try roundTrip(socket, .receiveHighWaterMark, 456)
            try roundTrip(socket, .immediate, true)
            try roundTrip(socket, .heartbeatInterval, .seconds(2))
            try roundTrip(socket, .heartbeatTimeout, .seconds(6))
            try roundTrip(socket, .heartbeatTTL, .seconds(10))
            try roundTrip(socket, .reconnectInterval, .milliseconds(250))
            try roundTrip(socket, .reconnectIntervalMax, .seconds(30))
            try roundTrip(socket, .connectTimeout, .seconds(5))
            try roundTrip(socket, .maxMessageSize, 1 << 20)
            try roundTrip(socket, .maxMessageSize, nil)
            try roundTrip(socket, .sendTimeout, .seconds(3))
            try roundTrip(socket, .receiveTimeout, nil)
            try roundTrip(socket, .routingID, Data("device-9".utf8))
            try roundTrip(socket, .zapDomain, "jetbridge")
            try socket.close(linger: .zero)
        }

        private func roundTrip<Value: Equatable>(
            _ socket: Socket,
            _ option: SocketOption<Value>,
            _ value: Value,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            try socket.set(option, value)
            #expect(try socket.get(option) == value, sourceLocation: sourceLocation)
        }

        @Test func errorsNameTheOperationAndCode() throws {
            let context = try ZeroMQContext()
            let socket = try context.socket(.pull)
            let bad = #expect(throws: ZeroMQError.self) { try socket.bind("tcp://not an endpoint") }
            #expect(bad?.operation == "bind tcp://not an endpoint")
            #expect(bad?.text.isEmpty == false)

            #expect(try socket.receive(options: .dontWait) == nil)
            #expect(try socket.receiveMultipart(options: .dontWait) == nil)

            let push = try context.socket(.push)
            try push.set(.linger, .zero)
            let full = #expect(throws: ZeroMQError.self) { try push.send(Data("x".utf8), options: .dontWait) }
            #expect(full?.isTryAgain == true)

            try socket.close(linger: .zero)
            try socket.close(linger: .zero)
            let closed = #expect(throws: ZeroMQError.self) { try socket.receive() }
            #expect(closed?.code == .notSocket)
        }

        @Test func shutdownEndsBlockingReceiveWithTerminated() throws {
            let context = try ZeroMQContext()
            let socket = try context.socket(.pull)
            try socket.set(.linger, .zero)
            context.shutdown()
            let error = #expect(throws: ZeroMQError.self) { try socket.receive() }
            #expect(error?.isTerminated == true)
            try socket.close()
            context.terminate()
            let late = #expect(throws: ZeroMQError.self) { try context.socket(.push) }
            #expect(late?.isTerminated == true)
        }
    }
}
