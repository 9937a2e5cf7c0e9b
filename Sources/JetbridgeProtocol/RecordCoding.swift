public import JetbridgeModel
internal import MessagePack

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

/// The one codec for records, as the queue, the wire, the order ledger and the store hold them (docs/PROTOCOL.md,
/// "Records"): capture encodes with it, the order ledger reads its files with it, and the store decodes stored bytes
/// with it for receipts and reports. The agent and the aggregator do not import MessagePack.
///
/// Encoding is the Codable `MessagePackEncoder` (maps with string keys in declaration order, dates as the timestamp
/// extension, UUIDs as canonical text). Decoding is ``RecordDecoder``, the hand-written decoder the ground checks
/// batches with (about ten times cheaper than Codable); it accepts exactly what Codable accepts, with errors that
/// name the field and the byte offset. It does not run ``Record/validate()``: a caller that takes records from
/// outside validates them, as `IncomingBatch.decode` does.
public enum RecordCoding: Sendable {
    /// Encodes a record.
    /// - Throws: `EncodingError` (none is expected for a record built by the model's initialisers).
    public static func encode(_ record: Record) throws -> Data {
        switch record {
        case .order(let order): try encode(order)
        case .scan(let scan): try encode(scan)
        }
    }

    /// Encodes an order as the record it is (the same bytes as `encode(.order(order))`).
    public static func encode(_ order: Order) throws -> Data {
        try MessagePackEncoder().encode(order)
    }

    /// Encodes a scan as the record it is (the same bytes as `encode(.scan(scan))`).
    public static func encode(_ scan: Scan) throws -> Data {
        try MessagePackEncoder().encode(scan)
    }

    /// Decodes one record from exactly its bytes.
    /// - Throws: `DecodingError` with the coding path and the byte offset (from the start of `bytes`); a broken
    ///   rule inside a typed field carries a ``ValidationError``, which `ValidationError(error)` recovers.
    public static func decode(_ bytes: some ContiguousBytes) throws -> Record {
        try RecordDecoder().decode(from: bytes)
    }

    /// Decodes stored records one after the other, as a store reads a flight's orders: what consecutive records share
    /// (their flight id) is checked once, not once per record. Measured on a 9.9-million-record store (debug build),
    /// checking each order's flight id again took 40 % of decoding a flight's orders (`console-benchmark`). Each
    /// record decodes to the value, and fails with the error, that ``RecordCoding/decode(_:)`` gives it.
    public struct Stream: Sendable {
        private var cache = RecordDecoder.Cache()
        /// Made once: its default nesting limit is a global, read through a lazy initialiser's check.
        private let decoder = RecordDecoder()

        public init() {}

        /// Decodes the next record from exactly its bytes.
        /// - Throws: `DecodingError` as ``RecordCoding/decode(_:)``.
        public mutating func decode(_ bytes: some ContiguousBytes) throws -> Record {
            try decoder.decode(from: bytes, cache: &cache)
        }

        /// Reads the next record's identity (``RecordIdentity``) from exactly its bytes, without decoding the rest:
        /// for bytes that decoded whole once already. For such bytes it equals the decoded record's.
        /// - Throws: `DecodingError` when the map or an identifying field is malformed (other fields are not checked).
        public mutating func identity(_ bytes: some ContiguousBytes) throws -> RecordIdentity {
            try decoder.identity(from: bytes, cache: &cache)
        }
    }

    /// Decodes one order record from exactly its bytes, as the order ledger stores it.
    /// - Throws: `DecodingError` as ``decode(_:)``, also when the bytes are a scan record.
    public static func decodeOrder(_ bytes: some ContiguousBytes) throws -> Order {
        switch try decode(bytes) {
        case .order(let order): return order
        case .scan:
            let path = [Field.type.key]
            throw RecordDecoder().invalid(
                ValidationError(.invalidRecordType, "record type is 'scan' where 'order' was expected"), path)
        }
    }
}

/// What identifies a record: its kind, id, revision and flight (``RecordCoding/Stream/identity(_:)``), as a proof of
/// delivery's summary counts it (docs/PROTOCOL.md, "Proof of delivery").
public struct RecordIdentity: Hashable, Sendable {
    public var isOrder: Bool
    public var id: UUID
    /// An order's revision; 1 for a scan (scans are never revised).
    public var revision: Int
    public var flight: FlightID

    public init(isOrder: Bool, id: UUID, revision: Int, flight: FlightID) {
        self.isOrder = isOrder
        self.id = id
        self.revision = revision
        self.flight = flight
    }

    /// A decoded record's identity.
    public init(_ record: Record) {
        switch record {
        case .order(let order): self.init(isOrder: true, id: order.id, revision: order.revision, flight: order.flight)
        case .scan(let scan): self.init(isOrder: false, id: scan.id, revision: 1, flight: scan.flight)
        }
    }
}
