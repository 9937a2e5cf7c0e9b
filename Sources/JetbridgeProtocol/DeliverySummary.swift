public import JetbridgeModel

#if canImport(FoundationEssentials)
    public import FoundationEssentials
#else
    public import Foundation
#endif

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
        add(hash: Self.hash(order: id, revision: revision))
    }

    /// The element hash of an order at `revision`: of the key `o:<ID>:<revision>`.
    public static func hash(order id: UUID, revision: Int) -> UInt64 {
        var hasher = KeyHasher()
        hasher.byte(UInt8(ascii: "o"))
        hasher.byte(UInt8(ascii: ":"))
        hasher.uuid(id)
        hasher.byte(UInt8(ascii: ":"))
        hasher.decimal(revision)
        return hasher.finish()
    }

    /// The element hash of a scan: of the key `s:<ID>`.
    public static func hash(scan id: UUID) -> UInt64 {
        var hasher = KeyHasher()
        hasher.byte(UInt8(ascii: "s"))
        hasher.byte(UInt8(ascii: ":"))
        hasher.uuid(id)
        return hasher.finish()
    }

    /// The element hash of a record as the ground stores it: an order by its (id, revision), a scan by its id.
    public static func hash(of record: Record) -> UInt64 {
        switch record {
        case .order(let order): hash(order: order.id, revision: order.revision)
        case .scan(let scan): hash(scan: scan.id)
        }
    }

    /// Takes out an order's revision added before (an order amended after its flight's records were released: the
    /// ground counts only its newest revision).
    public mutating func remove(order id: UUID, revision: Int) {
        var removed = DeliverySummary()
        removed.add(order: id, revision: revision)
        count -= 1
        digest &-= removed.digest
    }

    /// Adds a scan.
    public mutating func add(scan id: UUID) {
        add(hash: Self.hash(scan: id))
    }

    private mutating func add(hash: UInt64) {
        count += 1
        digest &+= hash
    }

    /// ``hash(_:)`` of a key fed byte by byte, without building the key's text: the store hashes every row it reads.
    struct KeyHasher {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325

        mutating func byte(_ byte: UInt8) {
            h ^= UInt64(byte)
            h &*= 0x0000_0100_0000_01b3
        }

        /// The canonical upper-case text of `id`: 8-4-4-4-12 hex digits joined by `-`.
        mutating func uuid(_ id: UUID) {
            let digits: StaticString = "0123456789ABCDEF"
            withUnsafeBytes(of: id.uuid) { bytes in
                digits.withUTF8Buffer { hex in
                    for index in 0..<16 {
                        if index == 4 || index == 6 || index == 8 || index == 10 { byte(UInt8(ascii: "-")) }
                        byte(hex[Int(bytes[index] >> 4)])
                        byte(hex[Int(bytes[index] & 0x0f)])
                    }
                }
            }
        }

        /// `value` in decimal without leading zeros (a revision is ≥ 1; a negative one gets its `-`).
        mutating func decimal(_ value: Int) {
            if value < 0 { byte(UInt8(ascii: "-")) }
            var magnitude = value.magnitude
            var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            var count = 0
            withUnsafeMutableBytes(of: &digits) { buffer in
                repeat {
                    buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                    magnitude /= 10
                    count += 1
                } while magnitude > 0
                for index in stride(from: count - 1, through: 0, by: -1) { byte(buffer[index]) }
            }
        }

        func finish() -> UInt64 { DeliverySummary.fmix64(h) }
    }

    /// Adds a record as the ground stores it: an order by its (id, revision), a scan by its id.
    public mutating func add(_ record: Record) {
        add(hash: Self.hash(of: record))
    }

    /// Adds every element of `other` (a summary of records not among these): the digest is a sum, so summaries of
    /// disjoint sets add up.
    public mutating func merge(_ other: DeliverySummary) {
        count += other.count
        digest &+= other.digest
    }

    /// The hash of one element's key: FNV-1a 64 (offset basis `0xcbf29ce484222325`, prime `0x100000001b3`), then
    /// the MurmurHash3 finaliser `fmix64` so that every bit of the key moves every bit of the sum.
    public static func hash(_ key: [UInt8]) -> UInt64 {
        var hasher = KeyHasher()
        for byte in key { hasher.byte(byte) }
        return hasher.finish()
    }

    /// The MurmurHash3 finaliser.
    static func fmix64(_ value: UInt64) -> UInt64 {
        var h = value
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
