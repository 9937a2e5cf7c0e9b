import ArgumentParser
import FileQueue
import JetbridgeCLI
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Operator tool for a FileQueue directory: check it, show it, and (for crash tests) append and acknowledge.
@main
struct JetbridgeQueue: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jetbridge-queue",
        abstract: "Inspect and check a Jetbridge file queue.",
        discussion: """
            fsck, status and dump never change the queue; append and ack open it (which repairs it). ack discards \
            records: it is for tests and recovery by hand, never for a device whose records the ground has not stored.

            The queue deletes a segment once every record in it is acknowledged. Retention is the agent's: sync keeps \
            what the ground acknowledged in <home>/delivered/ until the ground confirms the flight (then up to \
            retention.days and retention.maxBytes, oldest confirmed first; unconfirmed records are never deleted, and \
            capture stops at the cap instead). ack here writes nothing there.

            Exit codes follow sysexits (docs/EXIT-CODES.md): 0 done, 64 usage (also a setting out of range), 65 \
            damage found (fsck), an ack past the last record or a record too large, 66 no queue there, 75 the disk \
            full or --max-total-bytes reached, 1 other failures. The error line is JSON when $JETBRIDGE_LOG_FORMAT \
            is json.
            """,
        version: JetbridgeVersion.line(for: QueueTool.name),
        subcommands: [Fsck.self, Status.self, Dump.self, Append.self, Ack.self]
    )

    /// Parses and runs the command (JetbridgeCLI's `main`).
    static func main() async {
        await CommandLineMain.run(Self.self, tool: QueueTool.self)
    }
}

/// The queue tool, as the command-line scaffold knows it.
enum QueueTool: CommandLineTool {
    static let name = "jetbridge-queue"
    static let errorPrefix = "Error: "
}

/// A failure the queue tool reports: its message on standard error, its exit status.
struct QueueToolError: ExitStatusError {
    var message: String
    var exitStatus: ExitStatus

    init(message: String, exitStatus: ExitStatus) {
        self.message = message
        self.exitStatus = exitStatus
    }

    /// A queue's failure with the code docs/EXIT-CODES.md gives its situation, as the agent and the aggregator end.
    init(_ error: FileQueueError) {
        let status: ExitStatus
        switch error.code {
        case .noSpace, .sizeCapReached: status = .tryAgain
        case .notAQueue: status = .noInput
        case .invalidConfiguration: status = .usage
        case .recordTooLarge, .emptyBatch, .invalidAcknowledgement, .corruptQueue: status = .dataError
        default: status = error.errno == ENOENT ? .noInput : .failure
        }
        var text = error.message
        if let path = error.path { text += " (\(path))" }
        self.init(message: text, exitStatus: status)
    }
}

/// Runs a command's work, its queue failures ended with their exit codes (``QueueToolError/init(_:)``).
func queueFailures(_ body: () throws -> Void) throws {
    do { try body() } catch let error as FileQueueError { throw QueueToolError(error) }
}

struct Fsck: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a queue without changing it; report torn tails and corrupt frames.",
        discussion: "Exits 0 when no record is damaged, 65 when damage was found (the next open repairs it).")

    @Argument(help: "The queue directory.") var directory: String
    @Flag(help: "Print the report as JSON.") var json = false

    func run() throws {
        try queueFailures {
            let report = try FileQueue.check(directory: URL(fileURLWithPath: directory))
            if json {
                try printJSON(report)
            } else {
                for problem in report.problems {
                    print(problem.kind.isDamage ? "DAMAGE" : "note", problem)
                }
                let status = report.status
                let segments = "\(status.segments) segment\(status.segments == 1 ? "" : "s")"
                let records = "\(status.records) record\(status.records == 1 ? "" : "s")"
                print(
                    "\(segments), \(records), \(status.quarantined) quarantined, "
                        + (report.isClean ? "clean" : "\(report.problems.filter(\.kind.isDamage).count) damaged"))
            }
            if !report.isClean { throw ExitCode(.dataError) }
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show records, bytes, acknowledged position.")

    @Argument(help: "The queue directory.") var directory: String
    @Flag(help: "Print JSON.") var json = false

    func run() throws {
        try queueFailures {
            let status = try FileQueue.check(directory: URL(fileURLWithPath: directory)).status
            if json {
                try printJSON(status)
                return
            }
            let range = status.firstSequence.map { "\($0)…\(status.lastSequence ?? $0)" } ?? "none"
            print(
                """
                records         \(status.records) (sequences \(range))
                unacknowledged  \(status.unacknowledged)
                acknowledged    through \(status.acknowledgedThrough)
                bytes           \(status.bytes) in \(status.segments) segment\(status.segments == 1 ? "" : "s")
                quarantined     \(status.quarantined)
                unrepaired      \(status.unrepaired)
                """)
        }
    }
}

struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print records: sequence, length, and payload (UTF-8 if printable, else hex).")

    @Argument(help: "The queue directory.") var directory: String
    @Option(help: "First sequence to print.") var from: UInt64 = 0

    func run() throws {
        try queueFailures {
            try FileQueue.forEachRecord(directory: URL(fileURLWithPath: directory), from: from) { sequence, payload in
                let bytes = Array(payload)
                let text: String
                if let string = String(validating: bytes, as: UTF8.self),
                    string.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F })
                {
                    text = string
                } else {
                    text = bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
                }
                print("\(sequence)\t\(bytes.count)\t\(text)")
            }
        }
    }
}

struct QueueOptions: ParsableArguments {
    @Argument(help: "The queue directory.") var directory: String
    @Option(help: "Segment size in bytes.") var segmentSize: Int = 8 << 20
    @Option(help: "Cap on the bytes of all segments.") var maxTotalBytes: Int64?
    @Flag(help: "Do not fsync (tests only).") var noSync = false
    @Option(help: .hidden) var crashAt: String?

    func open() throws -> FileQueue {
        var configuration = FileQueue.Configuration(
            segmentSize: segmentSize, maxTotalBytes: maxTotalBytes, syncPolicy: noSync ? .none : .always)
        if let crashAt {
            // Crash tests: die by SIGKILL at the named step, as a power cut or the OOM killer would.
            configuration._stepHook = { step in
                if step == crashAt { raise(SIGKILL) }
            }
        }
        return try FileQueue.open(directory: URL(fileURLWithPath: directory), configuration: configuration)
    }
}

struct Append: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Append records and print each sequence number once the record is durable.",
        discussion: """
            With --count, appends generated records "PREFIX:INDEX:" padded to --size bytes and prints
            "INDEX SEQUENCE" per record; otherwise appends each line of standard input and prints its sequence.
            """)

    @OptionGroup var queue: QueueOptions
    @Option(help: "Generate this many records instead of reading standard input.") var count: Int?
    @Option(help: "Prefix of generated records.") var prefix = "r"
    @Option(help: "Size of generated records in bytes.") var size = 64
    @Option(help: "Records per append(contentsOf:) call (group commit).") var batch = 1

    func run() throws {
        try queueFailures {
            let fileQueue = try queue.open()
            if let count {
                var index = 0
                while index < count {
                    let indices = index..<min(count, index + max(1, batch))
                    let payloads = indices.map { Data(Self.record(prefix: prefix, index: $0, size: size).utf8) }
                    let sequences = try fileQueue.append(contentsOf: payloads)
                    for (offset, sequence) in sequences.enumerated() {
                        emit("\(indices.lowerBound + offset) \(sequence)")
                    }
                    index = indices.upperBound
                }
            } else {
                while let line = readLine() {
                    emit(String(try fileQueue.append(Data(line.utf8))))
                }
            }
        }
    }

    /// A self-describing record, so a reader can tell a whole one from a part: `prefix:index:` then dots.
    static func record(prefix: String, index: Int, size: Int) -> String {
        let head = "\(prefix):\(index):"
        return head + String(repeating: ".", count: max(0, size - head.utf8.count))
    }
}

struct Ack: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Acknowledge records through a sequence; deletes fully acknowledged segments.",
        discussion: """
            Records acknowledged here are gone from the queue and will never be synced: use it only for tests or to \
            recover by hand records you know the ground has stored.
            """)

    @OptionGroup var queue: QueueOptions
    @Option(help: "Acknowledge every record up to this sequence.") var through: UInt64

    func run() throws {
        try queueFailures {
            // Opening would create an empty queue where there is none; acknowledging into one is always a typo.
            guard FileSystem.exists(queue.directory) else {
                throw QueueToolError(message: "no queue at \(queue.directory)", exitStatus: .noInput)
            }
            // Past the last record: 65 (``QueueToolError/init(_:)``).
            try queue.open().acknowledge(through: through)
        }
    }
}

func printJSON(_ value: some Encodable) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(value), as: UTF8.self))
}

/// Writes a line to standard output at once (unbuffered): a crash test reads each line as proof of durability.
func emit(_ line: String) {
    Array((line + "\n").utf8).withUnsafeBytes { _ = try? FileSystem.writeFully(1, $0) }
}
