import Glibc
import SystemSupport

/// The files of one queue directory and the steps that change them. Callers hold the exclusive lock for
/// every method that writes.
struct QueueDirectory {
    static let lockName = "lock"

    let path: String

    func segmentPath(_ first: UInt64) -> String { path + "/" + SegmentName.name(first) }
    var quarantinePath: String { path + "/" + QuarantineFile.name }

    /// The first sequences of the segment files, ascending.
    func segments() throws(FileQueueError) -> [UInt64] {
        try io(FileSystem.list(path)).compactMap(SegmentName.parse).sorted()
    }

    /// The acknowledged position; a damaged or missing `ack` file counts as nothing acknowledged.
    func acknowledged() throws(FileQueueError) -> UInt64 {
        if case .position(let value) = try AckFile.read(directory: path) { return value }
        return 0
    }

    /// Checks segment `first` and repairs it: damage followed by good frames is copied to the quarantine
    /// file and covered by a skip frame; damage at the end is truncated — after being quarantined unless it is
    /// the torn tail of the segment appends go to. Idempotent: a second run finds nothing to do.
    /// - Returns: the scan after repair (its `validEnd` is the file's new size).
    @discardableResult
    func repair(segment first: UInt64, isTail: Bool, sync: Bool) throws(FileQueueError) -> SegmentScan {
        let file = try FileDescriptor.open(segmentPath(first), O_RDWR)
        let bytes = try file.readAll(to: try file.size())
        let scan = bytes.withUnsafeBytes { SegmentScan($0, previous: first &- 1) }
        guard !scan.damages.isEmpty else { return scan }
        for damage in scan.damages {
            let raw = Array(bytes[damage.start..<damage.end])
            let tornTail = isTail && damage.kind == .torn
            if !tornTail {
                try QuarantineFile.append(
                    raw, segment: first, offset: Int64(damage.start), previousSequence: damage.previousSequence,
                    nextSequence: damage.nextSequence, path: quarantinePath, sync: sync)
            }
            if damage.kind == .corrupt {
                try file.write(Frame.skipHeader(totalLength: damage.end - damage.start), at: Int64(damage.start))
            } else {
                try file.truncate(to: Int64(damage.start))
            }
        }
        if sync {
            try file.syncData()
            try syncDirectory()
        }
        return scan
    }

    func syncDirectory() throws(FileQueueError) {
        let directory = try FileDescriptor.open(path, O_RDONLY | O_DIRECTORY)
        try directory.sync()
    }

    /// Deletes, oldest first, every segment whose records are all ≤ `acknowledged`, never the last segment.
    ///
    /// A segment's records end where the next segment's begin, so segment *i* is done when segment *i+1*
    /// starts at or below `acknowledged + 1`. Deleting oldest first keeps the remaining segments contiguous
    /// after a crash at any point, and repeating the deletion is harmless.
    /// - Returns: the number of segments deleted.
    @discardableResult
    func deleteAcknowledgedSegments(
        through acknowledged: UInt64, sync: Bool, hook: (String) -> Void
    ) throws(FileQueueError) -> Int {
        let firsts = try segments()
        var deleted = 0
        for index in firsts.indices.dropLast() where firsts[index + 1] <= acknowledged &+ 1 {
            try io(FileSystem.unlinkIfExists(segmentPath(firsts[index])))
            deleted += 1
            hook("segment.deleted")
        }
        if deleted > 0 && sync { try syncDirectory() }
        return deleted
    }
}
