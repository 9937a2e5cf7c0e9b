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

/// Splits a stream of bytes (standard input, a file) into lines, in bounded memory.
///
/// A line longer than ``LuggageTag/maxPayloadBytes`` is not kept: only its length is, so a hostile 1 GB line costs
/// no more memory than a tag. `\r\n` line ends are accepted.
struct TagLineReader {
    enum Line {
        /// The line's bytes, without its line end.
        case bytes(ArraySlice<UInt8>)
        /// The line was longer than the cap; its length in bytes.
        case tooLong(Int)
    }

    private let fd: Int32
    /// A descriptor that becomes readable when the feed is to stop (``SystemSupport/Interruption``).
    private let interruption: Int32?
    /// Whether ``next(beforeWaiting:)`` ended because ``interruption`` became readable: the lines after
    /// ``lineNumber`` were not returned.
    private(set) var interrupted = false
    private let path: String
    private let cap: Int
    private var buffer: [UInt8]
    private var start = 0
    private var end = 0
    private var atEOF = false
    /// The number of the line last returned, from 1.
    private(set) var lineNumber = 0

    init(
        fd: Int32, path: String, interruption: Int32? = nil, cap: Int = LuggageTag.maxPayloadBytes, chunk: Int = 1 << 20
    ) {
        self.fd = fd
        self.interruption = interruption
        self.path = path
        self.cap = cap
        buffer = [UInt8](repeating: 0, count: max(chunk, cap * 2 + 2))
    }

    /// The next line, or `nil` at the end of input (a last line without a line end counts) or once ``interruption``
    /// is readable (checked before each read: ``interrupted``).
    /// - Parameter beforeWaiting: Called when no more input is there to read and the next read would wait for it (a
    ///   pipe from a scanner between two bags); never for a regular file, which is always readable.
    mutating func next(beforeWaiting: () -> Void = {}) throws(AgentError) -> Line? {
        var skipped = 0  // bytes of an over-long line already dropped
        while true {
            if let newline = buffer[start..<end].firstIndex(of: 0x0A) {
                let lineStart = start
                start = newline + 1
                lineNumber += 1
                return finish(lineStart..<newline, skipped: skipped)
            }
            if atEOF {
                guard start < end || skipped > 0 else { return nil }
                // A last line without its line end, when the feed was interrupted: most likely cut short by the same
                // Ctrl-C (it ends the process writing the pipe too), so it is left for the re-feed.
                if let interruption, Self.isReadable(interruption) {
                    interrupted = true
                    return nil
                }
                let lineStart = start
                start = end
                lineNumber += 1
                return finish(lineStart..<end, skipped: skipped)
            }
            // No line end in what is buffered: drop an over-long prefix, compact, read more.
            if end - start > cap + 1 {
                skipped += end - start
                start = end
            }
            if start > 0 {
                buffer.withUnsafeMutableBytes { raw in
                    _ = memmove(raw.baseAddress!, raw.baseAddress! + start, end - start)
                }
                end -= start
                start = 0
            }
            if !Self.isReadable(fd) { beforeWaiting() }
            if let interruption, !Self.waitForInput(fd, or: interruption) {
                interrupted = true
                return nil
            }
            let count = try fill()
            if count == 0 { atEOF = true }
        }
    }

    /// Whether a read of `fd` would return at once (data, the end of input or an error) rather than wait; a poll
    /// that fails is a no (handing over before a read is harmless, holding scans through a wait is not).
    private static func isReadable(_ fd: Int32) -> Bool {
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&item, 1, 0) > 0
    }

    /// Waits until `fd` can be read or `interruption` is readable.
    /// - Returns: False when `interruption` is (first), true when `fd` is (or a poll fails: the read then says why).
    private static func waitForInput(_ fd: Int32, or interruption: Int32) -> Bool {
        var items = [pollfd(fd: interruption, events: Int16(POLLIN), revents: 0), pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        while true {
            let ready = poll(&items, 2, -1)
            if ready < 0, errno == EINTR { continue }
            guard ready > 0 else { return true }
            return items[0].revents == 0
        }
    }

    private func finish(_ range: Range<Int>, skipped: Int) -> Line {
        var range = range
        if skipped == 0, range.count > 0, buffer[range.upperBound - 1] == 0x0D { range = range.dropLast() }
        let length = skipped + range.count
        return length > cap ? .tooLong(length) : .bytes(buffer[range])
    }

    private mutating func fill() throws(AgentError) -> Int {
        let capacity = buffer.count - end
        let offset = end
        let fd = self.fd
        let path = self.path
        // Array's closure methods rethrow untyped errors, so the typed error travels out in a Result.
        let count = try buffer.withUnsafeMutableBytes { raw in
            Result { () throws(SystemError) in
                try syscall("read", path: path) { read(fd, raw.baseAddress! + offset, capacity) }
            }
        }.mapError { AgentError($0) }.get()
        end += count
        return count
    }
}
