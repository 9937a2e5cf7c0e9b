import Foundation
import JetbridgeProtocol
import JetbridgeStore
import Logging
import SystemSupport

/// The store thread: groups what is waiting in the ``BatchQueue`` into one `apply` transaction, then posts one answer
/// per batch to the network thread (``StoreMailbox``): `stored` after the commit, `retry` for every batch of a failed
/// transaction, a refusal's answer (``BatchRefusals``) for a batch the store refused, and `limited` for a batch past
/// one of its device's flight limits (records per flight, flights per day: store rules, checked by `apply` in the
/// same transaction against what is stored and what the batches ahead of it in the group add). Between groups it
/// checkpoints an idle store, probes a failed one, tells the receipts thread when the store went idle, and logs the
/// statistics. It ends when the queue is closed and drained (the network thread closes it at a stop).
///
/// It owns its timers (locals of ``run()``); what it shares is passed in. Built once and run once, on its own thread
/// (``StoreService``).
struct StoreLoop: Sendable {
    let mailbox: StoreMailbox
    let store: any StoreWriter
    let storeLocation: StoreLocation
    let queue: BatchQueue
    let receipts: ReceiptWorker
    let configuration: AggregatorConfiguration
    let refusals: BatchRefusals
    /// Each device's flight limits, from the allow list as the network thread last loaded it.
    let limits: Locked<StoreLimits>
    /// Devices warned about a limited batch, and when (at most one line per device every 10 s).
    let limitedWarnings = Locked(WarningGate())
    /// Why the store is not usable now, for `/readyz` (written here, read by the server).
    let storeProblem: Locked<String?>
    let handshakes: HandshakeMonitor
    let logger: Logger

    private var ledger: AnswerLedger { refusals.ledger }

    func run() {
        let bulkDelay = Duration.milliseconds(configuration.transactionDelayMilliseconds)
        // Waiting for a fuller group pays only under a backlog (fewer commits: each one writes every index page it
        // touched to the WAL); a device sending now and then gets its ack without the wait.
        let trickleDelay = min(bulkDelay, .milliseconds(Self.trickleDelayMilliseconds))
        var delay = trickleDelay
        let idle = Duration.milliseconds(Int(min(configuration.checkpointIdleSeconds, 1) * 1000))
        var uncheckpointed = false
        var lastWork = ContinuousClock.now
        var lastStats = ContinuousClock.now
        var lastInsecureWarning = ContinuousClock.now
        var previous = ServerStatistics()
        // A full disk fails every checkpoint and every retried group: logged once, then a count every 30 s.
        var checkpointFailures = RepeatedFailure()
        var transactionFailures = RepeatedFailure()
        var lastProbe = ContinuousClock.now
        var lastStalledCheck = ContinuousClock.now
        var stalledCheckFailures = RepeatedFailure()
        while let taken = queue.take(
            maxBatches: configuration.transactionMaxBatches, maxRecords: configuration.transactionMaxRecords,
            delay: delay, idle: idle)
        {
            if taken.freedRoom { mailbox.post(.room) }
            let takenBatches = taken.work.reduce(0) { if case .batch = $1 { $0 + 1 } else { $0 } }
            delay = takenBatches >= Self.bulkGroupBatches ? bulkDelay : trickleDelay
            let now = ContinuousClock.now
            if taken.work.isEmpty {
                // Nothing came for a while: the receipts of what was committed can be written now.
                receipts.storeWentIdle()
            }
            if !taken.work.isEmpty {
                lastWork = now
                process(taken.work, failures: &transactionFailures)
                uncheckpointed = true
            } else if uncheckpointed && now - lastWork >= .seconds(configuration.checkpointIdleSeconds) {
                do {
                    try store.idleMaintenance()
                    uncheckpointed = false
                    if let failures = checkpointFailures.succeeded() {
                        logger.notice(
                            "idle maintenance (the SQLite checkpoint, the PostgreSQL stale-mark fold) succeeded again",
                            metadata: ["failures": .stringConvertible(failures)])
                    }
                } catch {
                    let failure = describeStoreFailure(error, path: storePath)
                    switch checkpointFailures.failed(failure, kind: failureKind(error)) {
                    case .log:
                        logger.warning(
                            "idle maintenance (the SQLite checkpoint, the PostgreSQL stale-mark fold) failed; retried every idle second",
                            metadata: ["error": "\(failure)"])
                    case .summary(let count):
                        logger.warning(
                            "idle maintenance still failing",
                            metadata: ["error": "\(failure)", "timesSinceLastLine": .stringConvertible(count)])
                    case .quiet: break
                    }
                }
            }
            if taken.work.isEmpty && now - lastProbe >= .seconds(1)
                && (storeLocation.isShared || storeProblem.withLock({ $0 != nil }))
            {
                // Unready after a failed transaction and no batch to try: ready again once a write fits (SQLite) or
                // the server answers (PostgreSQL). A shared store is probed every idle second: a PostgreSQL outage
                // makes /readyz unready before a batch finds it.
                lastProbe = now
                if let problem = store.probe() {
                    // SQLite keeps the failed transaction's reason (a full disk names the file it could not write).
                    if storeLocation.isShared { storeProblem.withLock { $0 = "the store is unavailable: \(problem)" } }
                } else if storeProblem.withLock({ $0 != nil }) {
                    storeProblem.withLock { $0 = nil }
                    logger.debug("the store takes writes again", metadata: ["store": "\(storePath)"])
                }
            }
            if storeLocation.isShared && now - lastStalledCheck >= Self.stalledSessionCheckInterval {
                lastStalledCheck = now
                endStalledSessions(failures: &stalledCheckFailures)
            }
            if now - lastStats >= .seconds(configuration.statsIntervalSeconds) {
                let current = ledger.statistics
                if current != previous { logStatistics(since: previous, seconds: (now - lastStats).seconds) }
                previous = current
                lastStats = now
            }
            if configuration.insecure && now - lastInsecureWarning >= .seconds(60) {
                Self.warnInsecure(logger)
                lastInsecureWarning = now
            }
        }
        mailbox.post(.done)
    }

    /// The wait for more batches after a small group.
    static let trickleDelayMilliseconds = 2
    /// How often a shared store is asked for sessions stalled in the middle of a statement.
    static let stalledSessionCheckInterval: Duration = .seconds(5)

    /// Ends other aggregators' sessions that stopped in the middle of a statement and hold rows this one's
    /// transactions and receipt claims need (``StoreWriter/endStalledSessions()``). A failure to ask is logged once,
    /// then counted every 30 s; an outage is not (the transactions and the probe report it).
    private func endStalledSessions(failures: inout RepeatedFailure) {
        let ended: [StalledSession]
        do {
            ended = try store.endStalledSessions()
            if let count = failures.succeeded() {
                logger.notice(
                    "looking for stalled database sessions succeeded again",
                    metadata: ["failures": .stringConvertible(count)])
            }
        } catch {
            if let error = error as? PostgresStoreError, error.unreachable { return }
            switch failures.failed("\(error)", kind: failureKind(error)) {
            case .log:
                logger.warning(
                    """
                    could not look for database sessions stalled in the middle of a statement; a frozen \
                    aggregator's session will not be ended; retried every 5 s
                    """,
                    metadata: ["error": "\(error)"])
            case .summary(let count):
                logger.warning(
                    "still cannot look for stalled database sessions",
                    metadata: ["error": "\(error)", "timesSinceLastLine": .stringConvertible(count)])
            case .quiet: break
            }
            return
        }
        for session in ended {
            logger.warning(
                """
                ended a database session that stopped in the middle of a statement (its process froze while \
                sending it or before reading the answer); its transaction is rolled back and the rows it held are free
                """,
                metadata: [
                    "session": "\(session.applicationName)", "serverPid": .stringConvertible(session.pid),
                    "stalledSeconds": "\(Int(session.seconds))",
                ])
        }
    }
    /// A group of at least this many batches means a backlog: the next one waits the configured delay.
    static let bulkGroupBatches = 4

    /// One group: rejections counted, batches stored in ONE transaction, then one ack per batch.
    private func process(_ work: [StoreWork], failures: inout RepeatedFailure) {
        var batches: [IncomingBatch] = []
        var summaries: [(FlightSummary, owner: String)] = []
        var records = 0
        // Refused and limited batches are counted per device, one store call each per group with the last reason:
        // one call (a commit) per batch let a flood of refused batches keep the store thread busy committing.
        var rejections = DeviceTally()
        var limited = DeviceTally()
        // The answers to batches the store refused: sent once their refusals are counted, as before (a device
        // reading `report devices` after the answer finds the refusal there).
        var refusedAnswers: [Ack] = []
        func countRefusals() {
            for (device, (times, reason)) in rejections.sorted {
                refusals.count(device: device, reason: reason, times: times, in: store)
            }
            for (device, (times, reason)) in limited.sorted {
                do { try store.recordLimited(device: device, reason: reason, at: Date(), times: times) } catch {
                    logger.warning(
                        "could not count a limited batch", metadata: ["device": "\(device)", "error": "\(error)"])
                }
            }
            rejections = DeviceTally()
            limited = DeviceTally()
            for answer in refusedAnswers { ack(answer) }
            refusedAnswers = []
        }
        // Summaries are answered after the group's batches commit: a summary counts what was read before it.
        defer { answer(summaries) }
        defer { countRefusals() }
        for item in work {
            switch item {
            case .batch(let batch, _):
                batches.append(batch)
                records += batch.records.count
            case .rejection(let device, let reason):
                rejections.add(device, reason)
            case .summary(let summary, let owner):
                summaries.append((summary, owner))
            case .announce(let announce, let owner):
                // Before the group's batches: the device announced before it sent them.
                record(announce, owner: owner)
            case .limited(let device, let reason):
                limited.add(device, reason)
            }
        }
        guard !batches.isEmpty else { return }
        let started = ContinuousClock.now
        do {
            let outcomes = try store.apply(batches, at: Date(), limits: limits.withLock { $0 })
            let elapsed = ContinuousClock.now - started
            ledger.committed(in: elapsed)
            storeProblem.withLock { $0 = nil }
            if let failed = failures.succeeded() {
                logger.notice("store transactions succeed again", metadata: ["failedTransactions": .stringConvertible(failed)])
            }
            var new = 0
            for (batch, outcome) in zip(batches, outcomes) {
                if let rejection = outcome.rejection {
                    refuseStored(rejection, counting: &rejections, answers: &refusedAnswers)
                    continue
                }
                if let limit = outcome.limit {
                    answerLimited(batch.header, limit)
                    continue
                }
                new += outcome.new
                ledger.answer(
                    device: batch.header.device, .stored(new: outcome.new, duplicates: outcome.duplicates)
                ) { ack(.stored(batch.header, new: outcome.new, duplicates: outcome.duplicates)) }
            }
            logger.debug(
                "transaction committed",
                metadata: [
                    "batches": .stringConvertible(batches.count), "records": .stringConvertible(records), "new": .stringConvertible(new),
                    "ms": .stringConvertible(Int(elapsed.seconds * 1000)),
                ])
            receipts.signal()
        } catch {
            // Nothing of any batch in the transaction was stored: each device sends its batch again later.
            let reason = "the aggregator could not store the batch now; send it again later"
            ledger.committed(in: ContinuousClock.now - started, succeeded: false)
            let failure = describeStoreFailure(error, path: storePath)
            storeProblem.withLock { $0 = "the last store transaction failed: \(failure)" }
            for batch in batches {
                ledger.answer(device: batch.header.device, .retry(reason: "\(error)")) {
                    ack(.retry(batch.header, reason: reason))
                }
            }
            switch failures.failed(failure, kind: failureKind(error)) {
            case .log:
                logger.error(
                    "transaction failed; its batches were answered retry",
                    metadata: ["batches": .stringConvertible(batches.count), "records": .stringConvertible(records), "error": "\(failure)"])
            case .summary(let count):
                logger.error(
                    "transactions still failing; their batches were answered retry",
                    metadata: ["error": "\(failure)", "transactionsSinceLastLine": .stringConvertible(count)])
            case .quiet: break
            }
        }
    }

    /// The store's path or URL (without its password), for messages.
    var storePath: String { storeLocation.description }

    /// Answers and counts a batch the store refused (another device's order, a flight's second currency): nothing
    /// of it was stored. Counted in the store before the answer, so that a device (or a test) reading
    /// `report devices` after its ack sees it.
    /// As the network thread's refusals: a warning per device at most every 10 s (in insecure mode, where the device
    /// is the sender's to name, for all together), counted with the group's others; the answer goes to `answers`, to
    /// be sent once the count is written.
    private func refuseStored(
        _ rejection: BatchRejection, counting tally: inout DeviceTally, answers: inout [Ack]
    ) {
        let device = configuration.insecure ? "insecure" : rejection.header?.device ?? "-"
        let log = limitedWarnings.withLock { $0.shouldWarn(about: "refused " + device, interval: .seconds(10)) }
        var counted: (device: String, reason: String, ack: Ack)?
        refusals.refuse(rejection, key: nil, log: log) { answer in
            counted = (answer.owner, answer.reason, answer.ack)
        }
        if let counted {
            tally.add(counted.device, counted.reason)
            answers.append(counted.ack)
        }
    }

    /// Answers a batch past one of its device's flight limits `limited` (`apply` stored none of it and counted it
    /// against the device) and logs it, at most once every 10 s per device.
    private func answerLimited(_ header: BatchHeader, _ limit: BatchLimit) {
        let answer = limit.answer(device: header.device, first: header.first, last: header.last)
        ledger.answer(device: header.device, .limited) { ack(answer) }
        guard limitedWarnings.withLock({ $0.shouldWarn(about: header.device, interval: .seconds(10)) }) else { return }
        logger.warning(
            "batch limited",
            metadata: [
                "device": "\(header.device)", "batch": "#\(header.first)…\(header.last)", "reason": "\(limit.reason)",
                "retryAfter": "\(limit.retryAfter)",
            ])
    }

    /// Compares each summary with what the store holds for its device and flight, and posts the answers: `confirmed` or
    /// `mismatch` with the store's count and digest, `retry` when the store cannot answer now.
    private func answer(_ summaries: [(FlightSummary, owner: String)]) {
        for (summary, owner) in summaries {
            let answer: SummaryAnswer
            do {
                let held = try store.deliverySummary(
                    device: summary.device, flight: summary.flight, expected: summary.summary)
                answer = .comparing(summary, with: held)
                if answer.status == .confirmed {
                    // The fleet view (`report devices --flight`): the flight is confirmed for this device since now.
                    do {
                        try store.recordConfirmation(device: summary.device, flight: summary.flight, at: Date())
                    } catch {
                        logger.warning(
                            "could not record a confirmation",
                            metadata: ["device": "\(summary.device)", "flight": "\(summary.flight)", "error": "\(error)"])
                    }
                }
                if answer.status == .mismatch {
                    logger.notice(
                        "a device's summary does not match the store; it will send the flight again",
                        metadata: [
                            "device": "\(summary.device)", "flight": "\(summary.flight)",
                            "deviceCount": .stringConvertible(summary.count), "storeCount": .stringConvertible(held.count),
                        ])
                }
            } catch {
                answer = SummaryAnswer(
                    device: summary.device, flight: summary.flight, status: .retry,
                    reason: "the aggregator could not read the store now; ask again later")
                logger.warning(
                    "could not answer a summary", metadata: ["device": "\(summary.device)", "error": "\(error)"])
            }
            ledger.summary(answer.status) { mailbox.post(.summary(answer, owner: owner)) }
        }
    }

    /// Records an announcement in the store and posts its answer: `recorded`, or `retry` when the store cannot
    /// take it now.
    private func record(_ announce: FlightAnnounce, owner: String) {
        let answer: AnnounceAnswer
        do {
            let limit = limits.withLock { $0 }.limits(for: announce.device).flightsPerDay
            let recorded = try store.recordAnnouncement(
                device: announce.device, flights: announce.flights, at: Date(), newFlightsPerDay: limit)
            answer = AnnounceAnswer(
                device: announce.device, status: .recorded, flights: recorded,
                reason: recorded == announce.flights.count
                    ? nil
                    : "\(announce.flights.count - recorded) of the \(announce.flights.count) flights were not recorded: "
                        + "this device announced \(limit) flights or more in the last 24 hours (its flightsPerDay)")
            if recorded < announce.flights.count {
                logger.debug(
                    "an announce past its device's flights per day",
                    metadata: ["device": "\(announce.device)", "left out": .stringConvertible(announce.flights.count - recorded)])
            }
        } catch {
            answer = AnnounceAnswer(
                device: announce.device, status: .retry,
                reason: "the aggregator could not write the store now; announce again later")
            logger.warning(
                "could not record an announce", metadata: ["device": "\(announce.device)", "error": "\(error)"])
        }
        ledger.announce(answer.status) { mailbox.post(.announce(answer, owner: owner)) }
    }

    /// Posts `ack` for the network thread to send to its device's route.
    private func ack(_ ack: Ack) {
        mailbox.post(.ack(ack, owner: ack.device))
    }

    func logStatistics(since previous: ServerStatistics = ServerStatistics(), seconds: Double = 0, final: Bool = false)
    {
        let now = ledger.statistics
        var metadata: Logger.Metadata = [
            "batches": .stringConvertible(now.storedBatches), "records": .stringConvertible(now.storedRecords), "new": .stringConvertible(now.newRecords),
            "duplicates": .stringConvertible(now.duplicateRecords), "rejected": .stringConvertible(now.rejectedBatches),
            "retried": .stringConvertible(now.retriedBatches), "limited": .stringConvertible(now.limitedBatches),
            "transactions": .stringConvertible(now.transactions),
            "unroutableAcks": .stringConvertible(now.unroutableAcks),
            "refusedHandshakes": .stringConvertible(handshakes.snapshot.counts.filter { $0.key != "accepted" }.values.reduce(0, +)),
        ]
        if seconds > 0 {
            metadata["batchesPerSecond"] = .stringConvertible(Int(Double(now.storedBatches - previous.storedBatches) / seconds))
            metadata["recordsPerSecond"] = .stringConvertible(Int(Double(now.storedRecords - previous.storedRecords) / seconds))
        }
        logger.info(final ? "final statistics" : "statistics", metadata: metadata)
    }

    /// Warns that CURVE is off: at start, then every minute from the store thread.
    static func warnInsecure(_ logger: Logger) {
        logger.warning(
            "INSECURE MODE: CURVE is off; batches are not encrypted and device ids are taken on trust. Development only."
        )
    }
}

/// Refusals of one group per device: how many, and the last reason.
struct DeviceTally {
    private var entries: [String: (times: Int, reason: String)] = [:]

    mutating func add(_ device: String, _ reason: String) {
        entries[device, default: (0, reason)].times += 1
        entries[device]!.reason = reason
    }

    /// By device id.
    var sorted: [(String, (times: Int, reason: String))] { entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
}
