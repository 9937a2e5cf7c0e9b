import Foundation
import JetbridgeModel
import JetbridgeProtocol
import Logging
import SystemSupport
import JetbridgeStore

/// The one path a refused batch takes, whichever thread refuses it: the network thread on decoding (a bad header,
/// record or device) or the store thread on a rule that needs the store (another device's order, a flight's second
/// currency). Nothing of a refused batch is stored; it is logged, counted in the metrics and statistics
/// (``AnswerLedger``), answered, and counted against its device in the store (``count(device:reason:times:in:)``, on
/// the store thread, once per device and group).
struct BatchRefusals: Sendable {
    let ledger: AnswerLedger
    let logger: Logger

    /// A refused batch: the answer and to whom it goes.
    struct Answer {
        /// The device whose route gets the answer and against which the refusal is counted.
        let owner: String
        let ack: Ack
        /// The reason counted in the store (`report devices`).
        let reason: String
    }

    /// Logs `rejection`, then has ``AnswerLedger`` count it and `send` answer it (unless it names no device to answer).
    /// - Parameters:
    ///   - rejection: Why the batch was refused.
    ///   - key: The connection's device in CURVE mode (the key's allow-listed device, "" for none), nil otherwise or
    ///     when the store refused it (its header's device is then the key's).
    ///   - logKey: What the log line shows as `key`, when the refusing thread knows the connection.
    ///   - warning: The log line's text.
    ///   - log: Whether to write it (a refusal that repeats is logged at most every so often).
    ///   - send: Sends the answer on the refusing thread's socket; it may decline to (a revoked key's answer).
    /// - Returns: The answer, or nil when there was none to send.
    @discardableResult
    func refuse(
        _ rejection: BatchRejection, key: String?, logKey: String? = nil, warning: Logger.Message = "batch refused",
        log: Bool = true, send: (Answer) -> Void
    ) -> Answer? {
        let device = rejection.header?.device
        var metadata: Logger.Metadata = [
            "device": "\(InertText.escape(device ?? "?"))", "status": "\(rejection.status.rawValue)",
            "index": .stringConvertible(rejection.index), "reason": "\(rejection.reason)",
        ]
        if let logKey { metadata["key"] = "\(logKey)" }
        if log { logger.warning(warning, metadata: metadata) } else { logger.debug(warning, metadata: metadata) }
        // The answer goes back to the sender's route: its key's in CURVE mode (a forbidden header names someone else),
        // the header's device's on trust otherwise. A message that names no batch at all is answered too, as batch
        // 0…0 of the key's device (no queue sequence is 0), so its sender learns why (docs/PROTOCOL.md, "Every batch gets an answer").
        let owner = (key ?? device).flatMap { $0.isEmpty ? nil : $0 }
        let answer = owner.map {
            Answer(
                owner: $0, ack: rejection.ack ?? Self.unnamedAnswer(rejection, device: $0),
                reason: rejection.description)
        }
        // Counted against the key's device when there is one, even when unanswered (an empty key names none).
        let counted = key.flatMap { $0.isEmpty ? nil : $0 } ?? device ?? "-"
        let outcome = AnswerLedger.Outcome.refused(
            rejection.status, records: rejection.header?.count ?? 0, reason: rejection.reason)
        ledger.answer(device: counted, outcome) {
            if let answer { send(answer) }
        }
        return answer
    }

    /// Counts `times` refusals against `device` in the store, with the last one's reason.
    func count(device: String, reason: String, times: Int, in store: any StoreWriter) {
        do { try store.recordRejection(device: device, reason: reason, at: Date(), times: times) } catch {
            logger.warning("could not count a rejection", metadata: ["device": "\(device)", "error": "\(error)"])
        }
    }

    /// The answer to a message whose header could not be read: batch 0…0, `rejected` with index −1 (or `forbidden`
    /// from a revoked key, `unsupported-version` with the versions spoken).
    static func unnamedAnswer(_ rejection: BatchRejection, device: String) -> Ack {
        rejection.answer(device: device, first: 0, last: 0)
    }
}
