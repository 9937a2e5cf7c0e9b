#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// An OS pipe that wakes a thread blocked in `zmq_poll` (which also polls plain file descriptors).
///
/// `write` on a pipe is thread-safe, so any thread may `signal()`; unlike an inproc socket this needs no lock. A
/// thread that polls sockets waits on one with ``PollItem/init(_:)-(WakeupPipe)`` beside them.
public final class WakeupPipe: Sendable {
    let readDescriptor: Int32
    let writeDescriptor: Int32

    /// Opens the pipe (both ends non-blocking, close-on-exec).
    /// - Throws: ``ZeroMQError`` with the system's error when no pipe can be made.
    public init() throws(ZeroMQError) {
        var descriptors: [Int32] = [0, 0]
        guard pipe(&descriptors) == 0 else {
            throw ZeroMQError(code: .init(rawValue: errno), operation: "create wakeup pipe")
        }
        readDescriptor = descriptors[0]
        writeDescriptor = descriptors[1]
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
    }

    /// Wakes the polling thread. A full pipe already guarantees a wake-up, so a failed write is fine.
    public func signal() {
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    /// Empties the pipe after a wake-up.
    public func drain() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &buffer, buffer.count) > 0 {}
    }

    deinit {
        close(readDescriptor)
        close(writeDescriptor)
    }
}
