import Foundation
import Testing

@testable import SystemSupport

/// What SystemSupport does itself so that the agent links FoundationEssentials only: trimming, a file error's words,
/// named threads and their lock.
@Suite struct WithoutFoundationTests {
    @Test func trimmingRemovesWhitespaceAndNewlinesAtTheEndsOnly() {
        #expect(" \t1234\n".trimmingWhitespace() == "1234")
        #expect("a b".trimmingWhitespace() == "a b")
        #expect("  \n ".trimmingWhitespace() == "")
        #expect("".trimmingWhitespace() == "")
        #expect("\u{00A0}ZA101\r\n"[...].trimmingWhitespace() == "ZA101")
    }

    @Test func aFileErrorIsTheSystemsWordsForItsErrno() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-\(UUID())").path
        do {
            _ = try Data(contentsOf: URL(fileURLWithPath: missing))
            Issue.record("read a file that does not exist")
        } catch {
            #expect(fileErrorText(error) == "No such file or directory")
        }
        #expect(fileErrorText(POSIXError(.EACCES)) == "Permission denied")
    }

    @Test func aStartedThreadCarriesItsNameAndTheLockWakesItsWaiter() throws {
        let lock = ConditionLock()
        let seen = Locked<String?>(nil)
        startThread("jb-a-long-thread-name") {
            let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingWhitespace()
            lock.lock()
            seen.withLock { $0 = name }
            lock.signal()
            lock.unlock()
        }
        lock.lock()
        while seen.withLock({ $0 }) == nil { lock.wait() }
        lock.unlock()
        // The kernel keeps 15 bytes of a thread's name.
        #expect(seen.withLock { $0 } == "jb-a-long-threa")
    }
}
