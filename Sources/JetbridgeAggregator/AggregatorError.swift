/// A failure the aggregator's commands report to the operator: what happened and what to do, plus the sysexits code
/// the process ends with.
public struct AggregatorError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// Wrong arguments (`EX_USAGE`, 64).
        case usage
        /// Bad input data: a configuration file, a key, a device id (`EX_DATAERR`, 65).
        case badConfiguration
        /// Something needed is not there: an endpoint in use, no key pair, no store (`EX_UNAVAILABLE`, 69).
        case unavailable
        /// Try again later: the store is busy or the disk is full (`EX_TEMPFAIL`, 75).
        case temporary
        /// Anything else (1).
        case other
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The process exit status for this error (sysexits.h).
    public var exitCode: Int32 {
        switch code {
        case .usage: 64
        case .badConfiguration: 65
        case .unavailable: 69
        case .temporary: 75
        case .other: 1
        }
    }

    public var description: String { message }
}
