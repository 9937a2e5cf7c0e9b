import Foundation
import Testing
import ZeroMQ

extension ZeroMQTests {
    @Suite struct AsyncSocketTests {
        @Test func messagesFlowThroughThreadOwnedSockets() async throws {
            let context = try ZeroMQContext()
            var endpoint = ""
            let pull = try AsyncSocket(context: context, type: .pull, receiveBufferLimit: 4) { socket in
                try socket.set(.linger, .zero)
                endpoint = try bindLoopback(socket)
            }
            let push = try AsyncSocket(context: context, type: .push) { socket in
                try socket.set(.sendHighWaterMark, 2)
                try socket.connect(endpoint)
            }

            let count = 200
            let sender = Task {
                for index in 0..<count {
                    try await push.send([Data("\(index)".utf8), Data(repeating: 1, count: index)])
                }
            }
            // The bound is for a hang, not a speed: the receive loop runs on Swift's cooperative pool (as wide as the
            // machine's cores), which the whole suite's blocking tests share. In full runs on a loaded machine the pool
            // was held for about 240 s and this test failed at its 20 s bound (alone, it takes milliseconds).
            let received = try await withTimeout("\(count) messages", seconds: 600) {
                var received: [Int] = []
                for try await message in pull.messages {
                    received.append(Int(String(decoding: message.frames[0], as: UTF8.self)) ?? -1)
                    #expect(message.frames[1].count == received.last)
                    if received.count == count { break }
                }
                return received
            }
            try await sender.value
            #expect(received == Array(0..<count))

            await push.close(linger: .seconds(5))
            await pull.close()
            let afterClose = try await pull.receive()
            #expect(afterClose == nil)
            await #expect(throws: ZeroMQError.self) { try await push.send([Data("late".utf8)]) }
            await context.terminate()
        }

        @Test func contextShutdownEndsTheReceiveLoopCleanly() async throws {
            let context = try ZeroMQContext()
            let pull = try AsyncSocket(context: context, type: .pull) { socket in
                try socket.set(.linger, .zero)
                _ = try bindLoopback(socket)
            }
            let loop = Task {
                var count = 0
                for try await _ in pull.messages { count += 1 }
                return count
            }
            context.shutdown()
            let count = try await withTimeout("receive loop to end") { try await loop.value }
            #expect(count == 0)
            await context.terminate()
        }

        @Test func sendsThatNeverQueuedFailOnCloseOrCancel() async throws {
            let context = try ZeroMQContext()
            // A PUSH without peers can never queue: its sends wait, off the cooperative pool.
            let push = try AsyncSocket(context: context, type: .push) { socket in
                try socket.set(.linger, .zero)
            }
            let cancelled = Task { try await push.send([Data("never".utf8)]) }
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { try await cancelled.value }

            let waiting = Task { try await push.send([Data("also never".utf8)]) }
            // Let the send reach the socket's queue before closing (bounded; the outcome is the same either way).
            try await Task.sleep(for: .milliseconds(20))
            await push.close()
            let error = await #expect(throws: ZeroMQError.self) { try await waiting.value }
            #expect(error?.code == .notSocket)
            await context.terminate()
        }

        @Test func dealerRouterRequestReplyWithoutBlockingThePool() async throws {
            let context = try ZeroMQContext()
            var endpoint = ""
            let router = try AsyncSocket(context: context, type: .router) { socket in
                try socket.set(.linger, .zero)
                endpoint = try bindLoopback(socket)
            }
            let dealer = try AsyncSocket(context: context, type: .dealer) { socket in
                try socket.set(.linger, .zero)
                try socket.set(.routingID, Data("dev".utf8))
                try socket.connect(endpoint)
            }
            try await dealer.send([Data("batch-1".utf8)])
            let request = try await withTimeout("request") { try await router.receive() }
            #expect(request?.frames == [Data("dev".utf8), Data("batch-1".utf8)])
            try await router.send([Data("dev".utf8), Data("ack-1".utf8)])
            let reply = try await withTimeout("reply") { try await dealer.receive() }
            #expect(reply?.frames == [Data("ack-1".utf8)])
            await dealer.close()
            await router.close()
            await context.terminate()
        }
    }
}
