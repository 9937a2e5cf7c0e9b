import Foundation

/// Stops a benchmark on a bad flag: the problem and the usage line on standard error, exit status 64 (EX_USAGE), as
/// the tools do; not a `fatalError`, whose crash report hides the one line that matters.
public func exitWithUsage(_ problem: String? = nil, usage: String) -> Never {
    let text = (problem.map { "\($0)\n" } ?? "") + usage + "\n"
    FileHandle.standardError.write(Data(text.utf8))
    exit(64)
}
