import JetbridgeModel
import JetbridgeProtocol
import SystemSupport

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the ground acknowledged, kept on the device until the ground confirms its flight (docs/AGENT.md, "Proof of
/// delivery"): `<home>/delivered/<CARRIERNUMBER>_<DATE>.records`, one file per flight, and `confirmed.json`.
///
/// Sync appends each stored batch's records here (durably, before the queue is acknowledged past them), so that a
/// flight the ground no longer holds in full can be sent again after its queue segments are gone. A file is a run of
/// frames: a 4-byte length and the CRC-32C of the payload (both little-endian, as in the queue), then the record's
/// MessagePack bytes as the ground received them. A torn or damaged frame ends the file's reading (what followed it is
/// sent again only if it is still in the queue); a sync cuts a torn end off before it appends or confirms (``append(_:tails:held:)``,
/// ``sizeToConfirm(flight:wholeBytes:tails:)``).
struct DeliveryArchive {
    let directory: URL
    /// The sync command as the device's operator types it (with `--home` when not the default one).
    let syncCommand: String

    init(home: AgentHome) {
        directory = home.deliveredDirectory
        syncCommand = home.command("sync")
    }

    /// One flight's confirmation: the summary the ground confirmed, and when.
    struct Confirmation: Codable, Hashable, Sendable {
        var count: Int
        /// ``DeliverySummary/digestHex``.
        var digest: String
        var confirmedAt: Date
        /// The flight's file size when the ground confirmed it: while the file has this size, it holds nothing the
        /// ground has not confirmed (capture's check needs no decoding). Nil: not known.
        var bytes: Int64?
        /// Set when retention released the flight's records (after the confirmation).
        var releasedAt: Date?
        /// The summary of the records retention released (count and digest): later records of the flight are
        /// summarised on top of it, since the ground still holds these.
        var releasedCount: Int?
        var releasedDigest: String?
        /// The orders in the released summary, upper-case id → revision. An order amended after the release is held
        /// by the ground at its new revision only, so its released revision comes out of the released summary
        /// (``holdings()``); scans are never revised and are not listed.
        var releasedOrders: [String: Int]?
        /// A release begun and not finished (``applyRetention(_:now:)``): the marks it sets. Until it is done, the
        /// flight's file is still in place (the release had not started: it is undone) or renamed aside (it had:
        /// it is finished); ``confirmations()`` answers as if either had happened.
        var releasing: Release?

        /// What a release sets: the summary the ground confirmed, the orders it counts, and when.
        struct Release: Codable, Hashable, Sendable {
            var at: Date
            var count: Int
            var digest: String
            var orders: [String: Int]?
        }

        /// This confirmation with `releasing` finished (its records released) or undone.
        func settled(finished: Bool) -> Confirmation {
            var settled = self
            settled.releasing = nil
            guard finished, let release = releasing else { return settled }
            settled.releasedAt = release.at
            settled.releasedCount = release.count
            settled.releasedDigest = release.digest
            settled.releasedOrders = release.orders
            settled.bytes = 0
            return settled
        }

        var released: DeliverySummary? {
            guard let releasedCount, let releasedDigest, let digest = UInt64(releasedDigest, radix: 16) else {
                return nil
            }
            return DeliverySummary(count: releasedCount, digest: digest)
        }

        var summary: DeliverySummary? {
            UInt64(digest, radix: 16).map { DeliverySummary(count: count, digest: $0) }
        }
    }

    var confirmationsFile: URL { directory.appendingPathComponent("confirmed.json") }

    /// `/` becomes `_` by the standard library: Foundation's `replacingOccurrences` costs a short sync about a third
    /// of a millisecond the first time a process calls it.
    func file(for flight: String) -> URL {
        directory.appendingPathComponent(String(flight.map { $0 == "/" ? "_" : $0 }) + ".records")
    }

    /// Where a flight's file is while retention releases it (``applyRetention(_:now:)``).
    func asideFile(for flight: String) -> URL {
        file(for: flight).appendingPathExtension("releasing")
    }

    /// The flight a file name stands for, or nil for another file.
    static func flight(ofFile name: String) -> String? {
        guard name.hasSuffix(".records") else { return nil }
        return String(name.dropLast(8).map { $0 == "_" ? "/" : $0 })
    }

    /// Appends records the ground acknowledged stored, each to its flight's file, and makes them durable.
    ///
    /// Each record's flight comes from its identity (`RecordCoding.Stream.identity`), not a whole decode: these are
    /// this device's own records, encoded whole by capture, read back from the queue under its checksums, and decoded
    /// whole by the ground before it said `stored` (a batch is stored only when every record of it passed).
    ///
    /// The first append to a flight's file in a sync (`checked` does not hold the flight yet) first cuts a torn tail
    /// off the file (``cutTornTail(fd:flight:path:size:cutting:)``): a crash or power cut in the middle of an earlier append,
    /// before its `fsync`, can leave part of a frame at the end, and reading stops there, so every frame appended after
    /// it would be invisible and the flight could never be confirmed. The records of that torn write are still in the
    /// queue (it is acknowledged past them only once they are durable here) and come again.
    /// The torn tails cut are added to `tails.cut`, also when a later write of the same call fails, for the sync to
    /// log.
    /// - Parameter held: Records known to be in their flight's file already, by id: a payload equal to the one held
    ///   for its id is not written again. A sync passes the records it sent again after a `mismatch` (read from these
    ///   files): before, each resend appended the whole flight once more, so a flight the ground could never confirm
    ///   grew its file by every record three times a sync until capture stopped at the retention cap.
    /// - Returns: The flights whose files it appended to.
    /// - Throws: ``AgentError`` when a file cannot be written (a full disk: `tryAgain`).
    @discardableResult
    func append(_ payloads: [Data], tails: inout TailChecks, held: [UUID: Data] = [:]) throws(AgentError) -> Set<String> {
        guard !payloads.isEmpty else { return [] }
        // Each flight's frames, in arrival order. A batch's records mostly share one flight, so the frames of the
        // flight at hand grow in `frames` and go back into the table only when the flight changes: one lookup per
        // run of a flight, not one per record.
        var byFlight: [String: [UInt8]] = [:]
        var flight: String?
        var frames: [UInt8] = []
        var stream = RecordCoding.Stream()
        for payload in payloads {
            guard let record = try? stream.identity(payload) else { continue }
            if !held.isEmpty, held[record.id] == payload { continue }
            if record.flight.rawValue != flight {
                if let flight { byFlight[flight] = frames }
                flight = record.flight.rawValue
                frames = byFlight.removeValue(forKey: record.flight.rawValue) ?? []
            }
            payload.withUnsafeBytes { bytes in
                withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { frames.append(contentsOf: $0) }
                withUnsafeBytes(of: Checksum.crc32c(bytes).littleEndian) { frames.append(contentsOf: $0) }
                frames.append(contentsOf: bytes)
            }
        }
        if let flight { byFlight[flight] = frames }
        try Files.makeDirectory(directory)
        for (flight, bytes) in byFlight.sorted(by: { $0.key < $1.key }) {
            let path = file(for: flight).path
            let fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw Self.failure("open", path) }
            defer { close(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw Self.failure("stat", path) }
            if tails.checked.insert(flight).inserted, info.st_size > 0 {
                let floor = confirmations()[flight]?.bytes ?? 0
                let found = try cutTornTail(fd: fd, flight: flight, path: path, size: Int64(info.st_size)) {
                    $0 >= floor
                }
                if found.cut {
                    tails.cut.append((flight, Int64(info.st_size) - found.end))
                    info.st_size = off_t(found.end)
                }
            }
            let failed = bytes.withUnsafeBytes { raw -> AgentError? in
                var done = 0
                while done < raw.count {
                    let written = write(fd, raw.baseAddress! + done, raw.count - done)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return Self.failure("write", path)
                    }
                    done += written
                }
                return fsync(fd) == 0 ? nil : Self.failure("write", path)
            }
            if let failed {
                // Part of a frame left at the end (a disk that filled mid-write) would hide every frame appended
                // after it, since reading stops at the first frame cut short: the file goes back to what it held.
                if ftruncate(fd, info.st_size) == 0 { _ = fsync(fd) }
                throw failed
            }
        }
        try Files.syncDirectory(directory)
        return Set(byFlight.keys)
    }

    /// What a sync found at the ends of the flights' files: the flights it has checked for a torn end, and the torn
    /// ends it cut and has not logged yet.
    struct TailChecks {
        var checked: Set<String> = []
        var cut: [(flight: String, bytes: Int64)] = []

        /// The cuts not logged yet, handed over once.
        mutating func takeCuts() -> [(flight: String, bytes: Int64)] {
            defer { cut = [] }
            return cut
        }
    }

    /// ``append(_:tails:held:)`` checking every flight's tail (tests, and a caller that appends once).
    /// - Returns: The torn tails cut, by flight (bytes).
    @discardableResult
    func append(_ payloads: [Data]) throws(AgentError) -> [(flight: String, bytes: Int64)] {
        var tails = TailChecks()
        try append(payloads, tails: &tails)
        return tails.cut
    }

    /// The size to record with a confirmation of `flight`: the file's, once a torn end is cut off; nil when it is not
    /// known.
    ///
    /// `wholeBytes` is where the last whole frame ended when the confirmed summary was read from the file
    /// (``Holding/wholeBytes``). A file that is larger ends in part of a frame a crash interrupted, which reading
    /// skips: left in place, it would become part of the confirmed size, which ``append(_:tails:held:)`` never cuts below,
    /// so every frame appended after it would be invisible and the flight never confirmed again. It is cut here (kept
    /// beside the file, as an append's cut is), unless it lies inside what the ground confirmed before (damage, not a
    /// torn write: then nothing is cut and the file's size is recorded, as before). A file whose whole frames no
    /// longer end at `wholeBytes` changed since the summary was read (another sync on this home): its size is not
    /// known (nil), so nothing the ground did not confirm is counted as confirmed.
    func sizeToConfirm(flight: String, wholeBytes: Int64?, tails: inout TailChecks) throws(AgentError) -> Int64? {
        let size = bytes(flight: flight)
        guard let wholeBytes else { return size == 0 ? 0 : nil }
        guard wholeBytes != size else { return size }
        let path = file(for: flight).path
        let fd = open(path, O_RDWR | O_CLOEXEC)
        if fd < 0, errno == ENOENT { return nil }  // released since the summary was read
        guard fd >= 0 else { throw Self.failure("open", path) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.failure("stat", path) }
        let floor = confirmations()[flight]?.bytes ?? 0
        let found = try cutTornTail(fd: fd, flight: flight, path: path, size: Int64(info.st_size)) {
            $0 == wholeBytes && $0 >= floor
        }
        guard found.end == wholeBytes else { return nil }
        guard found.cut else { return Int64(info.st_size) }
        tails.checked.insert(flight)
        tails.cut.append((flight, Int64(info.st_size) - found.end))
        return found.end
    }

    /// Finds where the last whole frame of a flight's file (open read-write as `fd`, `size` bytes) ends, and cuts what
    /// follows when there is anything and `cutting` agrees to that end: a write a crash interrupted before its `fsync`.
    ///
    /// Callers never cut below the size the ground confirmed: the frames up to it were whole when the ground confirmed
    /// their summary, so a frame that fails there is damage to stored data, not a torn write, and the frames after it
    /// stay for someone to look at.
    /// - Returns: Where the whole frames end, and whether what followed was cut.
    private func cutTornTail(
        fd: Int32, flight: String, path: String, size: Int64, cutting: (Int64) -> Bool
    ) throws(AgentError) -> (end: Int64, cut: Bool) {
        var bytes = [UInt8](repeating: 0, count: Int(size))
        var done = 0
        while done < bytes.count {
            let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, $0.count - done, off_t(done)) }
            if read < 0 {
                if errno == EINTR { continue }
                throw Self.failure("read", path)
            }
            if read == 0 { break }
            done += read
        }
        let end = Int64(bytes.withUnsafeBytes { Self.payloadRanges(UnsafeRawBufferPointer(rebasing: $0[..<done])) }.last?
            .upperBound ?? 0)
        guard end < size, cutting(end) else { return (end, false) }
        // The bytes cut are kept beside the file first (never read again, never counted): should they be damage
        // rather than a torn write, what followed the damage is still there for someone to look at.
        try Files.writeAtomically(Data(bytes[Int(end)..<done]), to: tornFile(for: flight, at: Date()))
        guard ftruncate(fd, off_t(end)) == 0, fsync(fd) == 0 else { throw Self.failure("cut the torn end of", path) }
        return (end, true)
    }

    /// Where ``cutTornTail(fd:flight:path:size:cutting:)`` keeps the bytes it cuts: `<flight file>.torn-<unix seconds>`.
    func tornFile(for flight: String, at date: Date) -> URL {
        file(for: flight).appendingPathExtension("torn-\(Int(date.timeIntervalSince1970))")
    }

    static func failure(_ operation: String, _ path: String) -> AgentError {
        let code = errno
        return AgentError(
            code == ENOSPC ? .tryAgain : .failure,
            "cannot \(operation) \(path): \(String(cString: strerror(code)))"
                + (code == ENOSPC ? "; free some space and try again" : ""))
    }

    /// Every record payload of one flight's file, in the order appended.
    func payloads(flight: String) throws(AgentError) -> [Data] { try framed(flight: flight).payloads }

    /// ``payloads(flight:)``, and where the last whole frame ends in the file (0 when none is whole).
    /// - Throws: ``AgentError`` when the file is there and cannot be read (no permission, a directory in its place,
    ///   an I/O error): read as empty, its flight was summarised as holding nothing, and the ground's answer
    ///   (`mismatch`) sent the device looking for records it held all along. No file is no records.
    func framed(flight: String) throws(AgentError) -> (payloads: [Data], end: Int64) {
        let url = file(for: flight)
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            // Not there (never delivered, or a release renamed it aside meanwhile): nothing held. A path that cannot
            // be examined either (no search permission on `delivered/`) throws.
            if try !Files.isPresent(url) { return ([], 0) }
            throw AgentError(
                .failure,
                "cannot read \(url.path): \(fileErrorText(error)); it holds the records the ground acknowledged for \(flight): check that it is a file this user may read (sync and status need it)"
            )
        }
        // The frames are found in the raw bytes, then each payload is a slice: the file's bytes are read once and
        // shared.
        let base = data.startIndex
        let ranges = data.withUnsafeBytes(Self.payloadRanges)
        return (ranges.map { data[(base + $0.lowerBound)..<(base + $0.upperBound)] }, Int64(ranges.last?.upperBound ?? 0))
    }

    /// Where the payloads of `bytes` lie: each frame's length, checksum and payload, up to the first frame that is
    /// cut short or fails its checksum (a write a crash interrupted).
    private static func payloadRanges(_ bytes: UnsafeRawBufferPointer) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var offset = 0
        while bytes.count - offset >= 8 {
            let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            let crc = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
            let start = offset + 8
            guard bytes.count - start >= length else { break }
            guard Checksum.crc32c(UnsafeRawBufferPointer(rebasing: bytes[start..<(start + length)])) == crc else {
                break
            }
            ranges.append(start..<(start + length))
            offset = start + length
        }
        return ranges
    }

    /// Flights with a file here.
    func flights() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.compactMap(Self.flight(ofFile:)).sorted()
    }

    /// Bytes held for `flight`.
    func bytes(flight: String) -> Int64 {
        (try? FileSystem.fileSize(file(for: flight).path)) ?? 0
    }

    /// What the device holds acknowledged, per flight: each order at its highest revision (under that revision's
    /// flight), each scan once. Read from every flight's file, since a revision may move an order to another flight.
    func holdings() throws(AgentError) -> [String: Holding] {
        holdings(try heldRecords(), confirmations: confirmations())
    }

    /// ``holdings()`` from the files' records read once (``heldRecords()``) and the confirmations.
    func holdings(_ held: Held, confirmations: [String: Confirmation]) -> [String: Holding] {
        let (orders, scans) = (held.orders, held.scans)
        var holdings: [String: Holding] = [:]
        for flight in held.flights { holdings[flight] = Holding(wholeBytes: held.wholeBytes[flight]) }
        // Records retention released are still the ground's: the flight's summary starts from theirs, less the
        // orders amended since (the ground holds those at their new revision, counted below or under another flight).
        let releasedOrders = releasedRevisions(confirmations)
        let newest = newestRevisions(orders, released: releasedOrders)
        for (flight, confirmation) in confirmations {
            guard var released = confirmation.released, holdings[flight] != nil else { continue }
            for (id, revision) in confirmation.releasedOrders ?? [:] {
                guard let uuid = UUID(uuidString: id), (newest[uuid] ?? 0) > revision else { continue }
                released.remove(order: uuid, revision: revision)
            }
            holdings[flight]?.summary.merge(released)
        }
        // An order in a file at a revision retention already released (or older than one it released) is counted
        // by that release's summary: the ground holds it once, at that revision. It is in a file again when it was
        // acknowledged again after the release: a set-aside older revision resent (`set-aside resend`), a record
        // both queued and set aside by a crash. Counted twice, its flight was asked with one record more than the
        // ground holds, answered `mismatch` every time, and never confirmed again.
        for (id, order) in orders where (releasedOrders[id] ?? 0) < order.revision {
            holdings[order.flight, default: Holding()].add(id: id, payload: order.payload) {
                $0.add(order: id, revision: order.revision)
            }
        }
        for (id, scan) in scans {
            holdings[scan.flight, default: Holding()].add(id: id, payload: scan.payload) { $0.add(scan: id) }
        }
        return holdings
    }

    /// Every acknowledged record in the files, read once: each order at its highest revision (with that revision's
    /// flight), each scan once, and the flights with a file.
    struct Held {
        /// An order as held: its highest revision, that revision's flight and its record.
        typealias Order = (revision: Int, flight: String, payload: Data)

        var orders: [UUID: Order] = [:]
        var scans: [UUID: (flight: String, payload: Data)] = [:]
        var flights: [String] = []
        /// Where each file's last whole frame ends, by flight.
        var wholeBytes: [String: Int64] = [:]
    }

    /// Reads every flight's file once (``Held``): each record's identity only (`RecordCoding.Stream.identity`), since
    /// ``append(_:)`` wrote only records the ground decoded whole.
    func heldRecords() throws(AgentError) -> Held {
        var held = Held(flights: flights())
        for flight in held.flights {
            var stream = RecordCoding.Stream()
            let (payloads, end) = try framed(flight: flight)
            held.wholeBytes[flight] = end
            for payload in payloads {
                // The ground decoded each record here whole before ``append(_:)`` wrote it; its frame's checksum holds.
                guard let record = try? stream.identity(payload) else { continue }
                // One lookup per record: the subscript with a default stores the record when its id is new, and
                // otherwise hands over the stored one (an order keeps its highest revision, a scan its first copy).
                if record.isOrder {
                    let found = (revision: record.revision, flight: record.flight.rawValue, payload: payload)
                    Self.keepHighestRevision(&held.orders[record.id, default: found], found)
                } else {
                    Self.keepFirst(&held.scans[record.id, default: (record.flight.rawValue, payload)])
                }
            }
        }
        return held
    }

    private static func keepHighestRevision(_ stored: inout Held.Order, _ found: Held.Order) {
        if stored.revision < found.revision { stored = found }
    }

    /// Keeps what is stored: passed the subscript with a default, it stores the default only when the key is new.
    private static func keepFirst<Value>(_ stored: inout Value) {}

    /// Each order's newest revision in a released summary (``Confirmation/releasedOrders``), whichever flight.
    func releasedRevisions(_ confirmations: [String: Confirmation]) -> [UUID: Int] {
        var released: [UUID: Int] = [:]
        for confirmation in confirmations.values {
            for (id, revision) in confirmation.releasedOrders ?? [:] {
                guard let uuid = UUID(uuidString: id) else { continue }
                released[uuid] = max(released[uuid] ?? 0, revision)
            }
        }
        return released
    }

    /// Each order's newest revision the ground acknowledged: held in a file or in a released summary.
    private func newestRevisions(_ orders: [UUID: Held.Order], released: [UUID: Int]) -> [UUID: Int] {
        orders.mapValues(\.revision).merging(released, uniquingKeysWith: max)
    }

    /// One flight's acknowledged records: their summary and their bytes (each order's highest revision, each scan).
    struct Holding {
        var summary = DeliverySummary()
        var payloads: [Data] = []
        /// The ids of the records in `payloads`.
        var ids: Set<UUID> = []
        /// Where the last whole frame of the flight's own file ends (nil: no file): ``sizeToConfirm(flight:wholeBytes:tails:)``.
        var wholeBytes: Int64?

        mutating func add(id: UUID, payload: Data, summarise: (inout DeliverySummary) -> Void) {
            summarise(&summary)
            payloads.append(payload)
            ids.insert(id)
        }
    }

    /// The confirmations recorded so far, by flight; a release a crash interrupted is answered finished when its
    /// file was renamed aside, undone when not (``applyRetention(_:now:)``).
    func confirmations() -> [String: Confirmation] {
        guard let data = try? Data(contentsOf: confirmationsFile),
            let stored = try? SyncState.decoder.decode([String: Confirmation].self, from: data)
        else { return [:] }
        var settled = stored
        for (flight, confirmation) in stored where confirmation.releasing != nil {
            settled[flight] = confirmation.settled(
                finished: FileManager.default.fileExists(atPath: asideFile(for: flight).path))
        }
        return settled
    }

    /// Moves a `confirmed.json` that does not decode aside, to `confirmed.json.damaged-<unix seconds>`, so that the
    /// sync's next save does not overwrite it unseen (before, it read as empty and the first confirmation replaced
    /// it: the summaries of released records went with it). The sync then goes on as if nothing had been confirmed:
    /// every flight is asked again, and a flight whose records retention released stays not confirmed (the ground
    /// holds records the device no longer counts), which is the safe side.
    /// - Returns: The file it was moved to and why it did not decode, or nil when it decodes or is not there.
    /// - Throws: ``AgentError`` when it is there and cannot be read (no permission, a directory in its place, an I/O
    ///   error): read as empty, it would be saved over just the same.
    func setAsideDamagedConfirmations(now: Date = Date()) throws(AgentError) -> (file: URL, problem: String)? {
        guard try Files.isPresent(confirmationsFile) else { return nil }
        let data: Data
        do {
            data = try Data(contentsOf: confirmationsFile)
        } catch {
            throw AgentError(
                .failure,
                "cannot read \(confirmationsFile.path): \(fileErrorText(error)); it holds what the ground confirmed, and is not written over while it cannot be read"
            )
        }
        do {
            _ = try SyncState.decoder.decode([String: Confirmation].self, from: data)
            return nil
        } catch {
            let aside = directory.appendingPathComponent("confirmed.json.damaged-\(Int(now.timeIntervalSince1970))")
            try Files.rename(confirmationsFile, to: aside)
            return (aside, String(String(describing: error).prefix(300)))
        }
    }

    /// Finishes or undoes the releases a crash interrupted (as ``confirmations()`` answers them), then removes the
    /// files renamed aside.
    func finishInterruptedReleases() throws(AgentError) {
        let stored = (try? Data(contentsOf: confirmationsFile)).flatMap {
            try? SyncState.decoder.decode([String: Confirmation].self, from: $0)
        }
        if let stored, stored.values.contains(where: { $0.releasing != nil }) { try save(confirmations()) }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names where name.hasSuffix(".records.releasing") {
            try Files.remove(directory.appendingPathComponent(name))
        }
    }

    /// Records that the ground confirmed `summary` for `flight`.
    /// - Parameter bytes: The flight file's size the summary was computed from, when known.
    ///
    /// The same summary confirmed again keeps the first confirmation's time: every sync asks about every flight the
    /// device holds, and retention counts its days from when the ground first held these records (before, each sync
    /// restarted them, so a device that synced daily never reached `retention.days`).
    func confirm(flight: String, summary: DeliverySummary, bytes: Int64?, at date: Date = Date()) throws(AgentError) {
        var all = confirmations()
        let previous = all[flight]
        let since =
            previous.flatMap { $0.count == summary.count && $0.digest == summary.digestHex ? $0.confirmedAt : nil }
            ?? date
        var confirmation = Confirmation(
            count: summary.count, digest: summary.digestHex, confirmedAt: since, bytes: bytes)
        confirmation.releasedCount = all[flight]?.releasedCount
        confirmation.releasedDigest = all[flight]?.releasedDigest
        confirmation.releasedOrders = all[flight]?.releasedOrders
        all[flight] = confirmation
        try save(all)
    }

    /// Forgets `flight`'s confirmation (keeping the summary of what retention released, which the ground still
    /// counts): the ground no longer holds what it confirmed, so `status` must not say confirmed.
    func unconfirm(flight: String) throws(AgentError) {
        var all = confirmations()
        guard var confirmation = all[flight] else { return }
        if let released = confirmation.released {
            confirmation.count = released.count
            confirmation.digest = released.digestHex
            confirmation.bytes = nil
            all[flight] = confirmation
        } else {
            all[flight] = nil
        }
        try save(all)
    }

    /// Bytes kept of records the ground has not confirmed: what capture's check counts. A flight's file only grows
    /// between its confirmation and its release (which leaves the confirmed size at 0), so what lies past the size
    /// the ground confirmed is what it has not; a file smaller than that, or one whose confirmed size is not known,
    /// counts whole. (Before, one record added to a large confirmed flight counted the whole file.)
    func unconfirmedBytes() -> Int64 {
        let confirmations = confirmations()
        return flights().reduce(Int64(0)) { total, flight in
            let size = bytes(flight: flight)
            guard let confirmed = confirmations[flight]?.bytes, size >= confirmed else { return total + size }
            return total + (size - confirmed)
        }
    }

    /// Bytes kept in all.
    func totalBytes() -> Int64 { flights().reduce(Int64(0)) { $0 + bytes(flight: $1) } }

    /// Refuses a capture once records the ground has not confirmed fill the retention cap: they are never deleted
    /// to make room (docs/AGENT.md, "Retention").
    /// - Throws: ``AgentError`` (`tryAgain`, exit 75) naming the cap and what to do.
    func checkRoom(_ retention: AgentConfiguration.Retention) throws(AgentError) {
        guard FileManager.default.fileExists(atPath: directory.path) else { return }
        let unconfirmed = unconfirmedBytes()
        guard unconfirmed >= retention.maxBytes else { return }
        throw AgentError(
            .tryAgain,
            "the records this device delivered but the ground has not confirmed fill the retention cap (\(unconfirmed) of retention.maxBytes \(retention.maxBytes) bytes in \(directory.path)); nothing was recorded: run `\(syncCommand)` so the ground confirms them, then try again"
        )
    }

    /// Releases confirmed flights' records (docs/AGENT.md, "Retention"): those confirmed more than `retention.days`
    /// ago, then, while everything kept exceeds `retention.maxBytes`, the oldest confirmed first. A flight whose file
    /// holds anything the ground has not confirmed is never released, whatever the cap.
    /// - Returns: The flights released, oldest confirmation first.
    @discardableResult
    func applyRetention(_ retention: AgentConfiguration.Retention, now: Date = Date()) throws(AgentError) -> [String] {
        try finishInterruptedReleases()
        var all = confirmations()
        // A confirmation time the device's clock cannot have read truly (before 2026, or more than a day ahead of
        // now: a clock reset to 2000 and then corrected, or set ahead and then back) starts its days again now.
        // Before, a device whose clock had been reset released every flight it confirmed then at the first sync after
        // the clock was put right, with none of the retention days left to repair the ground from the device.
        var restamped = false
        for (flight, confirmation) in all
        where confirmation.confirmedAt < Self.earliestConfirmation || confirmation.confirmedAt > now + 86_400 {
            all[flight]?.confirmedAt = now
            restamped = true
        }
        if restamped { try save(all) }
        var total = totalBytes()
        // Nothing expired and nothing over the cap: nothing to release, and no need to read the files (a sync ends here
        // almost always).
        let expired = { (confirmedAt: Date) in now.timeIntervalSince(confirmedAt) > retention.days * 86_400 }
        let anyExpired = flights().contains { all[$0].map { expired($0.confirmedAt) } ?? false }
        guard total > retention.maxBytes || anyExpired else { return [] }
        // Only a confirmation that is still the flight's summary: an order amended since into another flight has
        // left this one, and the ground must confirm that before the records go.
        let held = try heldRecords()
        let current = holdings(held, confirmations: all)
        let candidates = flights().compactMap { flight -> (String, Date, Int64)? in
            guard let confirmation = all[flight], confirmation.bytes == bytes(flight: flight),
                confirmation.summary == current[flight]?.summary
            else { return nil }
            return (flight, confirmation.confirmedAt, bytes(flight: flight))
        }.sorted { $0.1 < $1.1 }
        var released: [String] = []
        let orders = held.orders
        let newest = newestRevisions(orders, released: releasedRevisions(all))
        for (flight, confirmedAt, size) in candidates {
            guard expired(confirmedAt) || total > retention.maxBytes else { continue }
            guard var confirmation = all[flight] else { continue }
            // The orders the confirmed summary counts: the earlier release's still current, and this file's.
            var releasedOrders = (confirmation.releasedOrders ?? [:]).filter { id, revision in
                UUID(uuidString: id).map { (newest[$0] ?? 0) <= revision } ?? false
            }
            for (id, order) in orders where order.flight == flight && newest[id] == order.revision {
                releasedOrders[id.uuidString] = order.revision
            }
            confirmation.releasing = .init(
                at: now, count: confirmation.count, digest: confirmation.digest,
                orders: releasedOrders.isEmpty ? nil : releasedOrders)
            all[flight] = confirmation
            total -= size
            released.append(flight)
        }
        guard !released.isEmpty else { return [] }
        // In three durable steps, so that a crash between any two leaves a state `confirmations()` reads whole: the
        // marks saved as pending (a crash now: undone), the files renamed aside (now: finished), the marks saved as
        // done and the files removed.
        try save(all)
        for flight in released { try Files.rename(file(for: flight), to: asideFile(for: flight)) }
        try finishInterruptedReleases()
        return released
    }

    /// 2026-01-01T00:00:00Z: no confirmation of this code's ground is older (``applyRetention(_:now:)``).
    static let earliestConfirmation = Date(timeIntervalSince1970: 1_767_225_600)

    func save(_ confirmations: [String: Confirmation]) throws(AgentError) {
        try Files.makeDirectory(directory)
        let data: Data
        do {
            data = try SyncState.encoder.encode(confirmations)
        } catch {
            throw AgentError(.failure, "cannot encode \(confirmationsFile.path): \(error)")
        }
        try Files.writeAtomically(data, to: confirmationsFile)
    }
}
