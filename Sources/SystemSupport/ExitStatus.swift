/// How a command ends: its process exit status, one of sysexits.h's codes, each with one name (docs/EXIT-CODES.md).
///
/// The one exit-status type of the three tools: the agent's and the aggregator's errors carry one, the queue tool and
/// the command-line scaffold exit with one, and no command line spells a number.
public enum ExitStatus: Int32, Sendable, Hashable, CaseIterable {
    /// 0: the command did what it was asked.
    case success = 0
    /// 1: anything else (an I/O error, a damaged file).
    case failure = 1
    /// 64 (`EX_USAGE`): the command line is wrong: an unknown option or subcommand, a malformed flag value.
    case usage = 64
    /// 65 (`EX_DATAERR`): a file's or a record's content breaks a rule.
    case dataError = 65
    /// 66 (`EX_NOINPUT`): a file or directory the command needs does not exist or cannot be read.
    case noInput = 66
    /// 69 (`EX_UNAVAILABLE`): a peer or resource is not there or not usable now, and waiting will not help.
    case unavailable = 69
    /// 73 (`EX_CANTCREAT`): an output the command would write must not or cannot be created.
    case cannotCreate = 73
    /// 75 (`EX_TEMPFAIL`): try again later: waiting may help (a full disk, a busy store or lock).
    case tryAgain = 75

    /// The process exit status.
    public var exitCode: Int32 { rawValue }
}

/// An error that ends a command with a message for people and an ``ExitStatus`` (the agent's and the aggregator's
/// errors): the command-line scaffold prints the message and exits with the status.
public protocol ExitStatusError: Error {
    /// What happened, where, and what to do; one line.
    var message: String { get }
    /// How the process ends.
    var exitStatus: ExitStatus { get }
}
