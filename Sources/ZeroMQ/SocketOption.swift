internal import CZeroMQ
import SystemSupport

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// A typed socket option: which libzmq option it is and how its Swift value maps to the C value.
///
/// Use with `Socket.set(_:_:)` and `Socket.get(_:)`: `try socket.set(.linger, .seconds(5))`.
/// Durations are converted to whole milliseconds (libzmq's unit), rounding down; `nil` means "infinite" where the
/// option allows it.
public struct SocketOption<Value>: Sendable {
    let code: Int32
    let name: String
    let encode: @Sendable (Value) -> RawOptionValue
    let decode: @Sendable (RawOptionValue) -> Value
    let rawKind: RawOptionValue.Kind
}

/// A C-level option value.
enum RawOptionValue {
    case int32(Int32)
    case int64(Int64)
    case bytes(Data)

    enum Kind { case int32, int64, bytes }

    var int32: Int32 {
        if case .int32(let value) = self { return value }
        return 0
    }
    var int64: Int64 {
        if case .int64(let value) = self { return value }
        return 0
    }
    var bytes: Data {
        if case .bytes(let value) = self { return value }
        return Data()
    }
}

extension SocketOption {
    static func int(_ code: Int32, _ name: String) -> SocketOption<Int> {
        SocketOption<Int>(
            code: code, name: name, encode: { .int32(Int32(clamping: $0)) }, decode: { Int($0.int32) },
            rawKind: .int32)
    }

    static func bool(_ code: Int32, _ name: String) -> SocketOption<Bool> {
        SocketOption<Bool>(
            code: code, name: name, encode: { .int32($0 ? 1 : 0) }, decode: { $0.int32 != 0 }, rawKind: .int32)
    }

    static func duration(_ code: Int32, _ name: String) -> SocketOption<Duration> {
        SocketOption<Duration>(
            code: code, name: name, encode: { .int32($0.clampedMilliseconds) },
            decode: { .milliseconds($0.int32) }, rawKind: .int32)
    }

    /// A whole-seconds option (the TCP keepalive timers).
    static func seconds(_ code: Int32, _ name: String) -> SocketOption<Duration> {
        SocketOption<Duration>(
            code: code, name: name, encode: { .int32(Int32(clamping: max(1, Int(($0 / .seconds(1)).rounded())))) },
            decode: { .seconds($0.int32) }, rawKind: .int32)
    }

    /// A millisecond option where libzmq's `-1` means infinite; surfaced as `nil`.
    static func optionalDuration(_ code: Int32, _ name: String) -> SocketOption<Duration?> {
        SocketOption<Duration?>(
            code: code, name: name, encode: { .int32($0.map { max(0, $0.clampedMilliseconds) } ?? -1) },
            decode: { $0.int32 < 0 ? nil : .milliseconds($0.int32) }, rawKind: .int32)
    }

    static func bytes(_ code: Int32, _ name: String) -> SocketOption<Data> {
        SocketOption<Data>(code: code, name: name, encode: { .bytes($0) }, decode: { $0.bytes }, rawKind: .bytes)
    }
}

extension SocketOption where Value == Int {
    /// `ZMQ_SNDHWM`: how many outgoing messages may queue per peer before sends block or say "try again"
    /// (0: unlimited; libzmq's default is 1000).
    public static var sendHighWaterMark: Self { int(ZMQ_SNDHWM, "send high-water mark") }
    /// `ZMQ_RCVHWM`: how many incoming messages may queue per peer (0: unlimited; default 1000).
    public static var receiveHighWaterMark: Self { int(ZMQ_RCVHWM, "receive high-water mark") }
    /// `ZMQ_RCVBUF`: the kernel's receive buffer for the socket's connections, in bytes (-1: the system's default).
    public static var receiveBuffer: Self { int(ZMQ_RCVBUF, "receive buffer") }
    /// `ZMQ_SNDBUF`: the kernel's send buffer for the socket's connections, in bytes (-1: the system's default,
    /// which grows with the connection up to `net.ipv4.tcp_wmem`'s maximum).
    public static var sendBuffer: Self { int(ZMQ_SNDBUF, "send buffer") }
    /// `ZMQ_TCP_KEEPALIVE_CNT`: unanswered keepalive probes before the kernel drops a TCP connection (-1: the
    /// system's default).
    public static var tcpKeepaliveCount: Self { int(ZMQ_TCP_KEEPALIVE_CNT, "TCP keepalive count") }
}

extension SocketOption where Value == Int? {
    /// `ZMQ_MAXMSGSIZE`: the largest message a peer may send, in bytes; bigger ones drop the connection.
    /// `nil`: no limit (the default).
    public static var maxMessageSize: Self {
        SocketOption<Int?>(
            code: ZMQ_MAXMSGSIZE, name: "max message size", encode: { .int64(Int64($0 ?? -1)) },
            decode: { $0.int64 < 0 ? nil : Int($0.int64) }, rawKind: .int64)
    }
}

extension SocketOption where Value == Bool {
    /// `ZMQ_IMMEDIATE`: queue messages only to completed connections. Beware: on reconnect libzmq discards what
    /// was queued for the old connection.
    public static var immediate: Self { bool(ZMQ_IMMEDIATE, "immediate") }
    /// `ZMQ_ROUTER_MANDATORY`: a ROUTER send to an unknown routing id fails with `hostUnreachable` instead of being
    /// dropped silently. Write-only in libzmq.
    public static var routerMandatory: Self { bool(ZMQ_ROUTER_MANDATORY, "router mandatory") }
    /// `ZMQ_ROUTER_HANDOVER`: a new connection that presents a routing id already in use takes it over, instead of
    /// being ignored (a restarted peer keeps its address). Write-only in libzmq.
    public static var routerHandover: Self { bool(ZMQ_ROUTER_HANDOVER, "router handover") }
    /// `ZMQ_CURVE_SERVER`: act as a CURVE server (needs `curveSecretKey`; pair it with a `ZAPHandler`).
    public static var curveServer: Self { bool(ZMQ_CURVE_SERVER, "curve server") }
    /// `ZMQ_TCP_KEEPALIVE`: TCP keepalive probes on the socket's connections (`SO_KEEPALIVE`), so that a peer that
    /// vanished without a FIN is noticed by the kernel.
    public static var tcpKeepalive: Self { bool(ZMQ_TCP_KEEPALIVE, "TCP keepalive") }
    /// `ZMQ_RCVMORE`: whether the last received frame has more frames after it. Read-only.
    public static var receiveMore: Self { bool(ZMQ_RCVMORE, "receive more") }
}

extension SocketOption where Value == Duration {
    /// `ZMQ_HEARTBEAT_IVL`: how often to send ZMTP heartbeats (zero: off, the default).
    public static var heartbeatInterval: Self { duration(ZMQ_HEARTBEAT_IVL, "heartbeat interval") }
    /// `ZMQ_HEARTBEAT_TIMEOUT`: how long to wait for any traffic after a heartbeat before closing the connection.
    public static var heartbeatTimeout: Self { duration(ZMQ_HEARTBEAT_TIMEOUT, "heartbeat timeout") }
    /// `ZMQ_HEARTBEAT_TTL`: how long the peer should wait for our traffic before closing (libzmq rounds to 100 ms).
    public static var heartbeatTTL: Self { duration(ZMQ_HEARTBEAT_TTL, "heartbeat TTL") }
    /// `ZMQ_HANDSHAKE_IVL`: how long an accepted connection has to finish its ZMTP handshake (default 30 s; zero: no
    /// limit).
    public static var handshakeInterval: Self { duration(ZMQ_HANDSHAKE_IVL, "handshake interval") }
    /// `ZMQ_RECONNECT_IVL`: the first wait before reconnecting (default 100 ms).
    public static var reconnectInterval: Self { duration(ZMQ_RECONNECT_IVL, "reconnect interval") }
    /// `ZMQ_RECONNECT_IVL_MAX`: the cap of the exponential reconnect backoff (zero: no backoff, the default).
    public static var reconnectIntervalMax: Self { duration(ZMQ_RECONNECT_IVL_MAX, "reconnect interval max") }
    /// `ZMQ_CONNECT_TIMEOUT`: give up a TCP connect attempt after this long (zero: the OS default).
    public static var connectTimeout: Self { duration(ZMQ_CONNECT_TIMEOUT, "connect timeout") }
    /// `ZMQ_TCP_MAXRT`: how long sent data may stay unacknowledged by the peer before the kernel drops the
    /// connection (`TCP_USER_TIMEOUT` on Linux; zero: the system's retransmission limit, about 15 minutes).
    public static var tcpMaxRetransmitTimeout: Self { duration(ZMQ_TCP_MAXRT, "TCP maximum retransmit timeout") }
    /// `ZMQ_TCP_KEEPALIVE_IDLE`: idle time before the first keepalive probe, whole seconds.
    public static var tcpKeepaliveIdle: Self { seconds(ZMQ_TCP_KEEPALIVE_IDLE, "TCP keepalive idle") }
    /// `ZMQ_TCP_KEEPALIVE_INTVL`: time between keepalive probes, whole seconds.
    public static var tcpKeepaliveInterval: Self { seconds(ZMQ_TCP_KEEPALIVE_INTVL, "TCP keepalive interval") }
}

extension SocketOption where Value == Duration? {
    /// `ZMQ_LINGER`: how long queued messages may still be delivered after `close` (`nil`: forever, libzmq's
    /// default, which can hang context termination; `.zero`: drop them).
    public static var linger: Self { optionalDuration(ZMQ_LINGER, "linger") }
    /// `ZMQ_SNDTIMEO`: how long a blocking send waits before "try again" (`nil`: forever, the default).
    public static var sendTimeout: Self { optionalDuration(ZMQ_SNDTIMEO, "send timeout") }
    /// `ZMQ_RCVTIMEO`: how long a blocking receive waits before "try again" (`nil`: forever, the default).
    public static var receiveTimeout: Self { optionalDuration(ZMQ_RCVTIMEO, "receive timeout") }
}

extension SocketOption where Value == Data {
    /// `ZMQ_ROUTING_ID`: this socket's routing id as seen by a ROUTER peer (1–255 bytes, not starting with 0).
    public static var routingID: Self { bytes(ZMQ_ROUTING_ID, "routing id") }
    /// `ZMQ_SUBSCRIBE`: add a topic prefix on a SUB socket (write-only; see `Socket.subscribe`).
    public static var subscribe: Self { bytes(ZMQ_SUBSCRIBE, "subscribe") }
    /// `ZMQ_UNSUBSCRIBE`: remove a topic prefix on a SUB socket (write-only).
    public static var unsubscribe: Self { bytes(ZMQ_UNSUBSCRIBE, "unsubscribe") }
    /// `ZMQ_CURVE_PUBLICKEY`: this socket's long-term public key, 32 bytes (see `CurveKeyPair`).
    public static var curvePublicKey: Self { bytes(ZMQ_CURVE_PUBLICKEY, "curve public key") }
    /// `ZMQ_CURVE_SECRETKEY`: this socket's long-term secret key, 32 bytes.
    public static var curveSecretKey: Self { bytes(ZMQ_CURVE_SECRETKEY, "curve secret key") }
    /// `ZMQ_CURVE_SERVERKEY`: on a client, the server's public key, 32 bytes; makes the socket a CURVE client.
    public static var curveServerKey: Self { bytes(ZMQ_CURVE_SERVERKEY, "curve server key") }
}

extension SocketOption where Value == String {
    /// `ZMQ_ZAP_DOMAIN`: the ZAP domain sent to the handler; also makes libzmq consult ZAP for NULL mechanism.
    public static var zapDomain: Self {
        SocketOption<String>(
            code: ZMQ_ZAP_DOMAIN, name: "zap domain", encode: { .bytes(Data($0.utf8)) },
            decode: { String(decoding: $0.bytes.prefix { $0 != 0 }, as: UTF8.self) }, rawKind: .bytes)
    }
}

extension Socket {
    /// Sets a socket option.
    /// - Parameters:
    ///   - option: Which option, e.g. `.sendHighWaterMark`.
    ///   - value: The value, e.g. `1000`.
    /// - Throws: `ZeroMQError`, `invalidArgument` for a value libzmq rejects.
    public func set<Value>(_ option: SocketOption<Value>, _ value: Value) throws(ZeroMQError) {
        let operation = "set \(option.name)"
        let handle = try liveHandle(operation)
        switch option.encode(value) {
        case .int32(var raw):
            try zmqCall(operation) { zmq_setsockopt(handle, option.code, &raw, MemoryLayout<Int32>.size) }
        case .int64(var raw):
            try zmqCall(operation) { zmq_setsockopt(handle, option.code, &raw, MemoryLayout<Int64>.size) }
        case .bytes(let raw):
            try zmqCall(operation) {
                raw.withUnsafeBytes { zmq_setsockopt(handle, option.code, $0.baseAddress, $0.count) }
            }
        }
    }

    /// Reads a socket option.
    /// - Parameter option: Which option, e.g. `.linger`.
    /// - Returns: Its current value.
    /// - Throws: `ZeroMQError`, `invalidArgument` for write-only options.
    public func get<Value>(_ option: SocketOption<Value>) throws(ZeroMQError) -> Value {
        let operation = "get \(option.name)"
        let handle = try liveHandle(operation)
        switch option.rawKind {
        case .int32:
            var raw: Int32 = 0
            var size = MemoryLayout<Int32>.size
            try zmqCall(operation) { zmq_getsockopt(handle, option.code, &raw, &size) }
            return option.decode(.int32(raw))
        case .int64:
            var raw: Int64 = 0
            var size = MemoryLayout<Int64>.size
            try zmqCall(operation) { zmq_getsockopt(handle, option.code, &raw, &size) }
            return option.decode(.int64(raw))
        case .bytes:
            return option.decode(.bytes(try getBytes(option.code, name: option.name)))
        }
    }

    func getBytes(_ code: Int32, name: String) throws(ZeroMQError) -> Data {
        let handle = try liveHandle("get \(name)")
        // CURVE keys come back in binary form only when the buffer is exactly 32 bytes; larger buffers get Z85.
        let isKey = code == ZMQ_CURVE_PUBLICKEY || code == ZMQ_CURVE_SECRETKEY || code == ZMQ_CURVE_SERVERKEY
        var buffer = [UInt8](repeating: 0, count: isKey ? 32 : 1024)
        var size = buffer.count
        try zmqCall("get \(name)") { zmq_getsockopt(handle, code, &buffer, &size) }
        return Data(buffer[0..<size])
    }

    func getString(_ code: Int32, name: String) throws(ZeroMQError) -> String {
        let bytes = try getBytes(code, name: name)
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}
