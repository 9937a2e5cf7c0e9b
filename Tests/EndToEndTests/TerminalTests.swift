import Foundation
import JetbridgeTestKit
import Testing

/// `sync` on a real terminal (a pseudo-terminal of a chosen width): the progress bar and the log lines share it.
@Suite("Terminal: the progress bar and log lines")
struct TerminalTests {
    /// On a terminal, a log line was printed into the unfinished progress line
    /// (`… time left unknown2026-11-25T20:30:57.453Z warning …`): each log line must start on a line of its own.
    @Test func aLogLineNeverLandsInsideTheProgressLine() throws {
        let sandbox = try AgentSandbox()
        #expect(try sandbox.agent(["scan", "--at", "origin", "--tag", Tags.json()]).status == 0)
        let nobody = "ipc://\(sandbox.directory.path)/nobody"
        let run = try PseudoTerminal.run(
            AgentSandbox.executable("jetbridge-agent"),
            [
                "--home", sandbox.home.path, "sync", "--insecure", "--to", nobody + "-data", "--acks", nobody + "-acks",
                "--timeout", "3",
            ],
            columns: 100, in: sandbox.directory)
        #expect(run.status == 75, "\(run)")
        let output = run.terminal
        #expect(output.contains("acknowledged"), "no progress line was drawn: \(run)")
        let starts = output.ranges(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (warning|error|info|notice)/)
        #expect(!starts.isEmpty, "no log line: \(run)")
        for start in starts.map(\.lowerBound) {
            let before = output[output.startIndex..<start]
            let clean = before.isEmpty || before.hasSuffix("\n") || before.hasSuffix("\r\u{1B}[2K")
            #expect(clean, "a log line starts inside another line: …\(before.suffix(60).debugDescription)")
        }
        // Nor the final error.
        let error = try #require(output.range(of: "Error: sync timed out"), "\(run)")
        let beforeError = output[output.startIndex..<error.lowerBound]
        #expect(beforeError.hasSuffix("\n") || beforeError.hasSuffix("\r\u{1B}[2K"), "\(run)")
    }
}
