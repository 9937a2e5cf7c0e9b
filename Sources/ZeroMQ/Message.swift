internal import CZeroMQ

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// One frame owned by libzmq (`zmq_msg_t`), for sending and receiving without copying.
///
/// `~Copyable`: exactly one owner, and the frame is closed exactly once, when the owner drops it or a send
/// consumes it. Not `Sendable`; to hand received bytes to another thread, use `data` or `takeData()`.
public struct Message: ~Copyable {
    // Heap-allocated so the address stays fixed: small frames keep their bytes inside the zmq_msg_t itself.
    let pointer: UnsafeMutablePointer<zmq_msg_t>

    /// Creates an empty frame.
    public init() {
        pointer = .allocate(capacity: 1)
        zmq_msg_init(pointer)
    }

    /// Creates a frame of `count` uninitialised bytes; fill it with `withUnsafeMutableBytes`.
    /// - Parameter count: The frame size in bytes.
    /// - Throws: `ZeroMQError` if libzmq cannot allocate it.
    public init(count: Int) throws(ZeroMQError) {
        let pointer = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
        do {
            try zmqCall("allocate message of \(count) bytes") { zmq_msg_init_size(pointer, count) }
        } catch {
            pointer.deallocate()
            throw error
        }
        self.pointer = pointer
    }

    /// Creates a frame holding a copy of `data` (the one copy; sending it then copies nothing).
    /// - Parameter data: The bytes.
    /// - Throws: `ZeroMQError` if libzmq cannot allocate it.
    public init(_ data: Data) throws(ZeroMQError) {
        try self.init(count: data.count)
        withUnsafeMutableBytes { buffer in
            if !buffer.isEmpty { _ = data.copyBytes(to: buffer.bindMemory(to: UInt8.self)) }
        }
    }

    /// Creates a frame over caller-owned memory without copying; libzmq calls `deallocate` (on one of its I/O
    /// threads) once it no longer needs the bytes.
    /// - Parameters:
    ///   - bytes: The memory; must stay valid and unmodified until `deallocate` runs.
    ///   - deallocate: Releases the memory; runs exactly once, possibly on another thread.
    /// - Throws: `ZeroMQError` if libzmq rejects it (then `deallocate` has not run and the memory is the caller's).
    public init(
        bytesNoCopy bytes: UnsafeMutableRawBufferPointer,
        deallocate: @escaping @Sendable (UnsafeMutableRawBufferPointer) -> Void
    ) throws(ZeroMQError) {
        let pointer = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
        let box = Unmanaged.passRetained(DeallocationBox(bytes: bytes, deallocate: deallocate))
        do {
            try zmqCall("create message over \(bytes.count) bytes") {
                zmq_msg_init_data(
                    pointer, bytes.baseAddress, bytes.count,
                    { _, hint in
                        guard let hint else { return }
                        let box = Unmanaged<DeallocationBox>.fromOpaque(hint).takeRetainedValue()
                        box.deallocate(box.bytes)
                    }, box.toOpaque())
            }
        } catch {
            box.release()
            pointer.deallocate()
            throw error
        }
        self.pointer = pointer
    }

    deinit {
        // After a successful send libzmq has already emptied the frame; closing an empty frame is a no-op.
        zmq_msg_close(pointer)
        pointer.deallocate()
    }

    /// The frame's size in bytes.
    public var count: Int { zmq_msg_size(pointer) }

    /// Whether more frames of the same multipart message follow this received frame.
    public var hasMore: Bool { zmq_msg_more(pointer) != 0 }

    /// Calls `body` with the frame's bytes, without copying.
    /// - Parameter body: Reads the bytes; must not keep the pointer.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public func withUnsafeBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: zmq_msg_data(pointer), count: zmq_msg_size(pointer)))
    }

    /// Calls `body` with the frame's bytes for writing, without copying.
    /// - Parameter body: Writes the bytes; must not keep the pointer.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    public mutating func withUnsafeMutableBytes<Result, Failure: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeMutableRawBufferPointer(start: zmq_msg_data(pointer), count: zmq_msg_size(pointer)))
    }

    /// A copy of the frame's bytes.
    public var data: Data { withUnsafeBytes { Data($0) } }

    /// Turns the frame into `Data`; large frames are not copied (the `Data` owns the libzmq buffer).
    /// - Returns: The bytes.
    public consuming func takeData() -> Data {
        let count = zmq_msg_size(pointer)
        // Below a few KiB a copy is cheaper than the extra allocations of a custom deallocator.
        guard count >= 4096 else {
            let copy = data
            _ = consume self
            return copy
        }
        let pointer = self.pointer
        discard self
        let owner = ReceivedFrame(pointer)
        return Data(bytesNoCopy: zmq_msg_data(pointer), count: count, deallocator: .custom { _, _ in owner.close() })
    }

    /// A metadata property of the connection the frame arrived on (`zmq_msg_gets`), e.g. `"User-Id"`,
    /// `"Peer-Address"`, `"Socket-Type"`, `"Routing-Id"`.
    /// - Parameter property: The property name (case-sensitive).
    /// - Returns: Its value, or `nil` if the connection has no such property.
    public func metadata(_ property: String) -> String? {
        guard let value = zmq_msg_gets(pointer, property) else { return nil }
        return String(cString: value)
    }

    /// The identity the ZAP handler assigned to the sender (`User-Id` metadata), e.g. the device id.
    public var userID: String? { metadata("User-Id") }

    /// The sender's IP address (`Peer-Address` metadata), for TCP connections.
    public var peerAddress: String? { metadata("Peer-Address") }

    /// The sender's CURVE public key (Z85), a property our ``ZAPHandler`` adds to every connection it admits.
    public var publicKey: String? { metadata(ZAPHandler.publicKeyProperty) }

    /// The file descriptor of the connection the frame arrived on (`ZMQ_SRCFD`), or `nil` for one that has none
    /// (inproc, or a frame made here). Deprecated in libzmq but kept through 4.3: the one way to tell a TCP peer's
    /// connections apart, and to match them with the socket monitor's `accepted` and `disconnected` events.
    public var sourceDescriptor: Int32? {
        let descriptor = zmq_msg_get(pointer, ZMQ_SRCFD)
        return descriptor >= 0 ? descriptor : nil
    }
}

/// Keeps a caller's deallocation closure alive until libzmq's free callback runs.
private final class DeallocationBox: @unchecked Sendable {
    // Written once in init, read once by the free callback: no concurrent access.
    let bytes: UnsafeMutableRawBufferPointer
    let deallocate: @Sendable (UnsafeMutableRawBufferPointer) -> Void

    init(bytes: UnsafeMutableRawBufferPointer, deallocate: @escaping @Sendable (UnsafeMutableRawBufferPointer) -> Void)
    {
        self.bytes = bytes
        self.deallocate = deallocate
    }
}

/// Owns a received `zmq_msg_t` whose bytes a `Data` borrows; closes it when the `Data` is released.
private struct ReceivedFrame: @unchecked Sendable {
    // Touched only by the Data's deallocator, which runs once.
    let pointer: UnsafeMutablePointer<zmq_msg_t>

    init(_ pointer: UnsafeMutablePointer<zmq_msg_t>) { self.pointer = pointer }

    func close() {
        zmq_msg_close(pointer)
        pointer.deallocate()
    }
}
