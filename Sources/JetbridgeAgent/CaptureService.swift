import FileQueue
import JetbridgeModel
import JetbridgeProtocol
public import Logging
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// Records sales and bag scans into the device's queue, durably, for any number of processes at once.
///
/// Every call does blocking file I/O (`fdatasync`, `flock`): run it on a thread of its own, never on Swift's
/// cooperative pool. The command-line tool calls it from its main thread.
public struct CaptureService: Sendable {
    public let configuration: AgentConfiguration
    let logger: Logger
    let now: @Sendable () -> Date

    /// - Parameters:
    ///   - configuration: The resolved configuration.
    ///   - logger: Where diagnostics go (the command's output is the caller's to print).
    ///   - now: The clock for `createdAt` and `scannedAt`.
    public init(
        configuration: AgentConfiguration, logger: Logger, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    var ledger: OrderLedger { OrderLedger(directory: configuration.home.ordersDirectory) }

    /// The current time truncated to whole milliseconds, so a record's time survives a round trip through any
    /// MessagePack reader (timestamps hold nanoseconds; a `Date` holds a binary fraction).
    func timestamp() -> Date {
        let milliseconds = (now().timeIntervalSince1970 * 1000).rounded(.down)
        return Date(timeIntervalSince1970: milliseconds / 1000)
    }

    /// A new record's id: time-ordered (`UUID(timeOrdered:using:)`, docs/PROTOCOL.md "Record ids") at the record's
    /// capture time, its random bits from the system's CSPRNG. Bulk scans draw theirs from a ``BufferedRandom``.
    static func newID(at time: Date) -> UUID {
        var generator = SystemRandomNumberGenerator()
        return UUID(timeOrdered: time, using: &generator)
    }

    /// Opens (creating if needed) the queue; open also repairs a torn tail left by a killed process.
    func openQueue() throws(AgentError) -> FileQueue {
        try configuration.home.prepare(queueDirectory: configuration.queueDirectory)
        // Delivered records the ground has not confirmed are never deleted to make room: past the cap, capture stops.
        try DeliveryArchive(home: configuration.home).checkRoom(configuration.retention)
        do {
            return try FileQueue(
                directory: configuration.queueDirectory,
                configuration: FileQueue.Configuration(maxTotalBytes: configuration.queueMaxBytes))
        } catch {
            throw AgentError(queue: error, home: configuration.home)
        }
    }

    /// The record's bytes, as the queue and the order ledger hold them (``RecordCoding``).
    func encode(_ order: Order) throws(AgentError) -> Data {
        try encode(.order(order))
    }

    func encode(_ scan: Scan) throws(AgentError) -> Data {
        try encode(.scan(scan))
    }

    func encode(_ record: Record) throws(AgentError) -> Data {
        do {
            return try RecordCoding.encode(record)
        } catch {
            throw AgentError(.failure, "cannot encode the record: \(error)")
        }
    }
}
