import FileQueue
public import JetbridgeModel
import Logging
package import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a scan command stored.
public struct ScanSummary: Codable, Sendable, Hashable {
    public var point: ScanPoint
    public var flight: String
    /// Tags stored, durably.
    public var scanned: Int
    /// Non-empty lines that were not valid tags.
    public var rejected: Int
    /// The queue sequences of the first and last stored scan.
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
}

/// One input line that is not a valid tag.
public struct RejectedLine: Sendable, Hashable {
    /// The line number, from 1 (empty lines count).
    public var line: Int
    public var reason: String
}

extension CaptureService {
    /// How many scans go into one group commit: enough to make the `fdatasync` cheap per record, few enough that
    /// memory stays small (about 1 MB of records).
    public static let scanBatchSize = 4096

    /// Records the scan of one tag, durably.
    ///
    /// - Parameters:
    ///   - payload: The QR code's JSON.
    ///   - point: Origin or destination.
    ///   - flight: A flight overriding the configuration's, or `nil`.
    /// - Throws: ``AgentError`` `dataError` for an invalid tag, `tryAgain` for a full queue.
    public func recordScan(payload: String, at point: ScanPoint, flight: String? = nil) throws(AgentError)
        -> ScanSummary
    {
        let flightID = try resolveFlight(flight)
        let tag: LuggageTag
        do {
            tag = try LuggageTag.parse(qrPayload: payload)
        } catch {
            throw AgentError(error, context: "--tag")
        }
        let time = timestamp()
        let scan = Scan(
            id: Self.newID(at: time), tag: tag, point: point, scannedAt: time, flight: flightID,
            device: configuration.device)
        try validate(scan)
        let encoded = try encode(scan)
        let queue = try openQueue()
        let sequence: UInt64
        do {
            sequence = try queue.append(encoded)
        } catch {
            throw AgentError(queue: error, home: configuration.home)
        }
        return ScanSummary(
            point: point, flight: flightID.rawValue, scanned: 1, rejected: 0, firstSequence: sequence,
            lastSequence: sequence)
    }

    /// Records the tags read from a file descriptor, one JSON payload per line, in group commits.
    ///
    /// Empty lines are skipped; a line that is not a valid tag is passed to `rejected` and the others are kept.
    /// Every stored scan is durable when this returns.
    ///
    /// - Parameters:
    ///   - fd: Where to read from (standard input, a file).
    ///   - name: The input's name for messages (`standard input`, a path).
    ///   - point: Origin or destination.
    ///   - flight: A flight overriding the configuration's, or `nil`.
    ///   - interruption: Stops reading between two lines once it caught a signal (Ctrl-C, SIGTERM): what was read is
    ///   stored, then `tryAgain` says from which line to feed again.
    ///   - rejected: Called for each bad line, in order.
    /// - Returns: The counts, once every stored scan is durable.
    /// - Throws: ``AgentError``: a read error, or `tryAgain` for a full disk or queue or an interruption (the
    ///   message says how many scans were stored before it and from which line on nothing was).
    package func recordScans(
        fd: Int32, name: String, at point: ScanPoint, flight: String? = nil, interruption: Interruption? = nil,
        rejected: (RejectedLine) -> Void
    ) throws(AgentError) -> ScanSummary {
        let flightID = try resolveFlight(flight)
        try validate(
            Scan(tag: .example, point: point, scannedAt: timestamp(), flight: flightID, device: configuration.device))
        let committer = GroupCommitter(queue: try openQueue())
        var reader = TagLineReader(fd: fd, path: name, interruption: interruption?.descriptor)
        var summary = ScanSummary(
            point: point, flight: flightID.rawValue, scanned: 0, rejected: 0, firstSequence: nil, lastSequence: nil)
        var random = BufferedRandom()
        var pending: [Data] = []
        pending.reserveCapacity(Self.scanBatchSize)
        var pendingFirstLine = 1
        let device = configuration.device

        func finish() throws(AgentError) {
            let outcome = committer.finish()
            summary.scanned = outcome.stored
            summary.firstSequence = outcome.firstSequence
            summary.lastSequence = outcome.lastSequence
            if let failure = outcome.failure {
                var error = AgentError(queue: failure.error, home: configuration.home)
                error.message =
                    "\(outcome.stored) scans were stored; nothing from line \(failure.firstLine) on was: "
                    + error.message
                throw error
            }
        }

        // Scans read so far are handed over whenever the input goes quiet (a scanner between two bags): kept
        // until 4,096 had piled up, a live feed held them in memory only, for hours, and lost them with the process.
        var submitFailed = false
        func handOver() {
            guard !pending.isEmpty else { return }
            if !committer.submit(pending, firstLine: pendingFirstLine) { submitFailed = true }
            pending.removeAll(keepingCapacity: true)
        }
        do throws(AgentError) {
            while !submitFailed, let line = try reader.next(beforeWaiting: handOver) {
                let number = reader.lineNumber
                let payload: String
                switch line {
                case .tooLong(let length):
                    summary.rejected += 1
                    rejected(
                        RejectedLine(
                            line: number,
                            reason:
                                "tag payload is \(length) bytes; a tag is at most \(LuggageTag.maxPayloadBytes) bytes of JSON"
                        ))
                    continue
                case .bytes(let bytes):
                    if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }
                    guard let text = String(validating: bytes, as: UTF8.self) else {
                        summary.rejected += 1
                        rejected(RejectedLine(line: number, reason: "not valid UTF-8 text; a tag is JSON"))
                        continue
                    }
                    payload = text
                }
                let scan: Scan
                do {
                    let tag = try LuggageTag.parse(qrPayload: payload)
                    let time = timestamp()
                    scan = Scan(
                        id: UUID(timeOrdered: time, using: &random), tag: tag, point: point, scannedAt: time,
                        flight: flightID, device: device)
                    // Each scan as the ground checks it (the clock may step out of 2000–2099 during a long feed).
                    try scan.validate()
                } catch {
                    summary.rejected += 1
                    rejected(RejectedLine(line: number, reason: (error as? ValidationError)?.description ?? "\(error)"))
                    continue
                }
                if pending.isEmpty { pendingFirstLine = number }
                pending.append(try encode(scan))
                if pending.count >= Self.scanBatchSize { handOver() }
            }
            if !submitFailed { handOver() }
        } catch {
            // A read error: what was read before it is good; stored durably, then reported with where to go on from
            // (before, the message did not say, and a re-feed from the start stored every scan a second time, with
            // new ids the ground cannot recognise as the same).
            if !submitFailed { handOver() }
            let outcome = committer.finish()
            var failure = error
            if outcome.failure == nil {
                failure.message +=
                    "; the \(outcome.stored) scans read before it (through line \(reader.lineNumber)) were stored: re-feed from line \(reader.lineNumber + 1)"
            }
            throw failure
        }
        try finish()
        if reader.interrupted {
            let signal = interruption?.signal.map(Interruption.name) ?? "a signal"
            let rejectedText =
                summary.rejected == 0 ? "" : " (\(summary.rejected) line\(summary.rejected == 1 ? "" : "s") rejected)"
            throw AgentError(
                .tryAgain,
                "\(name): stopped by \(signal) after line \(reader.lineNumber): the \(summary.scanned) scans read before it were stored\(rejectedText): re-feed from line \(reader.lineNumber + 1)"
            )
        }
        logger.debug(
            "scans recorded", metadata: ["scanned": .stringConvertible(summary.scanned), "rejected": .stringConvertible(summary.rejected)])
        return summary
    }

    func resolveFlight(_ flight: String?) throws(AgentError) -> FlightID {
        guard let flight else { return configuration.flight }
        do {
            return try FlightID(parsing: flight)
        } catch {
            throw AgentError(.dataError, "--flight: \(AgentError(error).message)")
        }
    }

    func validate(_ scan: Scan) throws(AgentError) {
        do {
            try scan.validate()
        } catch {
            throw AgentError(error, context: "scan")
        }
    }
}
