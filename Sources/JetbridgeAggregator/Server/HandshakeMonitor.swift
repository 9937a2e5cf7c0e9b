import Foundation
import Logging
import ZeroMQ
import SystemSupport

/// What the ZAP handler decided, seen by the operator: counts per result, the last refusals (for `status`), and a
/// warning per refused key or peer — at most one per ``warningInterval``, the next one saying how many were
/// suppressed, because a device with a stale key reconnects every few hundred milliseconds and must not flood the log;
/// and at most ``warningsPerMinute`` of all keys and peers together, as a client can make up a key per handshake.
///
/// Called on the ZAP handler's thread; thread-safe.
final class HandshakeMonitor: Sendable {
    /// One refused handshake, newest last in ``Snapshot/recent``.
    struct Refusal: Codable, Hashable, Sendable {
        var time: Date
        var result: String
        var publicKey: String?
        var address: String
        var mechanism: String
    }

    struct Snapshot: Hashable, Sendable {
        /// Decisions per ``ZAPHandler/Decision/Result`` raw value.
        var counts: [String: Int] = [:]
        /// The last refusals, at most ``recentLimit``.
        var recent: [Refusal] = []
    }

    private struct Warned {
        var at: ContinuousClock.Instant
        var suppressed: Int
    }

    private struct State {
        var snapshot = Snapshot()
        var warned: [String: Warned] = [:]
        /// The warnings of the current minute, all subjects together, and those left out of it past the cap.
        var minute: (start: ContinuousClock.Instant, warnings: Int)?
        var leftOut = 0

        /// Keeps `refusal` among the recent ones and says whether to warn about `subject` now: nil inside its
        /// interval (counted as suppressed) or past ``HandshakeMonitor/warningsPerMinute`` warnings of any subject,
        /// else how many of this subject were suppressed since its last warning, and how many warnings the cap left
        /// out since the last one written.
        mutating func note(
            _ refusal: Refusal, subject: String, now: ContinuousClock.Instant, interval: Duration
        ) -> (suppressed: Int, leftOut: Int)? {
            snapshot.recent.append(refusal)
            if snapshot.recent.count > HandshakeMonitor.recentLimit { snapshot.recent.removeFirst() }
            if var last = warned[subject], now - last.at < interval {
                last.suppressed += 1
                warned[subject] = last
                return nil
            }
            // One subject per key or peer: a client making up a new key for each handshake is a new subject each
            // time, so all subjects together get at most so many warnings a minute.
            if let current = minute, now - current.start < .seconds(60) {
                guard current.warnings < HandshakeMonitor.warningsPerMinute else {
                    leftOut += 1
                    return nil
                }
                minute = (current.start, current.warnings + 1)
            } else {
                minute = (now, 1)
            }
            if warned.count >= 10_000 { warned = [:] }
            let suppressed = warned[subject]?.suppressed ?? 0
            warned[subject] = Warned(at: now, suppressed: 0)
            defer { leftOut = 0 }
            return (suppressed, leftOut)
        }
    }

    static let warningInterval: Duration = .seconds(300)
    /// The most refusal warnings a minute, all keys and peers together.
    static let warningsPerMinute = 20
    static let recentLimit = 10

    private let logger: Logger
    private let interval: Duration
    private let state = Locked(State())
    private let onDecision: (@Sendable (ZAPHandler.Decision) -> Void)?
    private let onFailure: (@Sendable () -> Void)?

    /// - Parameters:
    ///   - logger: Where refusals are warned about.
    ///   - interval: The least time between two warnings about one key or peer.
    ///   - onDecision: Also called with every decision (metrics).
    init(
        logger: Logger, interval: Duration = HandshakeMonitor.warningInterval,
        onDecision: (@Sendable (ZAPHandler.Decision) -> Void)? = nil, onFailure: (@Sendable () -> Void)? = nil
    ) {
        self.logger = logger
        self.interval = interval
        self.onDecision = onDecision
        self.onFailure = onFailure
    }

    var snapshot: Snapshot { state.withLock { $0.snapshot } }

    /// Counts a handshake that failed before the ZAP handler saw it (libzmq's socket monitor) and warns about it, at
    /// most once per socket and cause every ``warningInterval``. libzmq names only the local endpoint, not the peer.
    /// - Parameters:
    ///   - socket: `data` or `acks`.
    ///   - endpoint: The endpoint libzmq reported.
    ///   - failure: Why it failed; ZAP refusals are ignored here (``record(_:now:)`` has them, with the key).
    func recordFailure(socket: String, endpoint: String, failure: HandshakeFailure, now: ContinuousClock.Instant = .now) {
        let cause: String
        switch failure {
        case .authentication: return
        case .protocolError(let code) where code == 0x1100_0001:
            cause = "CURVE decryption failed: the client has another server public key than this aggregator's"
        case .protocolError(let code) where code == 0x1100_0002:
            cause = "mechanism mismatch: the client does not speak CURVE (plaintext or PLAIN)"
        case .protocolError(let code):
            cause = "protocol error 0x\(String(code, radix: 16)) (not a ZMTP 3 CURVE client, or a broken one)"
        case .noDetail(let code):
            cause = "failed without detail (\(code))"
        }
        onFailure?()
        let subject = "failed@\(socket):\(cause)"
        let noted = state.withLock { state in
            state.snapshot.counts["failed", default: 0] += 1
            return state.note(
                Refusal(time: Date(), result: "failed", publicKey: nil, address: endpoint, mechanism: cause),
                subject: subject, now: now, interval: interval)
        }
        guard let noted else { return }
        var metadata: Logger.Metadata = [
            "result": "failed", "socket": "\(socket)", "endpoint": "\(endpoint)",
            "suppressed": .stringConvertible(noted.suppressed),
        ]
        if noted.leftOut > 0 { metadata["leftOut"] = .stringConvertible(noted.leftOut) }
        logger.warning(
            "a handshake on the \(socket) socket failed: \(cause) (at most one warning per socket and cause every \(Int(interval.components.seconds)) s; 'suppressed' counts the failures since the last)",
            metadata: metadata)
    }

    /// Counts a decision and warns about a refusal unless one about the same key or peer was logged recently.
    func record(_ decision: ZAPHandler.Decision, now: ContinuousClock.Instant = .now) {
        onDecision?(decision)
        let refused = decision.result != .accepted
        // Refused keys are limited per key; other refusals (no key) per mechanism and peer address.
        let subject = decision.publicKeyZ85 ?? "\(decision.mechanism)@\(decision.address)"
        let noted = state.withLock { state -> (suppressed: Int, leftOut: Int)? in
            state.snapshot.counts[decision.result.rawValue, default: 0] += 1
            guard refused else { return nil }
            return state.note(
                Refusal(
                    time: Date(), result: decision.result.rawValue, publicKey: decision.publicKeyZ85,
                    address: decision.address, mechanism: decision.mechanism),
                subject: subject, now: now, interval: interval)
        }
        guard let noted else { return }
        var metadata: Logger.Metadata = [
            "result": "\(decision.result.rawValue)", "address": "\(decision.address)",
            "mechanism": "\(decision.mechanism)",
            "suppressed": .stringConvertible(noted.suppressed),
        ]
        // Warnings about other keys or peers the cap of `warningsPerMinute` left out since the last one.
        if noted.leftOut > 0 { metadata["leftOut"] = .stringConvertible(noted.leftOut) }
        if let key = decision.publicKeyZ85 { metadata["key"] = "\(key)" }
        let what =
            switch decision.result {
            case .refusedKey: "refused a handshake: the client key is not on the allow list"
            case .refusedMechanism: "refused a handshake: only CURVE clients with a key are admitted"
            case .malformed: "refused a malformed ZAP request"
            case .refusedBusy:
                "refused a handshake: the key already holds as many connections as a key may (\(KeyConnections.perKey); see docs/AGGREGATOR.md, \"Keys and the allow list\", connections per key)"
            case .accepted: ""
            }
        logger.warning(
            "\(what) (at most one warning per key or peer every \(Int(interval.components.seconds)) s; 'suppressed' counts the refusals since the last)",
            metadata: metadata)
    }
}
