internal import CZeroMQ
import Synchronization
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A ZAP (RFC 27) authentication handler that admits only allow-listed CURVE clients.
///
/// Binds `inproc://zeromq.zap.01` on its context and answers libzmq's authentication requests on its own thread.
/// A CURVE client whose public key is in the allowlist is admitted and its identity becomes the `User-Id` of every
/// message it sends (`ReceivedMessage.userID`, `Message.userID`). Everything else is refused: unknown keys, and
/// every other mechanism (NULL, PLAIN) on sockets that consult ZAP. Without a handler, a CURVE server admits anyone
/// who knows its public key; create one before binding CURVE server sockets on the same context.
///
/// Thread-safe: the allowlist may be changed from any thread while it runs; changes apply to new handshakes.
/// It runs until `stop()` or until its context is shut down or terminated (its thread keeps it alive until then).
public final class ZAPHandler: Sendable {
    /// The endpoint libzmq sends ZAP requests to.
    public static let endpoint = "inproc://zeromq.zap.01"
    /// The connection property (ZAP metadata) that carries an admitted client's public key (Z85), so a server can
    /// tell, message by message, whether the key that was admitted is still allowed (revocation).
    public static let publicKeyProperty = "X-Public-Key"

    /// One authentication decision, for logs and metrics.
    public struct Decision: Sendable, Hashable {
        /// What the handler answered.
        public enum Result: String, Sendable, Hashable, CaseIterable {
            /// An allow-listed CURVE key (status 200).
            case accepted
            /// A CURVE key not on the allowlist (400).
            case refusedKey = "refused-key"
            /// Another mechanism than CURVE (NULL, PLAIN), or CURVE without a 32-byte key (400).
            case refusedMechanism = "refused-mechanism"
            /// Not a ZAP 1.0 request (500).
            case malformed
            /// An allow-listed key the handler's `admit` check turned away for now (300, RFC 27's temporary error),
            /// such as one that holds as many connections as it may.
            case refusedBusy = "refused-busy"
        }

        public let result: Result
        /// The client's CURVE public key in Z85, when it presented one.
        public let publicKeyZ85: String?
        /// The peer's address as libzmq reports it (the IP address for TCP).
        public let address: String
        /// The security mechanism the client used (`CURVE`, `NULL`, `PLAIN`).
        public let mechanism: String
        /// The identity admitted (the device id), for an accepted key.
        public let identity: String?
    }

    private let allowlist: Mutex<[String: String]>
    private let observer: (@Sendable (Decision) -> Void)?
    private let admit: (@Sendable (_ publicKeyZ85: String, _ identity: String) -> Bool)?
    private let wakeup: WakeupPipe
    private let state = Mutex(RunState())

    private struct RunState {
        var stopRequested = false
        var stopped = false
    }

    private let stoppedCondition = ConditionLock()

    /// Starts a handler on `context`.
    /// - Parameters:
    ///   - context: The context whose CURVE servers it authenticates.
    ///   - allowlist: Client public keys (40-character Z85) mapped to the identity to report as `User-Id`.
    ///   - admit: Asked about every allow-listed key before it is admitted, on the handler's thread: false refuses the
    ///     handshake for now (``Decision/Result/refusedBusy``). Must not block.
    ///   - observer: Called with every decision on the handler's thread, after it is made; keep it short.
    /// - Throws: `ZeroMQError`; `addressInUse` if another handler already runs on the context.
    public init(
        context: ZeroMQContext, allowlist: [String: String],
        admit: (@Sendable (_ publicKeyZ85: String, _ identity: String) -> Bool)? = nil,
        observer: (@Sendable (Decision) -> Void)? = nil
    ) throws(ZeroMQError) {
        self.allowlist = Mutex(allowlist)
        self.admit = admit
        self.observer = observer
        self.wakeup = try WakeupPipe()
        let socket = try context.socket(.rep)
        do {
            try socket.set(.linger, .zero)
            try socket.bind(Self.endpoint)
        } catch {
            try? socket.close(linger: .zero)
            throw error
        }
        startThread("zmq-zap") { [self] in
            serve(socket)
        }
    }

    /// Replaces the whole allowlist.
    /// - Parameter allowlist: Client public keys (Z85) mapped to identities.
    public func replaceAllowlist(_ allowlist: [String: String]) {
        self.allowlist.withLock { $0 = allowlist }
    }

    /// Admits a client key from now on.
    /// - Parameters:
    ///   - publicKeyZ85: The client's public key, 40 characters of Z85.
    ///   - identity: What to report as the client's `User-Id`, e.g. the device id.
    public func allow(publicKeyZ85: String, identity: String) {
        allowlist.withLock { $0[publicKeyZ85] = identity }
    }

    /// Refuses a client key from now on (existing connections stay up).
    /// - Parameter publicKeyZ85: The client's public key, 40 characters of Z85.
    public func revoke(publicKeyZ85: String) {
        _ = allowlist.withLock { $0.removeValue(forKey: publicKeyZ85) }
    }

    /// Stops answering and unbinds, waiting for the handler thread to finish. Idempotent.
    ///
    /// Blocks briefly; afterwards CURVE servers on the context fail every handshake until a new handler starts.
    public func stop() {
        state.withLock { $0.stopRequested = true }
        wakeup.signal()
        stoppedCondition.lock()
        while !state.withLock({ $0.stopped }) { stoppedCondition.wait() }
        stoppedCondition.unlock()
    }

    private func serve(_ socket: Socket) {
        defer {
            try? socket.close(linger: .zero)
            stoppedCondition.lock()
            state.withLock { $0.stopped = true }
            stoppedCondition.broadcast()
            stoppedCondition.unlock()
        }
        guard let handle = socket.handle else { return }
        while !state.withLock({ $0.stopRequested }) {
            var items = [
                zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0),
                zmq_pollitem_t(socket: nil, fd: wakeup.readDescriptor, events: Int16(ZMQ_POLLIN), revents: 0),
            ]
            // ETERM (context shutdown) or any other failure ends the handler.
            guard (try? zmqCall("poll ZAP handler", { zmq_poll(&items, 2, -1) })) != nil else { return }
            if items[1].revents != 0 { wakeup.drain() }
            guard items[0].revents != 0 else { continue }
            guard let request = try? socket.receiveMultipart(options: .dontWait) else { continue }
            let (reply, decision) = self.reply(to: request)
            observer?(decision)
            guard (try? socket.send(reply)) != nil else { return }
        }
    }

    /// Builds the RFC 27 reply (version, request id, status code, status text, user id, metadata) and says what it
    /// decided.
    private func reply(to request: [Data]) -> ([Data], Decision) {
        let version = Data("1.0".utf8)
        let address = request.count > 3 ? String(decoding: request[3], as: UTF8.self) : ""
        let mechanism = request.count > 5 ? String(decoding: request[5], as: UTF8.self) : ""
        func decision(_ result: Decision.Result, key: String? = nil, identity: String? = nil) -> Decision {
            Decision(result: result, publicKeyZ85: key, address: address, mechanism: mechanism, identity: identity)
        }
        guard request.count >= 6, request[0] == version else {
            let requestID = request.count > 1 ? request[1] : Data()
            return (
                [version, requestID, Data("500".utf8), Data("malformed ZAP request".utf8), Data(), Data()],
                decision(.malformed)
            )
        }
        let requestID = request[1]
        guard mechanism == "CURVE", request.count == 7, request[6].count == 32,
            let key = try? Z85.encode(request[6])
        else {
            return (
                [version, requestID, Data("400".utf8), Data("only CURVE clients are admitted".utf8), Data(), Data()],
                decision(.refusedMechanism)
            )
        }
        guard let identity = allowlist.withLock({ $0[key] }) else {
            return (
                [version, requestID, Data("400".utf8), Data("unknown client key".utf8), Data(), Data()],
                decision(.refusedKey, key: key)
            )
        }
        if let admit, !admit(key, identity) {
            return (
                [version, requestID, Data("300".utf8), Data("too many connections for this key".utf8), Data(), Data()],
                decision(.refusedBusy, key: key, identity: identity)
            )
        }
        return (
            [version, requestID, Data("200".utf8), Data("OK".utf8), Data(identity.utf8), Self.metadata(key: key)],
            decision(.accepted, key: key, identity: identity)
        )
    }

    /// ZMTP metadata with one property: name length (1 byte), name, value length (4 bytes, big-endian), value.
    static func metadata(key: String) -> Data {
        let name = Data(publicKeyProperty.utf8)
        let value = Data(key.utf8)
        var frame = Data([UInt8(name.count)])
        frame.append(name)
        withUnsafeBytes(of: UInt32(value.count).bigEndian) { frame.append(contentsOf: $0) }
        frame.append(value)
        return frame
    }
}
