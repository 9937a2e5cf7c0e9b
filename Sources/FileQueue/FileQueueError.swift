/// A failure of a ``FileQueue`` operation, with the place it happened.
///
/// Errors say what happened and what to do; `path`, `offset` and `sequence` locate the problem on disk
/// when they are known.
public struct FileQueueError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, for code that reacts to it.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        fileprivate enum Value: String, Sendable, Hashable {
            case io, noSpace, sizeCapReached, recordTooLarge, emptyBatch, invalidAcknowledgement
            case invalidConfiguration, corruptQueue, notAQueue
        }
        fileprivate let value: Value

        /// A system call failed (`errno` says which way).
        public static let io = Code(value: .io)
        /// The file system is full (`ENOSPC`) or over quota (`EDQUOT`); the record was not stored.
        public static let noSpace = Code(value: .noSpace)
        /// Storing the record would take the queue over ``FileQueue/Configuration/maxTotalBytes``.
        public static let sizeCapReached = Code(value: .sizeCapReached)
        /// The payload is larger than ``FileQueue/Configuration/maxRecordSize``.
        public static let recordTooLarge = Code(value: .recordTooLarge)
        /// `append(contentsOf:)` was given no records.
        public static let emptyBatch = Code(value: .emptyBatch)
        /// `acknowledge(through:)` named a sequence number that was never assigned.
        public static let invalidAcknowledgement = Code(value: .invalidAcknowledgement)
        /// A configuration value is out of range.
        public static let invalidConfiguration = Code(value: .invalidConfiguration)
        /// Damage that repair could not get past.
        public static let corruptQueue = Code(value: .corruptQueue)
        /// The directory is not a queue (for read-only use, which never creates one).
        public static let notAQueue = Code(value: .notAQueue)

        public var description: String { value.rawValue }
    }

    /// What went wrong.
    public var code: Code
    /// What happened and what to do, in words.
    public var message: String
    /// The file concerned, if any.
    public var path: String?
    /// The byte offset in `path`, if one is concerned.
    public var offset: Int64?
    /// The record sequence number concerned, if any.
    public var sequence: UInt64?
    /// The `errno` of a failed system call, if that is the cause.
    public var errno: Int32?

    public init(
        _ code: Code, _ message: String, path: String? = nil, offset: Int64? = nil, sequence: UInt64? = nil,
        errno: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.offset = offset
        self.sequence = sequence
        self.errno = errno
    }

    public var description: String {
        var text = "FileQueueError.\(code): \(message)"
        if let path { text += " [path: \(path)]" }
        if let offset { text += " [offset: \(offset)]" }
        if let sequence { text += " [sequence: \(sequence)]" }
        return text
    }
}
