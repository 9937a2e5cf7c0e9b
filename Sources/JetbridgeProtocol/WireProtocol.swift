#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The constants of the Jetbridge wire protocol, version 1 (docs/PROTOCOL.md).
public enum WireProtocol: Sendable {
    /// The protocol version this build speaks, written as `v` in every header, hello and ack.
    public static let version = 1
    /// The versions this build accepts from a peer.
    public static let supportedVersions = [1]
    /// The most records one batch may carry.
    public static let maxBatchRecords = 10_000
    /// The largest frame 2 (the records array) one batch may carry, in bytes.
    public static let maxBatchBytes = 8 << 20
    /// The most record bytes one batch may carry: frame 2 less its array header (3 bytes for up to 10,000 records).
    public static let maxBatchRecordBytes = maxBatchBytes - 3
    /// The most record bytes a device reads from its queue for one batch, given its `sync.batchBytes` (at most
    /// ``maxBatchBytes``): that, but never more than ``maxBatchRecordBytes``, so that frame 2 (the records behind their
    /// array's header) never exceeds ``maxBatchBytes``. The sync loop reads with it.
    public static func batchRecordBytes(upTo batchBytes: Int) -> Int { min(batchBytes, maxBatchRecordBytes) }
    /// The largest message a device accepts from the ground (`ZMQ_MAXMSGSIZE` on its sockets): an ack is one small
    /// frame, far below this.
    public static let maxAckMessageBytes = 64 << 10
    /// The most entries of one map the ground reads, in a record, a batch header or a message on the ack channel (a
    /// record's map has 9, a header's 6): past it the map is refused whole, unread. Unknown keys are skipped, but
    /// millions of them cost the reader far more memory than their bytes (docs/PROTOCOL.md).
    public static let maxMapEntries = 64
    /// The nesting limit for decoding records from the wire: a record nests four levels deep, so 32 is generous.
    public static let recordNestingLimit = 32
    /// Where an aggregator's data (`PULL`) socket binds and a device sends, when neither is configured.
    public static let defaultDataEndpoint = "tcp://127.0.0.1:5560"
    /// Where an aggregator's ack (`ROUTER`) socket binds and a device connects, when neither is configured.
    public static let defaultAcksEndpoint = "tcp://127.0.0.1:5561"
}

extension WireProtocol {
    /// The longest `ipc://` path, in bytes: a Unix socket address's `sun_path` (108 bytes on Linux) less its
    /// terminating zero; an abstract socket's leading `@` counts.
    public static let maxIPCPathBytes = 107

    /// What is wrong with a ZeroMQ endpoint as the tools accept it (`tcp://HOST:PORT`, `ipc://PATH`,
    /// `inproc://NAME`), or `nil` when it is well formed. Both tools check endpoints with this before any socket
    /// exists, so that a malformed one is a usage error (64) on the command line and bad data (65) in a
    /// configuration file in both.
    public static func endpointProblem(_ endpoint: String) -> String? {
        let example = "such as tcp://127.0.0.1:5560"
        guard let range = endpoint.firstRange(of: "://") else {
            return "'\(endpoint)' is not an endpoint \(example) (transport://address)"
        }
        let transport = endpoint[..<range.lowerBound]
        let address = endpoint[range.upperBound...]
        guard ["tcp", "ipc", "inproc"].contains(transport) else {
            return "'\(endpoint)' uses transport '\(transport)'; use tcp://, ipc:// or inproc://, \(example)"
        }
        guard !address.isEmpty, !address.contains(where: { $0.isWhitespace }) else {
            return "'\(endpoint)' has no address after \(transport)://, \(example)"
        }
        // A Unix socket's path holds at most 107 bytes (`sun_path`); libzmq refuses a longer one only at bind or
        // connect, as an I/O error.
        if transport == "ipc", address.utf8.count > maxIPCPathBytes {
            return "'\(endpoint)' has a path of \(address.utf8.count) bytes; an ipc:// path is at most \(maxIPCPathBytes) bytes"
        }
        if transport == "tcp" {
            guard let colon = address.lastIndex(of: ":"),
                address[address.index(after: colon)...] == "*"
                    || UInt16(address[address.index(after: colon)...]).map({ $0 > 0 }) == true
            else {
                return "'\(endpoint)' needs a port 1–65535 (or *) after the host, \(example)"
            }
        }
        return nil
    }
}
