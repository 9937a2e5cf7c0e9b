import Foundation
import JetbridgeTestKit
import SystemSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory per test, removed afterwards.
private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    try JetbridgeTestKit.withTemporaryDirectory(prefix: "system-support") { try body($0.path) }
}

@Suite("SystemSupport: syscalls, atomic writes, locks, threads, durations")
struct SystemSupportTests {
    @Test func aFailedCallCarriesTheOperationThePathAndTheSystemsReason() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/missing"
            let error = #expect(throws: SystemError.self) {
                try syscall("open", path: path) { open(path, O_RDONLY) }
            }
            #expect(error?.errno == ENOENT)
            #expect(error?.path == path)
            #expect(error?.description == "open \(path) failed: No such file or directory (errno \(ENOENT))")
            #expect(error?.isNoSpace == false)
        }
    }

    @Test func aToleratedErrnoIsNilNotAnError() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/missing"
            #expect(try syscall("unlink", path: path, tolerating: ENOENT) { unlink(path) } == nil)
            try FileSystem.unlinkIfExists(path)
            #expect(throws: SystemError.self) { try FileSystem.fileSize(path) }
        }
    }

    @Test func anAtomicWriteReplacesTheFileWithItsModeAndLeavesNoTemporaryFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/state.json"
            try FileSystem.writeAtomically(Data("old".utf8), to: path, mode: 0o600)
            try FileSystem.writeAtomically(Data("new".utf8), to: path, mode: 0o600)
            #expect(FileManager.default.contents(atPath: path) == Data("new".utf8))
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(info.st_mode & 0o777 == 0o600)
            #expect(try FileSystem.list(directory) == ["state.json"])
        }
    }

    @Test func aFailedAtomicWriteThrowsAndLeavesTheDirectoryAsItWas() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/state.json"
            try FileSystem.writeAtomically(Data("old".utf8), to: path, mode: 0o600)
            // A directory in the way makes the rename fail after the temporary file was written.
            try FileManager.default.createDirectory(atPath: directory + "/blocked", withIntermediateDirectories: false)
            try FileManager.default.createDirectory(
                atPath: directory + "/blocked/inner", withIntermediateDirectories: false)
            let error = #expect(throws: SystemError.self) {
                try FileSystem.writeAtomically(Data("new".utf8), to: directory + "/blocked", mode: 0o600)
            }
            #expect(error?.path == directory + "/blocked")
            #expect(try FileSystem.list(directory).sorted() == ["blocked", "state.json"])
            #expect(FileManager.default.contents(atPath: path) == Data("old".utf8))
        }
    }

    @Test func openFileRefusesALinkAndLeavesItsTargetAlone() throws {
        try withTemporaryDirectory { directory in
            let target = directory + "/target"
            try Data("kept".utf8).write(to: URL(fileURLWithPath: target))
            let link = directory + "/serve.lock"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
            let error = #expect(throws: SystemError.self) {
                _ = try FileSystem.openFile(link, O_RDWR | O_CREAT | O_TRUNC)
            }
            #expect(error?.isRefusedLink == true)
            let reason = "it is a symbolic link, which is not followed"
            #expect(error?.description == "open \(link) failed: \(reason) (errno \(ELOOP))")
            #expect(throws: SystemError.self) { try FileSystem.refuseSymbolicLink(link) }
            #expect(FileManager.default.contents(atPath: target) == Data("kept".utf8))
            // A file, a missing name and a link in the directories above are fine.
            try FileSystem.refuseSymbolicLink(target)
            try FileSystem.refuseSymbolicLink(directory + "/missing")
            try FileManager.default.createSymbolicLink(atPath: directory + "/above", withDestinationPath: directory)
            let fd = try FileSystem.openFile(directory + "/above/target", O_RDONLY)
            #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0)
            close(fd)
        }
    }

    @Test func makeDirectoriesCreatesMissingParentsOwnerOnly() throws {
        try withTemporaryDirectory { directory in
            try FileSystem.makeDirectories(directory + "/a/b/c")
            try FileSystem.makeDirectories(directory + "/a/b/c")
            var info = stat()
            #expect(stat(directory + "/a/b", &info) == 0)
            #expect(info.st_mode & 0o777 == 0o700)
        }
    }

    @Test func aTryLockSaysWhenAnotherHolderHasTheFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/lock"
            let first = try syscall("open", path: path) { open(path, O_RDWR | O_CREAT, 0o600) }
            let second = try syscall("open", path: path) { open(path, O_RDWR) }
            defer {
                close(first)
                close(second)
            }
            #expect(try FileSystem.tryLock(first, path: path))
            #expect(try !FileSystem.tryLock(second, path: path))
            #expect(try !FileSystem.tryLock(second, exclusive: false, path: path))
            flock(first, LOCK_UN)
            #expect(try FileSystem.tryLock(first, exclusive: false, path: path))
            #expect(try FileSystem.tryLock(second, exclusive: false, path: path))
        }
    }

    @Test func lockedSerializesConcurrentUpdates() async {
        let counter = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<10_000 { counter.withLock { $0 += 1 } } }
            }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }

    @Test func aStartedThreadRunsUnderItsNameTruncatedForTheKernel() async {
        let name = await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            startThread("jb-system-support-test") {
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                continuation.resume(returning: comm.trimmingCharacters(in: .newlines))
            }
        }
        #expect(name == "jb-system-suppo")
    }

    @Test func theOpenFilesLimitIsRaisedToTheHardLimit() throws {
        var limit = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        // One below the hard limit first, so that there is something to raise (and nothing this process uses lost).
        limit.rlim_cur = limit.rlim_max - 1
        #expect(setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0)
        let hard = Int(limit.rlim_max)
        #expect(OpenFilesLimit.current == hard - 1 && OpenFilesLimit.hard == hard)
        let raised = OpenFilesLimit.raiseToHard()
        #expect(raised.before == hard - 1 && raised.after == hard)
        #expect(OpenFilesLimit.current == hard)
        #expect(OpenFilesLimit.raiseToHard() == (hard, hard))
    }

    @Test func durationsConvert() {
        #expect(Duration.milliseconds(1500).seconds == 1.5)
        #expect(Duration.microseconds(3).nanoseconds == 3_000)
        #expect(Duration.milliseconds(250).clampedMilliseconds == 250)
        #expect(Duration.seconds(Int64.max / 2).clampedMilliseconds == Int32.max)
        #expect(Duration.seconds(-Int64.max / 2).clampedMilliseconds == Int32.min)
    }
}
