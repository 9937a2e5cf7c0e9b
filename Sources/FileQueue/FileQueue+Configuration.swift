extension FileQueue {
    /// When an append is made durable.
    public enum SyncPolicy: Sendable, Hashable {
        /// `fdatasync` before `append` returns; one sync per segment touched for `append(contentsOf:)`
        /// (group commit). The only policy under which "returned" means "survives power loss".
        case always
        /// No syncs at all: records survive a process crash but not a power loss. For tests and benchmark
        /// baselines only.
        case none
    }

    /// How much of the queue `open` checks (and repairs).
    public enum Verification: Sendable, Hashable {
        /// Only the tail segment, the one appends go to: what a crash can leave torn. Sealed segments were
        /// fully synced before the next one was created; damage there is found (and repaired) when read.
        case tail
        /// Every segment. Costs a read of the whole queue.
        case all
    }

    /// Settings for a ``FileQueue``; every process that opens a directory may use different ones.
    public struct Configuration: Sendable {
        /// A segment is closed and a new one started when the next call's first frame would take it over this
        /// size. The frames of one `append(contentsOf:)` call are not split across segments unless they are
        /// larger than a segment themselves, so a segment can grow to twice this size (or hold one larger record).
        public var segmentSize: Int
        /// Appends that would take the segment files over this many bytes are refused with
        /// ``FileQueueError/Code/sizeCapReached``. `nil`: limited by the disk only.
        public var maxTotalBytes: Int64?
        /// Larger payloads are refused with ``FileQueueError/Code/recordTooLarge``.
        public var maxRecordSize: Int
        /// See ``SyncPolicy``.
        public var syncPolicy: SyncPolicy
        /// See ``Verification``.
        public var verification: Verification
        /// Called with the name of each crash-relevant step (`"append.written"`, `"ack.written"`,
        /// `"ack.renamed"`, `"segment.deleted"`, `"rotate.created"`) so crash tests can kill the process there.
        /// Not for production use.
        public var _stepHook: (@Sendable (String) -> Void)?

        /// - Parameters:
        ///   - segmentSize: bytes per segment file before rotating (default 8 MiB).
        ///   - maxTotalBytes: cap on the bytes of all segment files, or nil.
        ///   - maxRecordSize: largest payload accepted (default 16 MiB).
        ///   - syncPolicy: durability of appends (default `.always`).
        ///   - verification: what `open` checks (default `.tail`).
        public init(
            segmentSize: Int = 8 << 20, maxTotalBytes: Int64? = nil, maxRecordSize: Int = 16 << 20,
            syncPolicy: SyncPolicy = .always, verification: Verification = .tail
        ) {
            self.segmentSize = segmentSize
            self.maxTotalBytes = maxTotalBytes
            self.maxRecordSize = maxRecordSize
            self.syncPolicy = syncPolicy
            self.verification = verification
            self._stepHook = nil
        }

        /// The largest ``segmentSize``.
        public static let maxSegmentSize = 256 << 20

        func validate() throws(FileQueueError) {
            // A segment grows to twice this (or one larger record), and a repair covers damaged bytes with a skip frame
            // whose length is a payload length (at most 1 GiB): segments stay well under that.
            guard segmentSize > Frame.headerSize, segmentSize <= Self.maxSegmentSize else {
                throw FileQueueError(
                    .invalidConfiguration, "segmentSize must be 25 bytes to \(Self.maxSegmentSize) (256 MiB)")
            }
            guard maxRecordSize >= 0, maxRecordSize <= Frame.maxPayloadLength else {
                throw FileQueueError(
                    .invalidConfiguration, "maxRecordSize must be between 0 and \(Frame.maxPayloadLength)")
            }
            if let maxTotalBytes, maxTotalBytes <= 0 {
                throw FileQueueError(.invalidConfiguration, "maxTotalBytes must be positive")
            }
        }
    }
}
