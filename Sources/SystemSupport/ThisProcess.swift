#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Who this process is among several that share a database or a directory: its host's name and its pid. The
/// PostgreSQL store names its sessions and receipt claims with it, the receipt writer its temporary files, so that
/// one aggregator can tell its own leftovers from those of another that is still running.
package enum ThisProcess {
    /// The host's name as `gethostname(2)` gives it (no DNS lookup, unlike Foundation's `hostName`); `localhost` when
    /// it has none.
    package static let hostName: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }()

    /// The host's name cut to at most 64 of `A–Z a–z 0–9 -`, every other character as `-`: safe in a file name and
    /// free of the `.` that separates a temporary file name's parts.
    package static let hostLabel: String = {
        let label = String(
            hostName.prefix(64).map { character -> Character in
                character.isASCII && (character.isLetter || character.isNumber || character == "-") ? character : "-"
            })
        return label.isEmpty ? "localhost" : label
    }()

    /// This process's id.
    package static var pid: Int32 { getpid() }

    /// Whether a process with `pid` runs on this host (it may belong to another user: `EPERM` counts as running).
    package static func isRunning(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }
}
