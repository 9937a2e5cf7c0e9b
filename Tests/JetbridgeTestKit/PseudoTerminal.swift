public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a program with its standard error on a real pseudo-terminal of a chosen width, as a person's terminal would
/// be, and returns every byte it wrote there: what `isatty(2)` and `TIOCGWINSZ` see is what a terminal shows.
public enum PseudoTerminal {
    /// The end of one run.
    public struct Run: CustomStringConvertible, Sendable {
        public var status: Int32
        /// What the program wrote to the terminal (its standard error), raw: escapes and carriage returns included.
        public var terminal: String
        /// Its standard output, which goes to a file.
        public var stdout: String

        public var description: String {
            "exit \(status)\nterminal: \(terminal.debugDescription)\nstdout: \(stdout)"
        }
    }

    /// An error setting up the terminal.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `executable` with standard error on a new pseudo-terminal `columns` wide, standard input empty and
    /// standard output in a file, and waits for it.
    /// - Parameters:
    ///   - executable: The program.
    ///   - arguments: Its arguments.
    ///   - columns: The terminal's width.
    ///   - directory: Its working directory.
    ///   - environment: Variables added to this process's environment.
    /// - Returns: The exit status and what it wrote.
    /// - Throws: ``Failure`` when no terminal can be opened; what starting the process throws.
    public static func run(
        _ executable: URL, _ arguments: [String], columns: Int, in directory: URL,
        environment: [String: String] = [:]
    ) throws -> Run {
        // /dev/ptmx and two ioctls: Glibc's Swift module exports neither posix_openpt, grantpt nor ptsname.
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, tiocsptlck, &unlock) == 0, ioctl(master, tiocgptn, &number) == 0 else {
            if master >= 0 { close(master) }
            throw Failure(description: "cannot open a pseudo-terminal: \(String(cString: strerror(errno)))")
        }
        let slavePath = "/dev/pts/\(number)"
        var size = winsize(ws_row: 40, ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        // CLOEXEC: a process another test starts meanwhile must not inherit it (the reader would wait for its end).
        let slave = open(slavePath, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else {
            close(master)
            throw Failure(description: "cannot open \(slavePath): \(String(cString: strerror(errno)))")
        }
        // Raw output: no \n → \r\n translation, so the bytes read are the bytes written.
        var attributes = termios()
        tcgetattr(slave, &attributes)
        cfmakeraw(&attributes)
        tcsetattr(slave, TCSANOW, &attributes)

        let output = Output()
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(master, $0.baseAddress, $0.count) }
                if count > 0 {
                    output.append(buffer[..<count])
                } else if count < 0, errno == EINTR {
                    continue
                } else {
                    break  // EIO: every writer closed its side.
                }
            }
            output.finish()
        }
        reader.start()

        let stdoutURL = FileManager.default.temporaryDirectory.appendingPathComponent("jetbridge-pty-\(UUID()).out")
        _ = FileManager.default.createFile(atPath: stdoutURL.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: stdoutURL) }
        var merged = ProcessInfo.processInfo.environment
        for variable in ["JETBRIDGE_HOME", "JETBRIDGE_LOG_LEVEL", "JETBRIDGE_LOG_FORMAT", "COLUMNS"] {
            merged[variable] = nil
        }
        merged.merge(environment) { $1 }
        let stdoutHandle = try FileHandle(forWritingTo: stdoutURL)
        let process: ChildProcess
        do {
            process = try ChildProcess(
                executable, arguments, in: directory, environment: merged, stdin: .null,
                stdout: .handle(stdoutHandle), stderr: .handle(FileHandle(fileDescriptor: slave, closeOnDealloc: false)))
        } catch {
            close(slave)
            close(master)
            throw error
        }
        // Only the child holds the terminal now: its exit ends the reader (EIO).
        close(slave)
        try? stdoutHandle.close()
        process.waitUntilExit()
        let text = output.wait()
        close(master)
        return Run(
            status: process.terminationStatus, terminal: String(decoding: text, as: UTF8.self),
            stdout: (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "")
    }

    /// `TIOCSPTLCK` and `TIOCGPTN` (Linux, asm-generic ioctl numbers), which the Glibc module does not export.
    private static let tiocsptlck: UInt = 0x4004_5431
    private static let tiocgptn: UInt = 0x8004_5430

    /// The bytes read from the terminal, and the end of reading.
    private final class Output: @unchecked Sendable {
        private let condition = NSCondition()
        private var bytes: [UInt8] = []
        private var done = false

        func append(_ more: ArraySlice<UInt8>) {
            condition.withLock { bytes += more }
        }

        func finish() {
            condition.withLock {
                done = true
                condition.broadcast()
            }
        }

        /// Waits for the reader's end (at most 20 s after the process's: only a leaked descriptor keeps it open).
        func wait() -> [UInt8] {
            condition.withLock {
                let deadline = Date().addingTimeInterval(20)
                while !done, condition.wait(until: deadline) {}
                return bytes
            }
        }
    }
}
