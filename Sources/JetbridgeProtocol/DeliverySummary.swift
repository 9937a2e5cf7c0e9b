public import Foundation
public import JetbridgeModel

/// What one device holds acknowledged for one flight, as a count and an order-independent digest
/// (docs/PROTOCOL.md, "Proof of delivery"). The device computes it over the records the ground acknowledged; the
/// ground computes it over the rows it stores for that device and flight; equal summaries mean the ground holds
/// everything the device delivered.
///
/// An element is an order's (id, revision) — its highest revision stored — or a scan's id. Its hash is
/// `fmix64(FNV-1a-64(key))`, where the key is the ASCII text `o:<ID>:<revision>` or `s:<ID>` (the id as upper-case
/// canonical UUID text, the revision in decimal without leading zeros); the digest is the sum of the elements' hashes
/// modulo 2⁶⁴, so the order in which elements are added does not matter.
public struct DeliverySummary: Hashable, Sendable {
    /// Elements added.
    public private(set) var count: Int
    /// The sum of the elements' hashes, modulo 2⁶⁴.
    public private(set) var digest: UInt64

    public init(count: Int = 0, digest: UInt64 = 0) {
        self.count = count
        self.digest = digest
    }

    /// Adds an order at its highest revision.
    public mutating func add(order id: UUID, revision: Int) {
        add(key: "o:\(id.uuidString.uppercased()):\(revision)")
    }

    /// Adds a scan.
    public mutating func add(scan id: UUID) {
        add(key: "s:\(id.uuidString.uppercased())")
    }

    /// Adds a record as the ground stores it: an order by its (id, revision), a scan by its id.
    public mutating func add(_ record: Record) {
        switch record {
        case .order(let order): add(order: order.id, revision: order.revision)
        case .scan(let scan): add(scan: scan.id)
        }
    }

    /// Adds every element of `other` (a summary of records not among these): the digest is a sum, so summaries of
    /// disjoint sets add up.
    public mutating func merge(_ other: DeliverySummary) {
        count += other.count
        digest &+= other.digest
    }

    private mutating func add(key: String) {
        count += 1
        digest &+= Self.hash(Array(key.utf8))
    }

    /// The hash of one element's key: FNV-1a 64 (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`), then
    /// the MurmurHash3 finaliser `fmix64` so that every bit of the key moves every bit of the sum.
    public static func hash(_ key: [UInt8]) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key {
            h ^= UInt64(byte)
            h &*= 0x0000_0100_0000_01b3
        }
        h ^= h >> 33
        h &*= 0xff51_afd7_ed55_8ccd
        h ^= h >> 33
        h &*= 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        return h
    }

    /// The digest as it goes on the wire: 8 bytes, most significant first.
    public var digestBytes: Data {
        withUnsafeBytes(of: digest.bigEndian) { Data($0) }
    }

    /// A digest read from its 8 wire bytes (most significant first), or nil when there are not exactly 8.
    public static func digest(from bytes: Data) -> UInt64? {
        guard bytes.count == 8 else { return nil }
        return bytes.reduce(0) { ($0 << 8) | UInt64($1) }
    }

    /// The digest as 16 lower-case hex digits, for logs and `status`.
    public var digestHex: String {
        let text = String(digest, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
