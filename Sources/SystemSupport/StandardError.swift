#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Standard error, shared by whole lines (log lines, messages, the final error) and a status line redrawn in place
/// (`sync`'s progress bar on a terminal).
///
/// A line written while the status line is on screen would otherwise continue it (`… time left unknown2026-11-25T…
/// warning …`). So every write goes through here, under one lock: whole lines first clear the status line, then it is
/// drawn again below them; one `write(2)` each, so nothing of another thread lands in between.
package enum StandardError {
    /// The status line on screen, nil when none is.
    private static let status = Locked<String?>(nil)

    /// What clears the terminal's current line: carriage return, then erase the whole line.
    package static let clearLine = "\r\u{1B}[2K"

    /// Writes `text`, whole lines ending in a newline, at the start of a line: a status line on screen is cleared
    /// first and drawn again after them.
    package static func write(lines text: String) {
        status.withLock { status in
            emit(status == nil ? text : clearLine + text + status!)
        }
    }

    /// Draws `line` (no newline) as the status line, in place of the one on screen.
    package static func drawStatus(_ line: String) {
        status.withLock { status in
            status = line
            emit(clearLine + line)
        }
    }

    /// Clears the status line, if one is on screen, so that what follows starts on a clean line.
    package static func clearStatus() {
        status.withLock { status in
            guard status != nil else { return }
            status = nil
            emit(clearLine)
        }
    }

    /// Writes all of `text` to file descriptor 2; a failed write drops the rest (output never stops the process).
    private static func emit(_ text: String) {
        Array(text.utf8).withUnsafeBytes { _ = try? FileSystem.writeFully(2, $0) }
    }
}
