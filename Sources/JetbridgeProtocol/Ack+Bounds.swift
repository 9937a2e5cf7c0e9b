/// The bounds of an ack's numbers (docs/PROTOCOL.md, "Bounds of an ack"): a device checks an ack against them before
/// it acts on it, so that no value from the ground reaches arithmetic, a conversion or a statistic unchecked. An ack
/// outside them is ignored as if it had not come (the batch goes again on its timeout).
extension Ack {
    /// The longest wait a `limited` ack may ask for, in seconds: an hour. The reference ground asks for at most 300 s
    /// (a device at a flight's limit, until the operator raises it).
    public static let maxRetryAfter = 3600.0
    /// Most Unicode scalars of `reason` a device shows or keeps; the rest is cut off. Scalars rather than characters,
    /// so one "character" of 100,000 combining marks cannot pass as short.
    public static let maxReasonScalars = 500
    /// Most versions `supported` may list.
    public static let maxSupportedVersions = 16

    /// What makes this ack impossible, in words, or `nil` when every number in it is within its bounds:
    ///
    /// 1. `retryAfter`, when present (in any status): a finite number of seconds, 0 … ``maxRetryAfter``.
    /// 2. `new` and `duplicates`, when present: 0 … the batch's record count (without a batch, 0 …
    ///    ``WireProtocol/maxBatchRecords``).
    /// 3. `index`, when present: −1 … count − 1.
    /// 4. `supported`: at most ``maxSupportedVersions`` versions.
    /// 5. `stored` with a batch: `new + duplicates` is the count (a missing one is the count minus the other; both
    ///    missing: all new).
    ///
    /// Every comparison is made before any arithmetic, and the only sum is of two values already within 0 … count, so
    /// nothing here can overflow.
    /// - Parameter records: The record count of the batch the ack names; `nil` checks what needs no batch.
    /// - Returns: The first bound broken, such as `retryAfter inf is not 0…3600 seconds` or `new 4 is not 0…3: the
    ///   batch has 3 records`.
    public func boundsProblem(batchRecords records: Int?) -> String? {
        if let retryAfter, !(retryAfter.isFinite && retryAfter >= 0 && retryAfter <= Self.maxRetryAfter) {
            return "retryAfter \(retryAfter) is not 0…\(Int(Self.maxRetryAfter)) seconds"
        }
        let count = records ?? WireProtocol.maxBatchRecords
        let why = records == nil ? "a batch holds at most \(count) records" : "the batch has \(count) records"
        for (key, value) in [("new", new), ("duplicates", duplicates)] {
            if let value, value < 0 || value > count { return "\(key) \(value) is not 0…\(count): \(why)" }
        }
        if let index, index < -1 || index >= count { return "index \(index) is not −1…\(count - 1): \(why)" }
        if let supported, supported.count > Self.maxSupportedVersions {
            return "supported lists \(supported.count) versions; at most \(Self.maxSupportedVersions)"
        }
        if status == .stored, let records {
            let stored = storedCounts(records: records)
            if stored.new + stored.duplicates != records {
                return "new \(stored.new) + duplicates \(stored.duplicates) is not the batch's \(records) records"
            }
        }
        return nil
    }

    /// `new` and `duplicates` of a `stored` ack for a batch of `records` records, a missing one as the count minus
    /// the other (both missing: all new). Only for an ack whose ``boundsProblem(batchRecords:)`` with the same count
    /// passed the ranges of `new` and `duplicates`, which keeps the subtraction in 0 … count.
    public func storedCounts(records: Int) -> (new: Int, duplicates: Int) {
        switch (new, duplicates) {
        case (let new?, let duplicates?): (new, duplicates)
        case (let new?, nil): (new, records - new)
        case (nil, let duplicates?): (records - duplicates, duplicates)
        case (nil, nil): (records, 0)
        }
    }

    /// `reason` for people: its first ``maxReasonScalars`` Unicode scalars (with `…` when cut), or "no reason given".
    /// Logs escape what is not inert text in it, as in all device text.
    public var shownReason: String {
        guard let reason else { return "no reason given" }
        return Self.bounded(reason, scalars: Self.maxReasonScalars)
    }

    /// `text` cut to its first `scalars` Unicode scalars, with `…` when cut: how a device shows text from the ground
    /// (a reason, a device id it does not know).
    public static func bounded(_ text: String, scalars: Int) -> String {
        var end = text.unicodeScalars.startIndex
        for _ in 0..<max(0, scalars) {
            guard end < text.unicodeScalars.endIndex else { return text }
            end = text.unicodeScalars.index(after: end)
        }
        guard end < text.unicodeScalars.endIndex else { return text }
        return String(text.unicodeScalars[..<end]) + "…"
    }
}
