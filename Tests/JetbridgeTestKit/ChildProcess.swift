public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A program started with `posix_spawn` and waited for with `waitid`: what the suites use instead of Foundation's
/// `Process`, whose `run()` on Linux (Swift 6.3.1) reads past a `dirent` while it lists `/proc/self/fd` and crashes the
/// test process now and then (swift-corelibs-foundation pull request 5472: a SIGSEGV in `memcpy` under
/// `Process.run()`; it ended a CI run). The child starts with only descriptors 0, 1 and 2 open
/// (`posix_spawn_file_actions_addclosefrom_np`), in a process group of its own, with no signal blocked.
public final class ChildProcess: @unchecked Sendable {
    /// Where one of the child's standard streams comes from or goes to.
    public enum Stream {
        /// The test process's own.
        case inherit
        /// `/dev/null`.
        case null
        /// This open file (it stays open in the test process; close it when the child has started).
        case handle(FileHandle)
        /// This pipe: the child gets the end it needs, the test process's copy of that end is closed once started.
        case pipe(Pipe)
    }

    /// How the child ended.
    public enum TerminationReason: Sendable {
        /// It called `exit`: ``terminationStatus`` is its status.
        case exit
        /// A signal ended it: ``terminationStatus`` is the signal's number.
        case uncaughtSignal
    }

    /// An error starting the child: which call failed, for which program.
    public struct StartFailure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The child's pid.
    public let processIdentifier: Int32
    private let lock = NSLock()
    private var ending: (reason: TerminationReason, status: Int32)?

    /// Starts `executable` with `arguments`.
    /// - Parameters:
    ///   - executable: The program's file.
    ///   - arguments: Its arguments (without its own name, which is added as `argv[0]`).
    ///   - directory: Its working directory (the test process's when nil).
    ///   - environment: Its whole environment (the test process's when nil).
    ///   - stdin: Its standard input.
    ///   - stdout: Its standard output.
    ///   - stderr: Its standard error.
    /// - Throws: ``StartFailure`` naming the program and the call that failed.
    public init(
        _ executable: URL, _ arguments: [String], in directory: URL? = nil, environment: [String: String]? = nil,
        stdin: Stream = .null, stdout: Stream = .inherit, stderr: Stream = .inherit
    ) throws {
        func failure(_ call: String, _ code: Int32) -> StartFailure {
            StartFailure(description: "cannot start \(executable.path): \(call): \(String(cString: strerror(code)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var nullDevice: FileHandle?
        defer { try? nullDevice?.close() }
        var parentEnds: [FileHandle] = []
        for (target, stream) in [(STDIN_FILENO, stdin), (STDOUT_FILENO, stdout), (STDERR_FILENO, stderr)] {
            let source: Int32
            switch stream {
            case .inherit: continue
            case .null:
                if nullDevice == nil { nullDevice = FileHandle(forUpdatingAtPath: "/dev/null") }
                guard let nullDevice else { throw failure("open /dev/null", errno) }
                source = nullDevice.fileDescriptor
            case .handle(let handle): source = handle.fileDescriptor
            case .pipe(let pipe):
                let end = target == STDIN_FILENO ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                source = end.fileDescriptor
                parentEnds.append(end)
            }
            let code = posix_spawn_file_actions_adddup2(&actions, source, target)
            guard code == 0 else { throw failure("posix_spawn_file_actions_adddup2", code) }
        }
        var code = Self.closeFrom(&actions, 3)
        guard code == 0 else { throw failure("posix_spawn_file_actions_addclosefrom_np", code) }
        if let directory {
            code = directory.path.withCString { Self.changeDirectory(&actions, $0) }
            guard code == 0 else { throw failure("posix_spawn_file_actions_addchdir_np", code) }
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = [executable.path] + arguments
        let envp = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        var pid: pid_t = 0
        code = Self.withCStrings(argv) { argv in
            Self.withCStrings(envp) { envp in
                posix_spawn(&pid, executable.path, &actions, &attributes, argv, envp)
            }
        }
        guard code == 0 else { throw failure("posix_spawn", code) }
        processIdentifier = pid
        for end in parentEnds { try? end.close() }
    }

    /// Starts the program and waits for its end (output inherited unless given).
    @discardableResult
    public static func run(
        _ executable: URL, _ arguments: [String] = [], stdout: Stream = .inherit, stderr: Stream = .inherit
    ) throws -> ChildProcess {
        let child = try ChildProcess(executable, arguments, stdout: stdout, stderr: stderr)
        child.waitUntilExit()
        return child
    }

    /// Whether it has not ended yet (reaps it when it has).
    public var isRunning: Bool {
        lock.withLock {
            if ending == nil { reap(blocking: false) }
            return ending == nil
        }
    }

    /// Waits on the calling thread for its end (call it from a thread of its own, or from a synchronous test).
    public func waitUntilExit() {
        while lock.withLock({ ending == nil }) {
            // Wait without reaping (WNOWAIT) outside the lock, so `isRunning` answers meanwhile; then reap under it.
            var info = siginfo_t()
            let result = waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT)
            if result == -1, errno == EINTR { continue }
            lock.withLock {
                if ending == nil { reap(blocking: result == -1) }
            }
        }
    }

    /// Sends SIGTERM.
    public func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    /// The exit status, or the signal's number when ``terminationReason`` is ``TerminationReason/uncaughtSignal``.
    /// Only once it has ended.
    public var terminationStatus: Int32 {
        lock.withLock {
            precondition(ending != nil, "\(processIdentifier) is still running")
            return ending!.status
        }
    }

    /// How it ended. Only once it has ended.
    public var terminationReason: TerminationReason {
        lock.withLock {
            precondition(ending != nil, "\(processIdentifier) is still running")
            return ending!.reason
        }
    }

    /// Collects its status if it has ended (under `lock`). `blocking` only after `waitid` failed, which it does only
    /// when the child is already reaped: then ECHILD records an unknown ending instead of spinning.
    private func reap(blocking: Bool) {
        var status: Int32 = 0
        let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
        if result == processIdentifier {
            let signal = status & 0x7f
            ending = signal == 0 ? (.exit, (status >> 8) & 0xff) : (.uncaughtSignal, signal)
        } else if result == -1, errno == ECHILD {
            ending = (.uncaughtSignal, -1)
        }
    }

    /// `argv`/`envp`: the strings as a NULL-terminated array of C strings, valid inside `body`.
    private static func withCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R
    ) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// Adds to `actions` the closing of every descriptor from 3 up in the child, for a caller that spawns with
    /// actions of its own: a long-lived child (a PostgreSQL server) that inherits this process's sockets keeps their
    /// other ends from seeing a close. (A metrics test saw five accepted connections that the server had closed stay
    /// open past a minute while PostgreSQL suites started servers beside it: NIO accepts without `SOCK_CLOEXEC`.)
    /// - Returns: 0, or the error number.
    public static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) -> Int32 {
        closeFrom(&actions, 3)
    }

    // Glibc has both calls (2.34 and 2.29; Debian 12 has 2.36), but its Swift module does not export them (they are
    // declared for _GNU_SOURCE only): they are looked up by name once.
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    private static let closeFrom: CloseFrom = glibcFunction("posix_spawn_file_actions_addclosefrom_np")
    private static let changeDirectory: ChangeDirectory = glibcFunction("posix_spawn_file_actions_addchdir_np")

    private static func glibcFunction<F>(_ name: String) -> F {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            fatalError("this C library has no \(name) (glibc 2.34 or later has it)")
        }
        return unsafeBitCast(symbol, to: F.self)
    }
}
