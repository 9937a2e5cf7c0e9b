import Foundation

/// A terminal transcript in a document (README.md, docs/*.md): `$ command` lines, each followed by what it printed
/// and, when it failed, `(exit N)`. The tests run the commands as a reader would paste them and compare what they
/// print with the document, after ``normalize(_:)`` has replaced what differs from run to run.
struct Transcript {
    /// One `$ ` command and what the document says it prints.
    struct Step: CustomStringConvertible {
        /// The command; a here-document's lines follow the first line.
        var command: [String]
        /// The lines printed (standard output and standard error as they interleave), without `(exit N)`.
        var output: [String] = []
        /// `(exit N)`, else 0.
        var status: Int32 = 0
        /// The document's line of the `$ `, for failure messages.
        var line: Int

        var description: String { "line \(line): $ \(command[0])" }
    }

    /// The fenced code blocks between the first `start` and the next `end` after it, each as its lines and the line
    /// number of its first line.
    static func blocks(in document: String, from start: String, to end: String) throws -> [(lines: [String], line: Int)]
    {
        let lines = document.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let first = lines.firstIndex(where: { $0.hasPrefix(start) }) else {
            throw TranscriptError(description: "no line starting '\(start)'")
        }
        guard let last = lines[first...].dropFirst().firstIndex(where: { $0.hasPrefix(end) }) else {
            throw TranscriptError(description: "no line starting '\(end)' after '\(start)'")
        }
        var blocks: [(lines: [String], line: Int)] = []
        var current: [String]?
        var opened = 0
        for index in first..<last {
            let text = lines[index]
            if text.hasPrefix("```") {
                if let block = current {
                    blocks.append((block, opened + 1))
                    current = nil
                } else {
                    current = []
                    opened = index + 1
                }
            } else if current != nil {
                current!.append(text)
            }
        }
        return blocks
    }

    /// The steps of the blocks that are transcripts (those with at least one `$ ` line), in order.
    static func steps(in document: String, from start: String, to end: String) throws -> [Step] {
        var steps: [Step] = []
        for (lines, line) in try blocks(in: document, from: start, to: end) where lines.contains(where: isCommand) {
            var heredoc: String?
            for (offset, text) in lines.enumerated() {
                if let terminator = heredoc {
                    steps[steps.count - 1].command.append(text)
                    if text == terminator { heredoc = nil }
                } else if isCommand(text) {
                    let command = String(text.dropFirst(2))
                    steps.append(Step(command: [command], line: line + offset))
                    if let marker = command.firstMatch(of: /<<-?'?([A-Z]+)'?/) { heredoc = String(marker.output.1) }
                } else if let status = text.wholeMatch(of: /\(exit (\d+)\)/), !steps.isEmpty {
                    steps[steps.count - 1].status = Int32(status.output.1)!
                } else if !steps.isEmpty {
                    steps[steps.count - 1].output.append(text)
                }
            }
        }
        return steps
    }

    static func isCommand(_ line: String) -> Bool { line.hasPrefix("$ ") }

    /// `text` with what changes from run to run replaced by a placeholder, the same way in the document and in what a
    /// run printed: record and order ids, times, CURVE keys (40 characters of Z85), durations and rates, process ids,
    /// queue sizes in bytes, and the owner and date columns of `ls -l`; carriage returns at line ends go.
    static func normalize(_ text: String) -> String {
        var text = text
        for (pattern, placeholder) in rules {
            text = pattern.stringByReplacingMatches(
                in: text, range: NSRange(text.startIndex..., in: text), withTemplate: placeholder)
        }
        return text
    }

    /// ``normalize(_:)``'s rules, in order (ICU expressions: Swift's own have no lookbehind).
    private static let rules: [(NSRegularExpression, String)] = [
        (#"[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"#, "<id>"),
        (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z"#, "<time>"),
        // A Z85 key stands alone: between quotes, blanks, `=` or the ends of the line.
        (#"(?<=^|[\s'"=])[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}(?=$|[\s'"`])"#, "<key>"),
        (#"\b\d+m\d+\.\d+s\b"#, "<time>"),
        (#"\b\d+(?:\.\d+)? s\b"#, "<seconds> s"),
        (#"\b[\d,]+(?:\.\d+)? records/s\b"#, "<rate> records/s"),
        (#"\bpid \d+"#, "pid <pid>"),
        // Queue segments hold timestamps whose encoded size varies (MessagePack's 32- or 64-bit form).
        (#"\b[\d,]+ bytes\b"#, "<size> bytes"),
        // CSV ends its lines in CR LF (RFC 4180); a document shows none.
        (#"\r(?=\n|\z)"#, ""),
        (#"^total \d+$"#, "total <blocks>"),
        // A key starting with '-' comes after `--` (DeviceKeys.allowCommand); about one key in 85.
        (#"devices allow -- "#, "devices allow "),
        (#"(?<=^[-dl][-rwxsStT]{9})\.? +\d+ +\S+ +\S+ +\d+ +\w{3} +\d+ +[\d:]+ "#, " <owner> <date> "),
    ].map { (try! NSRegularExpression(pattern: $0.0, options: [.anchorsMatchLines]), $0.1) }
}

struct TranscriptError: Error, CustomStringConvertible {
    var description: String
}
