import Foundation
import JetbridgeTestKit
import Testing

@testable import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The one lock-file type: taken at once or waited for, the holder's pid recorded and read, released for good.
@Suite struct FileLockTests {
    @Test func aSecondTakerIsRefusedWithTheHoldersPidUntilTheLockIsReleased() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let path = directory.appendingPathComponent("serve.lock").path
            #expect(FileLock.holder(of: path) == nil)
            let lock = try FileLock(path: path, recordingPID: true)
            #expect(FileLock.holder(of: path) == getpid())
            // flock locks belong to the open file description: a second open in this process conflicts too.
            do {
                _ = try FileLock(path: path)
                Issue.record("a second lock was granted")
            } catch {
                guard case .busy(let holder) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(holder == getpid())
            }
            lock.release()
            lock.release()
            #expect(FileLock.holder(of: path) == nil)
            #expect(try String(contentsOfFile: path, encoding: .utf8).isEmpty)
            _ = try FileLock(path: path)
        }
    }

    /// Shared holders (the receipts refreshes of several aggregators) coexist and record no pid; an exclusive taker
    /// (a rebuild) waits for all of them, and a shared taker is refused while it holds the lock, with its pid.
    @Test func sharedHoldersCoexistAndAnExclusiveOneExcludesThem() throws {
        let temporary = try TemporaryDirectory()
        let path = temporary.url.appendingPathComponent("lock").path
        // A pid left by an exclusive holder that died (kill -9 releases the lock, not the file's text).
        try Data("999999\n".utf8).write(to: URL(fileURLWithPath: path))
        let first = try FileLock(path: path, recordingPID: true, exclusive: false)
        let second = try FileLock(path: path, recordingPID: true, exclusive: false)
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("999999\n".utf8))
        // Refused by the shared holders: no pid named, not the dead one's.
        do {
            _ = try FileLock(path: path)
            Issue.record("an exclusive lock was granted beside shared ones")
        } catch {
            guard case .busy(let holder) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(holder == nil)
        }
        first.release()
        #expect(throws: FileLock.Failure.self) { try FileLock(path: path) }
        second.release()
        let exclusive = try FileLock(path: path, recordingPID: true)
        do {
            _ = try FileLock(path: path, exclusive: false)
            Issue.record("a shared lock was granted beside an exclusive one")
        } catch {
            guard case .busy(let holder) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(holder == getpid())
        }
        exclusive.release()
        _ = try FileLock(path: path, exclusive: false)
    }

    @Test func aWaiterGetsTheLockOnceItIsReleasedAndGivesUpAtItsDeadline() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let path = directory.appendingPathComponent("lock").path
            let first = try FileLock(path: path)
            let start = ContinuousClock.now
            #expect(throws: FileLock.Failure.self) { try FileLock(path: path, waitingUpTo: .milliseconds(100)) }
            #expect(ContinuousClock.now - start >= .milliseconds(100))
            let releaser = Thread { first.release() }
            releaser.start()
            _ = try FileLock(path: path, waitingUpTo: .seconds(20))
        }
    }

    @Test func aLinkAtTheLockIsRefusedAndItsTargetLeftAlone() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let target = directory.appendingPathComponent("target")
            try Data("keep".utf8).write(to: target)
            let path = directory.appendingPathComponent("lock").path
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target.path)
            do {
                _ = try FileLock(path: path, recordingPID: true)
                Issue.record("a link was followed")
            } catch {
                guard case .system(let error) = error else {
                    Issue.record("\(error)")
                    return
                }
                #expect(error.isRefusedLink)
            }
            #expect(try String(contentsOf: target, encoding: .utf8) == "keep")
            #expect(FileLock.holder(of: path) == nil)
        }
    }
}
