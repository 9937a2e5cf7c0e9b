/// What a queue holds, from a read-only scan of its files.
public struct FileQueueStatus: Sendable, Hashable, Codable {
    /// Records stored in segment files (acknowledged ones not yet deleted included).
    public var records: Int
    /// Bytes of all segment files.
    public var bytes: Int64
    /// Stored records above ``acknowledgedThrough``.
    public var unacknowledged: Int
    /// Sequence of the first stored record, if any.
    public var firstSequence: UInt64?
    /// Sequence of the last stored record, if any.
    public var lastSequence: UInt64?
    /// The consumer's position: every record up to this sequence is acknowledged (0: none).
    public var acknowledgedThrough: UInt64
    /// Entries in the quarantine file: stretches of damaged bytes copied out of segments.
    public var quarantined: Int
    /// Segment files.
    public var segments: Int
    /// Damage found by this scan and not yet repaired (torn tails included); repaired on the next open
    /// or when a reader reaches it.
    public var unrepaired: Int

    public init(
        records: Int, bytes: Int64, unacknowledged: Int, firstSequence: UInt64?, lastSequence: UInt64?,
        acknowledgedThrough: UInt64, quarantined: Int, segments: Int, unrepaired: Int
    ) {
        self.records = records
        self.bytes = bytes
        self.unacknowledged = unacknowledged
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.acknowledgedThrough = acknowledgedThrough
        self.quarantined = quarantined
        self.segments = segments
        self.unrepaired = unrepaired
    }
}

/// A problem a read-only check (``FileQueue/check(directory:)``) found.
public struct FileQueueProblem: Sendable, Hashable, Codable, CustomStringConvertible {
    /// What kind of problem; damage kinds are repaired on open, the rest are notes.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A frame cut short at the end of the tail segment: an append that never returned. Truncated on open.
        case tornTail
        /// Bad bytes followed by good frames. Quarantined and skipped on open.
        case corruptFrame
        /// Bad bytes at the end of a segment. Quarantined and truncated on open.
        case corruptSegmentEnd
        /// A segment whose records are all acknowledged, left by a crash during deletion. Deleted on open.
        case acknowledgedSegment
        /// The `ack` file does not check out; the queue then delivers from its first record again.
        case damagedAckFile
        /// A file in the directory that is not part of a queue.
        case unknownFile

        /// True for damage to records (as opposed to leftovers that are cleaned up).
        public var isDamage: Bool {
            switch self {
            case .tornTail, .corruptFrame, .corruptSegmentEnd, .damagedAckFile: true
            case .acknowledgedSegment, .unknownFile: false
            }
        }
    }

    public var kind: Kind
    /// The file concerned.
    public var file: String
    /// Byte offset of the damage in `file`.
    public var offset: Int64 = 0
    /// Number of damaged bytes.
    public var length: Int64 = 0
    /// The last good record before the damage in that segment, if any.
    public var previousSequence: UInt64?
    /// The first good record after the damage in that segment, if any.
    public var nextSequence: UInt64?

    public var description: String {
        var text = "\(kind.rawValue): \(file) at byte \(offset), \(length) bytes"
        if let previousSequence { text += ", after sequence \(previousSequence)" }
        if let nextSequence { text += ", before sequence \(nextSequence)" }
        return text
    }
}

/// The result of a read-only check: the status and every problem found.
public struct FileQueueReport: Sendable, Hashable, Codable {
    public var status: FileQueueStatus
    public var problems: [FileQueueProblem]

    /// True when no record is damaged (leftovers such as acknowledged segments do not count).
    public var isClean: Bool { !problems.contains { $0.kind.isDamage } }
}
