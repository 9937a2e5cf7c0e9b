import Foundation
import JetbridgeProtocol
import SystemSupport

/// What the network thread hands the store thread.
enum StoreWork: Sendable {
    /// A checked batch, and the bytes its frames took on the wire (what the queue's byte bound counts).
    case batch(IncomingBatch, bytes: Int)
    /// A refused batch to count against its device.
    case rejection(device: String, reason: String)
    /// A batch answered `limited`, to count against its device.
    case limited(device: String, reason: String)
    /// A device's summary of a flight to compare with the store (docs/PROTOCOL.md, "Proof of delivery"), answered to
    /// `owner`'s route. It waits behind the batches read before it, so counts them once they commit.
    case summary(FlightSummary, owner: String)
    /// A device's announcement of the flights it holds records of (docs/PROTOCOL.md, "Announce"), recorded in the
    /// store and answered to `owner`'s route.
    case announce(FlightAnnounce, owner: String)
}

/// The bounded hand-off from the network thread to the store thread.
///
/// The network thread only reads the data socket while ``hasRoom`` holds, so when the store falls behind, batches
/// stay in libzmq's small receive queue and then in TCP, and the devices' PUSH sockets block: memory stays bounded
/// however large the backlog. Rejections count as batches here (with no bytes), so a device sending nothing but bad
/// batches is throttled the same way.
final class BatchQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var items: [StoreWork] = []
    private var batches = 0
    private var bytes = 0
    private var closed = false
    /// Set when the queue was full as the store thread took from it: the network thread then needs a wake-up.
    private var wasFull = false
    let maxBatches: Int
    let maxBytes: Int

    init(maxBatches: Int, maxBytes: Int) {
        self.maxBatches = maxBatches
        self.maxBytes = maxBytes
    }

    /// Batches waiting for the store (`jetbridge_batch_queue_depth`).
    var depth: Int {
        condition.lock()
        defer { condition.unlock() }
        return batches
    }

    /// Whether the network thread may read another batch.
    var hasRoom: Bool {
        condition.lock()
        defer { condition.unlock() }
        let room = batches < maxBatches && bytes < maxBytes
        if !room { wasFull = true }
        return room
    }

    /// Adds work; never blocks (the network thread checks ``hasRoom`` first, and one batch over is fine).
    func push(_ work: StoreWork) {
        condition.lock()
        items.append(work)
        batches += 1
        if case .batch(_, let size) = work { bytes += size }
        condition.signal()
        condition.unlock()
    }

    /// No more work will come; ``take`` drains what is left, then returns nil.
    func close() {
        condition.lock()
        closed = true
        condition.broadcast()
        condition.unlock()
    }

    /// The result of one ``take``.
    struct Taken {
        var work: [StoreWork]
        /// The queue had been full: tell the network thread there is room now.
        var freedRoom: Bool
    }

    /// Waits for work, then gathers what is waiting into one group: at most `maxBatches` batches and about
    /// `maxRecords` records, waiting up to `delay` for more when the group is not full.
    ///
    /// - Parameters:
    ///   - idle: How long to wait for the first item; an empty group comes back when it passes.
    /// - Returns: The group (possibly empty on idle), or nil once the queue is closed and drained.
    func take(maxBatches groupBatches: Int, maxRecords: Int, delay: Duration, idle: Duration) -> Taken? {
        condition.lock()
        defer { condition.unlock() }
        let idleDeadline = Date().addingTimeInterval(idle.seconds)
        while items.isEmpty {
            if closed { return nil }
            if !condition.wait(until: idleDeadline) { return Taken(work: [], freedRoom: false) }
        }
        var group: [StoreWork] = []
        var groupBatchCount = 0
        var records = 0
        let groupDeadline = Date().addingTimeInterval(delay.seconds)
        while true {
            while !items.isEmpty && groupBatchCount < groupBatches && records < maxRecords {
                let work = items.removeFirst()
                batches -= 1
                if case .batch(let batch, let size) = work {
                    bytes -= size
                    groupBatchCount += 1
                    records += batch.records.count
                }
                group.append(work)
            }
            if closed || groupBatchCount >= groupBatches || records >= maxRecords { break }
            if !condition.wait(until: groupDeadline) { break }
        }
        let freed = wasFull
        wasFull = false
        return Taken(work: group, freedRoom: freed)
    }
}
