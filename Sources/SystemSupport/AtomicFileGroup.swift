internal import CSystemCalls

#if canImport(FoundationEssentials)
    package import FoundationEssentials
#else
    package import Foundation
#endif

#if canImport(Glibc)
    package import Glibc
#elseif canImport(Musl)
    package import Musl
#endif

/// Files in one directory replaced together, each atomically, with one flush for the whole group: each new file is
/// written to a temporary file; ``commit()`` makes them all durable at once (`syncfs(2)`), renames each over its
/// target, then fsyncs the directory once.
///
/// A crash at any point leaves every target either its old complete file or its new complete one: nothing is renamed
/// before every new file's data is on disk, and the renames are durable once ``commit()`` returns. What a crash
/// leaves besides are temporary files, for the caller to recognise by name and remove.
///
/// Why: ``FileSystem/writeAtomically(_:to:mode:)`` costs two flushes per file (the file's, the directory's); a
/// receipts refresh writing 100,000 small files so waited on the disk for minutes (issue 29). `syncfs` also flushes
/// whatever else was written to the same file system, which costs this writer time but no one else's correctness.
/// Where the system has no `syncfs`, each staged file is fsynced instead.
///
/// Not thread-safe: one writer uses a group. Staged files not renamed (a failure, or the group dropped before
/// ``commit()``) are removed by ``discard()`` and when the group is released.
package final class AtomicFileGroup {
    package let directory: String
    /// Open from the start: `syncfs` reports the write-back errors met since this descriptor was opened
    /// (Linux 5.8 and later), so a failed write of any staged file fails ``commit()``.
    private let directoryFD: Int32
    private var staged: [(temporary: String, target: String)] = []

    /// Files staged and not yet renamed.
    package var count: Int { staged.count }

    /// - Parameter directory: The directory of every file of the group; it must exist.
    /// - Throws: ``SystemError`` when it cannot be opened.
    package init(directory: String) throws(SystemError) {
        self.directory = directory
        directoryFD = try syscall("open", path: directory) { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
    }

    deinit {
        discard()
        close(directoryFD)
    }

    /// Writes `data` to the new file `temporary` (created with `mode`, `O_EXCL`, not yet synced), to be renamed over
    /// `target` by ``commit()``; both in ``directory``.
    /// - Throws: ``SystemError``; the temporary file is then removed.
    package func stage(_ data: Data, temporary: String, target: String, mode: mode_t) throws(SystemError) {
        do throws(SystemError) {
            try FileSystem.writeNewFile(data, to: temporary, mode: mode, sync: false)
        } catch {
            _ = unlink(temporary)
            throw error
        }
        staged.append((temporary, target))
    }

    /// Makes the staged files durable with one flush, renames each over its target, and fsyncs the directory (also
    /// with nothing staged: a rename an earlier crash left unsynced becomes durable so).
    /// - Throws: ``SystemError``; the staged files not renamed yet are removed.
    package func commit() throws(SystemError) {
        do throws(SystemError) {
            if !staged.isEmpty {
                try flush()
                for (index, file) in staged.enumerated() {
                    do throws(SystemError) {
                        try FileSystem.rename(file.temporary, to: file.target)
                    } catch {
                        staged.removeFirst(index)
                        throw error
                    }
                }
                staged.removeAll(keepingCapacity: true)
            }
            try syscall("fsync", path: directory) { fsync(directoryFD) }
        } catch {
            discard()
            throw error
        }
    }

    /// Removes the staged files not renamed yet.
    package func discard() {
        for file in staged { _ = unlink(file.temporary) }
        staged.removeAll(keepingCapacity: true)
    }

    private func flush() throws(SystemError) {
        if try syscall("syncfs", path: directory, tolerating: ENOSYS, { jb_syncfs(directoryFD) }) != nil { return }
        for file in staged {
            let fd = try FileSystem.openFile(file.temporary, O_RDONLY)
            defer { close(fd) }
            try syscall("fsync", path: file.temporary) { fsync(fd) }
        }
    }
}
