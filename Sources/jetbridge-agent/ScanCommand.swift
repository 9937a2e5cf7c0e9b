import ArgumentParser
import JetbridgeAgent
import JetbridgeCLI
import JetbridgeLogging
import Logging
import JetbridgeModel
import SystemSupport

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

/// `scan`: record bag tags scanned at the origin or the destination.
struct ScanCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Record luggage tag scans: one tag, a file of tags, or tags on standard input, one per line.",
        usage: """
            jetbridge-agent scan --at origin --tag '{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"],"weight":42.0}'
            scanner-feed | jetbridge-agent scan --at destination
            """,
        discussion: """
            A tag is the QR code's JSON: {"id": "<UUID>", "owner": ["D", "ZMU"], "weight": 42.0}. \
            With --tag-file or standard input, empty lines are skipped, each bad line is reported on standard \
            error as `line N: reason` and the good ones are stored; every stored scan is durable when the \
            summary is printed. Exit 65 when any line was rejected, 0 otherwise. Ctrl-C (or SIGTERM) stops a \
            feed between two lines: what was read is stored, and it exits 75 naming the line to re-feed from.
            """
    )

    enum Point: String, ExpressibleByArgument, CaseIterable {
        case origin, destination
    }

    @OptionGroup var options: AgentOptions

    @Option(help: ArgumentHelp("Where the bag is: origin (departing) or destination (arriving).", valueName: "point"))
    var at: Point

    @Option(help: ArgumentHelp("One tag's JSON.", valueName: "json"))
    var tag: String?

    @Option(help: ArgumentHelp("A file of tags, one JSON object per line ('-' for standard input).", valueName: "file"))
    var tagFile: String?

    @Option(help: ArgumentHelp("The flight leg, overriding the configuration.", valueName: "flight"))
    var flight: String?

    @Flag(help: "Print the summary as JSON.")
    var json = false

    /// Rejected lines shown on standard error before the rest are only counted.
    static let maxReportedLines = 1000

    func validate() throws {
        if tag != nil, tagFile != nil {
            throw ValidationError("give --tag or --tag-file, not both")
        }
    }

    func run() throws {
        let service = try options.service()
        let point: ScanPoint = at == .origin ? .origin : .destination
        let summary: ScanSummary
        if let tag {
            summary = try service.recordScan(payload: tag, at: point, flight: flight)
        } else {
            let (fd, name) = try openInput()
            defer { if fd != 0 { close(fd) } }
            if fd == 0, isatty(0) != 0 {
                LogOutput.write(
                    "reading tags from standard input, one per line; end with Ctrl-D", level: .notice,
                    label: AgentTool.name)
            }
            var reported = 0
            // Ctrl-C or SIGTERM stops the feed between two lines: what was read is stored, and the message says
            // from which line to feed again (the default action lost the scans not yet written, and said nothing).
            let interruption = try? Interruption()
            defer { interruption?.restore() }
            summary = try service.recordScans(
                fd: fd, name: name, at: point, flight: flight, interruption: interruption
            ) { rejected in
                reported += 1
                if reported <= Self.maxReportedLines {
                    LogOutput.write(
                        "line \(rejected.line): \(rejected.reason)", level: .warning, label: AgentTool.name,
                        metadata: ["line": .stringConvertible(rejected.line)])
                }
            }
            if reported > Self.maxReportedLines {
                LogOutput.write(
                    "… and \(NumberText.grouped(reported - Self.maxReportedLines)) more rejected lines",
                    level: .warning, label: AgentTool.name,
                    metadata: ["moreRejectedLines": .stringConvertible(reported - Self.maxReportedLines)])
            }
        }
        if json {
            try Output.json(summary)
        } else {
            var text = "scanned \(Output.count(summary.scanned, "tag")) at \(summary.point.rawValue)"
            if summary.rejected > 0 { text += "; \(Output.count(summary.rejected, "line")) rejected" }
            print(text)
        }
        if summary.rejected > 0 { throw ExitCode(.dataError) }
    }

    private func openInput() throws(AgentError) -> (Int32, String) {
        guard let tagFile, tagFile != "-" else { return (0, "standard input") }
        let fd: Int32
        do {
            fd = try syscall("open", path: tagFile) { open(tagFile, O_RDONLY | O_CLOEXEC) }
        } catch {
            // Whatever is wrong with the path (missing, not allowed, a loop of links, too long, a file where a
            // directory should be) is 66, as AGENT.md says; only the process's own limits are a failure (1).
            throw AgentError(
                [EMFILE, ENFILE, ENOMEM].contains(error.errno) ? .failure : .noInput,
                "cannot read the tag file \(tagFile): \(error.reason); check the path given to --tag-file")
        }
        // A directory opens for reading, and its first read failed with exit 1. It is no tag file: 66.
        var info = stat()
        if fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw AgentError(
                .noInput, "cannot read the tag file \(tagFile): it is a directory; check the path given to --tag-file")
        }
        return (fd, tagFile)
    }
}
