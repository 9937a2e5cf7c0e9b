import Foundation
import Synchronization
import Testing
import ZeroMQ

extension ZeroMQTests {
    @Suite struct MessageTests {
        @Test func zeroCopyFramesRoundTrip() throws {
            let context = try ZeroMQContext()
            let pull = try makeSocket(context, .pull)
            let push = try makeSocket(context, .push)
            try push.connect(try bindLoopback(pull))

            var header = try Message(count: 4)
            header.withUnsafeMutableBytes { $0.copyBytes(from: [1, 2, 3, 4]) }
            let headerCount = header.count
            #expect(headerCount == 4)
            try push.send(header, more: true)

            let size = 64 * 1024
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
            buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
            let released = Atomic(false)
            let body = try Message(bytesNoCopy: buffer) { bytes in
                bytes.deallocate()
                released.store(true, ordering: .sequentiallyConsistent)
            }
            try push.send(body)

            guard let first = try pull.receiveMessage() else {
                Issue.record("no first frame")
                return
            }
            let firstHasMore = first.hasMore
            #expect(firstHasMore)
            let firstBytes = first.withUnsafeBytes { Array($0) }
            #expect(firstBytes == [1, 2, 3, 4])
            guard let second = try pull.receiveMessage() else {
                Issue.record("no second frame")
                return
            }
            let secondHasMore = second.hasMore
            let secondCount = second.count
            #expect(!secondHasMore)
            #expect(secondCount == size)
            let allFilled = second.withUnsafeBytes { $0.allSatisfy { $0 == 0x5A } }
            #expect(allFilled)
            let data = second.takeData()
            #expect(data.count == size && data.first == 0x5A)

            try push.close()
            try pull.close()
            context.terminate()
            // Termination waits for the I/O threads, so libzmq has released the caller's buffer by now.
            let wasReleased = released.load(ordering: .sequentiallyConsistent)
            #expect(wasReleased)
        }

        @Test func copiedMessageAndEmptyMessage() throws {
            let context = try ZeroMQContext()
            let a = try makeSocket(context, .pair)
            let b = try makeSocket(context, .pair)
            try b.connect(try bindLoopback(a))
            try a.send(try Message(Data("copied".utf8)), more: true)
            try a.send(Message())
            let frames = try #require(try b.receiveMultipart())
            #expect(frames == [Data("copied".utf8), Data()])
        }
    }
}
