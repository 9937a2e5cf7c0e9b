import Glibc
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

extension FileQueue {
    /// Checks the queue in `directory` without changing anything (no repair, no lock file created).
    ///
    /// Takes the shared lock, if the lock file exists, only to note how far each file goes — so appends in
    /// progress are not mistaken for damage — then scans every frame of every segment.
    /// - Parameter directory: the queue directory.
    /// - Returns: the status and every problem found, with segment, byte offset and neighbouring sequences.
    /// - Throws: ``FileQueueError`` with `.notAQueue` if the directory does not exist, `.io` if unreadable.
    public static func check(directory: URL) throws(FileQueueError) -> FileQueueReport {
        var problems: [FileQueueProblem] = []
        var status = FileQueueStatus(
            records: 0, bytes: 0, unacknowledged: 0, firstSequence: nil, lastSequence: nil, acknowledgedThrough: 0,
            quarantined: 0, segments: 0, unrepaired: 0)
        try forEachSegment(directory: directory, problems: &problems, status: &status) { _, _, _ in }
        return FileQueueReport(status: status, problems: problems)
    }

    /// Calls `body` with every valid record from `sequence` on, without changing anything (for `dump`).
    /// - Parameters:
    ///   - directory: the queue directory.
    ///   - sequence: the first sequence wanted.
    ///   - body: called with each record's sequence and payload, in order.
    /// - Throws: ``FileQueueError`` if the directory is not a queue or cannot be read.
    public static func forEachRecord(
        directory: URL, from sequence: UInt64 = 0, _ body: (UInt64, UnsafeRawBufferPointer) -> Void
    ) throws(FileQueueError) {
        var problems: [FileQueueProblem] = []
        var status = FileQueueStatus(
            records: 0, bytes: 0, unacknowledged: 0, firstSequence: nil, lastSequence: nil, acknowledgedThrough: 0,
            quarantined: 0, segments: 0, unrepaired: 0)
        try forEachSegment(directory: directory, problems: &problems, status: &status) { recordSequence, payload, _ in
            if recordSequence >= sequence { body(recordSequence, payload) }
        }
    }

    private static func forEachSegment(
        directory: URL, problems: inout [FileQueueProblem], status: inout FileQueueStatus,
        _ visit: (UInt64, UnsafeRawBufferPointer, UInt64) -> Void
    ) throws(FileQueueError) {
        let files = QueueDirectory(path: directory.path)
        var isDirectory = false
        guard FileManager.default.fileExists(atPath: files.path, isDirectory: &isDirectory), isDirectory
        else {
            throw FileQueueError(.notAQueue, "no queue directory here", path: files.path)
        }
        let lock = try FileDescriptor.openIfExists(files.path + "/" + QueueDirectory.lockName, O_RDONLY)
        try lock?.lock(exclusive: false)
        let names: [String]
        var tailSize: Int64 = 0
        do {
            defer { lock?.unlock() }
            names = try io(FileSystem.list(files.path))
            if let last = names.compactMap(SegmentName.parse).max() {
                tailSize = try io(FileSystem.fileSize(files.segmentPath(last)))
            }
        }
        let known: Set<String> = [
            QueueDirectory.lockName, AckFile.name, AckFile.spareName, AckFile.spareName + ".new", QuarantineFile.name,
        ]
        for name in names.sorted() where SegmentName.parse(name) == nil && !known.contains(name) {
            problems.append(FileQueueProblem(kind: .unknownFile, file: name))
        }
        switch try AckFile.read(directory: files.path) {
        case .position(let position): status.acknowledgedThrough = position
        case .missing: break
        case .damaged: problems.append(FileQueueProblem(kind: .damagedAckFile, file: AckFile.name))
        }
        status.quarantined = try QuarantineFile.read(files.quarantinePath).entries.count
        let firsts = names.compactMap(SegmentName.parse).sorted()
        status.segments = firsts.count
        for (index, first) in firsts.enumerated() {
            let isTail = index == firsts.count - 1
            let name = SegmentName.name(first)
            if !isTail && firsts[index + 1] <= status.acknowledgedThrough &+ 1 {
                problems.append(FileQueueProblem(kind: .acknowledgedSegment, file: name))
            }
            guard let file = try FileDescriptor.openIfExists(files.segmentPath(first), O_RDONLY) else { continue }
            let end = isTail ? tailSize : try file.size()
            status.bytes += end
            let bytes = try file.readAll(to: end)
            let scan = bytes.withUnsafeBytes {
                SegmentScan($0, previous: first &- 1, countAbove: status.acknowledgedThrough) { sequence, payload in
                    visit(sequence, payload, first)
                }
            }
            status.records += scan.records
            status.unacknowledged += scan.recordsAbove
            if status.firstSequence == nil { status.firstSequence = scan.firstSequence }
            status.lastSequence = scan.lastSequence ?? status.lastSequence
            for damage in scan.damages {
                let kind: FileQueueProblem.Kind =
                    switch damage.kind {
                    case .corrupt: .corruptFrame
                    case .torn: isTail ? .tornTail : .corruptSegmentEnd
                    case .corruptEnd: .corruptSegmentEnd
                    }
                problems.append(
                    FileQueueProblem(
                        kind: kind, file: name, offset: Int64(damage.start), length: Int64(damage.end - damage.start),
                        previousSequence: damage.previousSequence, nextSequence: damage.nextSequence))
                status.unrepaired += 1
            }
        }
    }
}
