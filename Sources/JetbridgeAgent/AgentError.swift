import FileQueue
import JetbridgeModel

/// A failure of an agent command, with the sysexits code the command line exits with.
///
/// The message says what happened, where (a path, a line, a key) and what to do; it is shown to people as is.
public struct AgentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of failure, which decides the exit code.
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        /// The process exit code (sysexits).
        public let exitCode: Int32
        let name: String

        /// 64: the command was used wrongly (an unknown option, a malformed flag value such as an endpoint).
        public static let usage = Code(exitCode: 64, name: "usage")
        /// 65: input data breaks a rule (an order, a tag, a configuration or menu file).
        public static let dataError = Code(exitCode: 65, name: "dataError")
        /// 66: an input file does not exist or cannot be read.
        public static let noInput = Code(exitCode: 66, name: "noInput")
        /// 73: an output file cannot be created: a key pair already exists and `--force` was not given.
        public static let cannotCreate = Code(exitCode: 73, name: "cannotCreate")
        /// 75: try again later: the disk is full, the queue's size cap is reached, a lock is busy.
        public static let tryAgain = Code(exitCode: 75, name: "tryAgain")
        /// 1: anything else (an I/O error, a damaged queue).
        public static let failure = Code(exitCode: 1, name: "failure")

        public var description: String { name }
    }

    public var code: Code
    /// What happened, where, and what to do.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

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

    /// Maps a queue failure: a full disk or the size cap means "try again later", nothing was stored.
    init(queue error: FileQueueError) {
        switch error.code {
        case .noSpace:
            self.init(
                .tryAgain,
                "the queue's disk is full, so nothing was stored (\(error)); free space or run `jetbridge-agent sync`, then try again"
            )
        case .sizeCapReached:
            self.init(
                .tryAgain,
                "the queue has reached its size cap (queueMaxBytes), so nothing was stored (\(error)); run `jetbridge-agent sync` to drain it, then try again"
            )
        default:
            self.init(.failure, "queue error: \(error)")
        }
    }
}
