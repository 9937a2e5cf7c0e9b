public import SystemSupport

/// A failure the aggregator's commands report to the operator: what happened and what to do, plus the status the
/// process ends with.
public struct AggregatorError: Error, Hashable, Sendable, CustomStringConvertible, ExitStatusError {
    /// The kind of failure, which decides the exit status: the one ``ExitStatus`` of every tool (`usage`,
    /// `dataError`, `noInput`, `unavailable`, `cannotCreate`, `tryAgain`, `failure`).
    public typealias Code = ExitStatus

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The process exit status for this error (sysexits.h).
    public var exitCode: Int32 { code.exitCode }

    public var exitStatus: ExitStatus { code }

    public var description: String { message }
}
