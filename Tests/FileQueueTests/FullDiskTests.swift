import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct FullDiskTests {
    @Test(
        .enabled(if: SmallFileSystem.available, "needs permission to mount a tmpfs; the size-cap test covers refusal"))
    func fullDiskRefusesNewRecordsAndKeepsStoredOnes() throws {
        let directory = try TemporaryDirectory()
        let mountPoint = directory.url.path
        #expect(SmallFileSystem.mount(at: mountPoint, size: "256k"))
        defer { SmallFileSystem.unmount(mountPoint) }
        let configuration = FileQueue.Configuration(segmentSize: 32 << 10)
        let queue = try FileQueue(directory: directory.queue, configuration: configuration)
        var stored = 0
        var refusal: FileQueueError?
        while refusal == nil {
            do {
                let range = try queue.append(contentsOf: (stored..<stored + 3).map { payload($0, size: 250) })
                #expect(range.lowerBound == UInt64(stored + 1))
                stored += 3
            } catch {
                refusal = error
            }
        }
        #expect(refusal?.code == .noSpace, "\(String(describing: refusal))")
        #expect(stored > 100)
        // A batch that did not fit may leave room for single records; fill it, then they are refused too.
        var single: FileQueueError?
        while single == nil {
            do {
                #expect(try queue.append(payload(stored, size: 250)) == UInt64(stored + 1))
                stored += 1
            } catch {
                single = error
            }
        }
        #expect(single?.code == .noSpace)
        #expect(try FileQueue.check(directory: directory.queue).isClean)
        let reopened = try FileQueue(directory: directory.queue, configuration: configuration)
        #expect(try readAll(reopened).map(\.payload) == (0..<stored).map { payload($0, size: 250) })
        // Acknowledging still works on the full disk (it frees the space), and then appends go on.
        try reopened.acknowledge(through: UInt64(stored))
        #expect(try reopened.append(payload(stored, size: 250)) == UInt64(stored + 1))
    }
}
