import FileQueue
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Appends chunks of encoded records on a thread of its own, in order, so that parsing and encoding the next chunk
/// overlaps the `fdatasync` of this one.
///
/// At most ``depth`` chunks wait; ``submit(_:firstLine:)`` blocks beyond that (bounded memory). After a failed
/// append nothing later is appended, so what is stored is always a prefix of the input.
final class GroupCommitter: @unchecked Sendable {
    struct Outcome {
        var stored = 0
        var firstSequence: UInt64?
        var lastSequence: UInt64?
        /// The error of the first failed append and the input line its chunk started at.
        var failure: (error: FileQueueError, firstLine: Int)?
    }

    let depth = 2
    private let queue: FileQueue
    // Everything below is guarded by `condition`.
    private let condition = ConditionLock()
    private var waiting: [(payloads: [Data], firstLine: Int)] = []
    private var inputEnded = false
    private var finished = false
    private var outcome = Outcome()

    init(queue: FileQueue) {
        self.queue = queue
        startThread("jetbridge-group-commit") { [self] in run() }
    }

    /// Hands a chunk over for appending.
    /// - Returns: `false` when an earlier append failed; stop reading then and call ``finish()``.
    func submit(_ payloads: [Data], firstLine: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while waiting.count >= depth && outcome.failure == nil { condition.wait() }
        guard outcome.failure == nil else { return false }
        waiting.append((payloads, firstLine))
        condition.broadcast()
        return true
    }

    /// Waits until every submitted chunk is durable (or the first failure).
    func finish() -> Outcome {
        condition.lock()
        defer { condition.unlock() }
        inputEnded = true
        condition.broadcast()
        while !finished { condition.wait() }
        return outcome
    }

    private func run() {
        while true {
            condition.lock()
            while waiting.isEmpty && !inputEnded { condition.wait() }
            guard !waiting.isEmpty else {
                finished = true
                condition.broadcast()
                condition.unlock()
                return
            }
            let chunk = waiting.removeFirst()
            condition.broadcast()
            condition.unlock()

            let result = Result { () throws(FileQueueError) in try queue.append(contentsOf: chunk.payloads) }

            condition.lock()
            switch result {
            case .success(let range):
                outcome.stored += chunk.payloads.count
                outcome.firstSequence = outcome.firstSequence ?? range.lowerBound
                outcome.lastSequence = range.upperBound
            case .failure(let error):
                outcome.failure = (error, chunk.firstLine)
                waiting.removeAll()
                finished = true
                condition.broadcast()
                condition.unlock()
                return
            }
            condition.unlock()
        }
    }
}
