import FileQueue
import JetbridgeModel
public import SystemSupport

/// A failure of an agent command, with the status the command line exits with.
///
/// The message says what happened, where (a path, a line, a key) and what to do; it is shown to people as is.
public struct AgentError: Error, Sendable, Hashable, CustomStringConvertible, ExitStatusError {
    /// The kind of failure, which decides the exit status: the one ``ExitStatus`` of every tool (`usage`,
    /// `dataError`, `noInput`, `cannotCreate`, `tryAgain`, `failure`, …).
    public typealias Code = ExitStatus

    public var code: Code
    /// What happened, where, and what to do.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var exitStatus: ExitStatus { code }

    public var description: String { message }
}

extension AgentError {
    /// Classifies any error a capture operation may meet.
    ///
    /// - Parameters:
    ///   - error: The error thrown.
    ///   - context: What was being done, prefixed to messages that lack it (such as `order`).
    public init(_ error: any Error, context: String? = nil) {
        let prefix = context.map { "\($0): " } ?? ""
        switch error {
        case let error as AgentError:
            self = error
        case let error as ValidationError:
            switch error.code {
            case .fileMissing, .fileUnreadable: self.init(.noInput, prefix + error.description)
            default: self.init(.dataError, prefix + error.description)
            }
        case let error as FileQueueError:
            self.init(queue: error)
        default:
            self.init(.failure, prefix + String(describing: error))
        }
    }

    /// Maps a queue failure during `sync` (reading the queue, acknowledging it, queueing a flight again for proof of
    /// delivery): a full disk means "try again later" and nothing acknowledged is lost; sync holds to no size cap.
    /// - Parameters:
    ///   - error: The queue's error.
    ///   - home: The home, so that the advice names it.
    init(syncQueue error: FileQueueError, home: AgentHome) {
        switch error.code {
        case .noSpace:
            self.init(
                .tryAgain,
                "the queue's disk is full (\(error)); the records not acknowledged stay queued: free some space, then run `\(home.command("sync"))` again"
            )
        default:
            self.init(.failure, "queue error: \(error)")
        }
    }

    /// Maps a queue failure: a full disk or the size cap means "try again later", nothing was stored.
    /// - Parameters:
    ///   - error: The queue's error.
    ///   - home: The home, so that the advice names it (`jetbridge-agent --home … sync`); nil: no `--home`.
    init(queue error: FileQueueError, home: AgentHome? = nil) {
        let sync = home?.command("sync") ?? "jetbridge-agent sync"
        switch error.code {
        case .noSpace:
            self.init(
                .tryAgain,
                "the queue's disk is full, so nothing was stored (\(error)); free space or run `\(sync)`, then try again"
            )
        case .sizeCapReached:
            self.init(
                .tryAgain,
                "the queue has reached its size cap (queueMaxBytes), so nothing was stored (\(error)); run `\(sync)` to drain it, then try again"
            )
        default:
            self.init(.failure, "queue error: \(error)")
        }
    }
}
