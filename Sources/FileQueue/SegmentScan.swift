/// A stretch of a segment that holds no valid frame.
struct Damage: Equatable {
    enum Kind: Equatable {
        /// Valid frames follow: the bytes are quarantined and covered by a skip frame.
        case corrupt
        /// At the end of the file, a frame cut short (or zeros): what a writer killed mid-write leaves.
        /// In the tail segment it is truncated; in a sealed segment (fully synced before the next one was
        /// created) it is corruption and quarantined first.
        case torn
        /// At the end of the file, a complete-looking frame that does not check out: quarantined, then truncated.
        case corruptEnd
    }

    var kind: Kind
    var start: Int
    var end: Int
    /// The last good record before the damage, if any in this segment.
    var previousSequence: UInt64?
    /// The first good record after the damage (only for ``Kind/corrupt``).
    var nextSequence: UInt64?
}

/// The result of checking every frame of one segment (or of a stretch of it).
struct SegmentScan {
    var records = 0
    var payloadBytes = 0
    var firstSequence: UInt64?
    var lastSequence: UInt64?
    /// Records with a sequence above the `countAbove` given to the scan.
    var recordsAbove = 0
    /// Where the next frame would go: after the last valid frame, before any damage at the end.
    var validEnd = 0
    var damages: [Damage] = []

    /// Checks the frames in `bytes`, which starts at file offset `base`.
    ///
    /// A record is valid only if its checksums hold and its sequence is above `previous` (and the records
    /// before it). After damage the scan resumes at the next offset, at least one header further on, where a
    /// valid frame starts; that is a frame boundary because frames are at least a header long.
    /// - Parameters:
    ///   - bytes: the bytes to scan.
    ///   - base: the file offset of `bytes[0]`; offsets in the result are file offsets.
    ///   - previous: the highest sequence before these bytes (segment's first sequence − 1 at offset 0).
    ///   - countAbove: records above this sequence are counted in `recordsAbove`.
    ///   - visit: called with each valid record's sequence and payload.
    init(
        _ bytes: UnsafeRawBufferPointer, base: Int = 0, previous: UInt64, countAbove: UInt64 = .max,
        visit: (UInt64, UnsafeRawBufferPointer) -> Void = { _, _ in }
    ) {
        var offset = 0
        var last = previous
        validEnd = base
        while offset < bytes.count {
            let decoded = Frame.decode(bytes, at: offset)
            switch decoded {
            case .record(let sequence, let length) where sequence > last:
                records += 1
                payloadBytes += length
                if sequence > countAbove { recordsAbove += 1 }
                let start = offset + Frame.headerSize
                visit(sequence, UnsafeRawBufferPointer(rebasing: bytes[start..<start + length]))
                if firstSequence == nil { firstSequence = sequence }
                lastSequence = sequence
                last = sequence
                offset += Frame.headerSize + length
                validEnd = base + offset
                continue
            case .skip(let total):
                offset += total
                validEnd = base + offset
                continue
            default:
                break
            }
            if let next = Self.nextValidFrame(bytes, from: offset + Frame.headerSize, above: last) {
                var nextSequence: UInt64?
                if case .record(let sequence, _) = Frame.decode(bytes, at: next) { nextSequence = sequence }
                damages.append(
                    Damage(
                        kind: .corrupt, start: base + offset, end: base + next,
                        previousSequence: lastSequence, nextSequence: nextSequence))
                offset = next
                continue
            }
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            let torn: Bool
            if case .incomplete = decoded {
                torn = true
            } else {
                torn = rest.allSatisfy { $0 == 0 }
            }
            damages.append(
                Damage(
                    kind: torn ? .torn : .corruptEnd, start: base + offset, end: base + bytes.count,
                    previousSequence: lastSequence, nextSequence: nil))
            break
        }
    }

    /// The offset of the first valid frame at or after `start` whose sequence (if a record) is above `previous`.
    static func nextValidFrame(_ bytes: UnsafeRawBufferPointer, from start: Int, above previous: UInt64) -> Int? {
        var candidate = start
        while candidate + Frame.headerSize <= bytes.count {
            guard
                let found = UnsafeRawBufferPointer(rebasing: bytes[candidate...]).firstIndex(of: Frame.magicFirstByte)
            else { return nil }
            let position = candidate + found
            switch Frame.decode(bytes, at: position) {
            case .record(let sequence, _) where sequence > previous: return position
            case .skip: return position
            default: candidate = position + 1
            }
        }
        return nil
    }
}
