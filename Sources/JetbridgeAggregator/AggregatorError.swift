/// A failure the aggregator's commands report to the operator: what happened and what to do, plus the sysexits code
/// the process ends with.
public struct AggregatorError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// Wrong arguments (`EX_USAGE`, 64).
        case usage
        /// Bad input data: a configuration file, a key, a device id (`EX_DATAERR`, 65).
        case badConfiguration
        /// A file named on the command line is not there, such as `--config FILE` (`EX_NOINPUT`, 66).
        case noInput
        /// Something needed is not there: an endpoint in use, no key pair, no store (`EX_UNAVAILABLE`, 69).
        case unavailable
        /// An output file cannot be created, such as `--output` into a directory that does not exist
        /// (`EX_CANTCREAT`, 73).
        case cannotCreate
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
        case .noInput: 66
        case .unavailable: 69
        case .cannotCreate: 73
        case .temporary: 75
        case .other: 1
        }
    }

    public var description: String { message }
}
