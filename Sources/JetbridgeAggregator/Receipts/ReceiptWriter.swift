public import Foundation
public import JetbridgeModel
public import JetbridgeStore
public import Logging
import SystemSupport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes one receipt per passenger seat per flight as `<fileStem>.txt` (``Receipt/text``) and `<fileStem>.json`
/// under a directory it owns, each file replaced atomically, a group of receipts at a time: every new file written to
/// a temporary file in the same directory, then the group flushed once (`syncfs(2)`), each file renamed over the old
/// one, and the directory fsynced once (`AtomicFileGroup`). A crash leaves each file old or new, never torn.
///
/// It owns the files whose names it could have written (`ZA101_2026-11-21_17B.txt`/`.json`) and its leftover
/// temporary files; ``rebuildAll(_:)`` removes those it owns that no receipt produces, and nothing else.
///
/// Temporary files are named `.<file>.<host>-<pid>.<uuid>.tmp`: in a directory several aggregators share, one can tell
/// its own leftovers (and those of a process on its host that is gone) from another's files in progress
/// (``removeLeftovers(now:)``).
public struct ReceiptWriter: Sendable {
    public let directory: URL
    let logger: Logger

    /// Receipts read per snapshot while refreshing, so a large backlog never sits in memory at once.
    static let refreshChunk = 500

    /// `<directory>/.receipts.lock`: a `flock(2)` held by whoever writes the receipts: by `serve`'s refresh for each
    /// group of seats (read, written, marks cleared), shared on PostgreSQL (whose claims give each seat one writer)
    /// and exclusive on SQLite; and exclusive by ``rebuildAll(_:)`` for its whole run.
    /// Without it, a rebuild run while `serve` runs (docs/AGGREGATOR.md allows it) removed a receipt `serve` had just
    /// written for a seat the rebuild had not read, or renamed its older copy of a seat over `serve`'s newer one;
    /// either way the seat's mark was cleared, so nothing put it right. With it, a refresh waits for the rebuild, and
    /// the marks that commits set meanwhile make it write what the rebuild read too early. In a directory several
    /// aggregators share, their refreshes run at once (the store's claims give each seat one writer): when they took
    /// turns, an aggregator stopped in the middle of a group (SIGSTOP, a paused VM) held every other's receipts back
    /// for as long as it stayed stopped.
    public var lockFile: URL { directory.appendingPathComponent(".receipts.lock") }

    /// `<directory>/.receipts.rebuild`: held by a rebuild from before it waits for ``lockFile`` to its end. A refresh
    /// takes ``lockFile`` again right after each group, so a rebuild polling for it might never find it free during a
    /// long backlog; a refresh that finds this one held stops before its next group instead (``Busy``).
    public var rebuildIntentFile: URL { directory.appendingPathComponent(".receipts.rebuild") }

    /// How long a refresh waits for the lock before it gives up for now (the seats stay marked, tried again at the
    /// next refresh): a rebuild holds it for its whole run.
    static let refreshLockWait: Duration = .seconds(2)
    /// How long a rebuild waits for the lock: each refresh holds it (shared) for one group of seats.
    static let rebuildLockWait: Duration = .seconds(60)

    /// Another process holds ``lockFile``.
    public struct Busy: Error, CustomStringConvertible, Sendable {
        /// The pid in the lock file, when it names one.
        public var holder: Int32?
        public var path: String
        public var description: String {
            "another process\(holder.map { " (pid \($0))" } ?? "") is writing the receipts (it holds \(path))"
        }
    }

    /// Takes ``lockFile`` (or `file`), exclusive unless `shared`, waiting up to `wait`.
    /// - Throws: ``Busy``, or ``StoreError`` (`fileSystem`) when the lock file cannot be opened.
    func lock(_ file: URL? = nil, shared: Bool = false, waitingUpTo wait: Duration) throws -> FileLock {
        let path = (file ?? lockFile).path
        do {
            // 0644: a rebuild run as another user (sudo) must not leave a lock serve cannot open (it locks it
            // read-only then). Only an exclusive holder writes its pid there.
            return try FileLock(path: path, waitingUpTo: wait, recordingPID: true, mode: 0o644, exclusive: !shared)
        } catch {
            switch error {
            case .busy(let holder): throw Busy(holder: holder, path: path)
            case .system(let failure):
                throw StoreError(.fileSystem, "\(failure)", path: path, errno: failure.errno)
            }
        }
    }

    /// - Parameters:
    ///   - directory: The receipts directory, such as `<home>/receipts`; created when first written.
    ///   - logger: Where the writer logs.
    public init(directory: URL, logger: Logger) {
        self.directory = directory
        self.logger = logger
    }

    /// Writes (or replaces) one receipt's text and JSON files.
    /// - Throws: ``StoreError`` with code `fileSystem`.
    public func write(_ receipt: Receipt) throws {
        try prepareDirectory()
        let group = try storeIO(AtomicFileGroup(directory: directory.path))
        try stage(receipt, in: group)
        try storeIO(group.commit())
    }

    /// Writes the receipts of every seat that new orders touched since the last refresh, then clears those marks.
    ///
    /// A seat whose orders all moved elsewhere loses its files. Each group of seats (one step of the store's walk) is
    /// written as one `AtomicFileGroup`: temporary files, one flush, the renames, one directory fsync. Marks are
    /// cleared only after that, and only if no newer commit marked the seat again, so a crash at any point leaves
    /// work to redo, never a stale or torn receipt.
    /// - Parameters:
    ///   - store: The store whose marks to work off.
    ///   - shouldContinue: Asked before each group of seats; `false` stops early, leaving the remaining marks for the
    ///     next call (a shutdown need not wait for a large backlog of receipts).
    /// - Returns: How many seats were refreshed.
    /// - Throws: ``StoreError``, `DatabaseError`, or ``ValidationError`` when a receipt's amounts overflow; ``Busy``
    ///   when a rebuild holds ``lockFile`` past ``refreshLockWait`` (the groups written before stay written).
    @discardableResult
    public func refreshDirty(_ store: any StoreWriter, while shouldContinue: () -> Bool = { true }) throws -> Int {
        var refreshed = 0
        // Walk the marks in key order, so seats a busy writer keeps marking cannot starve the others; whatever is
        // marked again behind the walk waits for the next call.
        var after: ReceiptMark?
        while shouldContinue() {
            try prepareDirectory()
            if let holder = FileLock.holder(of: rebuildIntentFile.path) {
                throw Busy(holder: holder == 0 ? nil : holder, path: rebuildIntentFile.path)
            }
            let lock = try lock(shared: store.claimsReceiptSeats, waitingUpTo: Self.refreshLockWait)
            defer { lock.release() }
            let group = try storeIO(AtomicFileGroup(directory: directory.path))
            var failed = 0
            let chunk = try store.refreshReceipts(
                after: after, limit: Self.refreshChunk,
                failed: { flight, seat, error in
                    failed += 1
                    let unwritable = error is ReceiptSeatFailure
                    // The files of a seat whose receipt cannot be made are removed, as a rebuild removes them (left,
                    // they showed a total that is no longer the seat's), now, while this writer holds the seat's
                    // claim: after the claims are let go, another aggregator may have written the seat's new files.
                    // Its seat stays marked either way; a file that cannot be removed must not stop the walk.
                    var removed = true
                    if !unwritable {
                        do { try removeFiles(stem: Self.stem(flight: flight, seat: seat)) } catch {
                            removed = false
                            logger.error(
                                "a stale receipt could not be removed",
                                metadata: [
                                    "flight": "\(flight)", "seat": "\(seat)",
                                    "error": "\(InertText.escape("\(error)"))",
                                ])
                        }
                    }
                    logger.error(
                        unwritable
                            ? "a receipt's files could not be written; the seat stays marked and is tried again at the next refresh"
                            : removed
                                ? "a receipt could not be made; its files are removed, and the seat stays marked and is tried again at the next refresh"
                                : "a receipt could not be made; the seat stays marked and is tried again at the next refresh",
                        metadata: [
                            "flight": "\(flight)", "seat": "\(seat)", "error": "\(InertText.escape("\(error)"))",
                        ])
                },
                write: { flight, seat, receipt in
                    if let receipt {
                        try stage(receipt, in: group)
                    } else {
                        try removeFiles(stem: Self.stem(flight: flight, seat: seat))
                    }
                },
                durable: { try storeIO(group.commit()) })
            guard let last = chunk.last else { break }
            refreshed += chunk.count - failed
            after = last
        }
        if refreshed > 0 { logger.debug("receipts refreshed", metadata: ["seats": .stringConvertible(refreshed)]) }
        return refreshed
    }

    /// How old another live writer's temporary file must be before ``removeLeftovers(now:)`` takes it for a leftover:
    /// writing one receipt file takes milliseconds. Removing one still in use costs its writer a failed rename, and
    /// its seat stays marked and is rendered again.
    static let leftoverAge: TimeInterval = 600

    /// Removes the temporary files a writer killed mid-write left in the directory; `serve` calls it when its
    /// receipts thread starts. Removed: those of this host whose process is gone (or whose pid is this process's,
    /// from an earlier process that had it), and any other (another host's, or of an older name without its
    /// writer) older than ten minutes (``leftoverAge``). Files a live process on this host is writing stay.
    /// - Parameter now: The time to measure ages against.
    /// - Returns: How many files were removed.
    /// - Throws: ``StoreError`` with code `fileSystem` when the directory cannot be read or a file removed.
    @discardableResult
    public func removeLeftovers(now: Date = Date()) throws -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path) else { return 0 }
        var removed = 0
        for name in names {
            guard let temporary = Self.temporaryName(name) else { continue }
            let path = directory.appendingPathComponent(name).path
            let leftover: Bool
            if let owner = temporary.owner, owner.host == ThisProcess.hostLabel {
                leftover = owner.pid == ThisProcess.pid || !ThisProcess.isRunning(owner.pid)
            } else {
                var info = stat()
                guard lstat(path, &info) == 0 else { continue }
                leftover = now.timeIntervalSince1970 - Double(info.st_mtim.tv_sec) > Self.leftoverAge
            }
            guard leftover else { continue }
            try storeIO(FileSystem.unlinkIfExists(path))
            removed += 1
        }
        if removed > 0 {
            try storeIO(FileSystem.syncDirectory(directory.path))
            logger.info(
                "removed temporary receipt files a stopped writer left",
                metadata: ["files": "\(removed)", "directory": "\(directory.path)"])
        }
        return removed
    }

    /// What ``rebuildAll(_:)`` did.
    public struct RebuildSummary: Hashable, Sendable {
        /// A seat with orders whose receipt cannot be made, and why.
        public struct Failure: Hashable, Sendable {
            public var flight: FlightID
            public var seat: Seat
            /// Why, for people (inert: it may quote an item name).
            public var reason: String
        }

        /// Receipts made (seats with orders).
        public var receipts: Int
        /// Of those, receipts with at least one file rewritten because its bytes changed (or it was missing).
        public var written: Int
        /// Of those, receipts whose two files already held their bytes and were left alone.
        public var current: Int { receipts - written }
        /// Stale files removed: receipts of seats without orders, leftover temporary files, and the files of the
        /// seats in `failed`.
        public var removed: Int
        /// Seats with orders but no receipt, in (flight, seat) order.
        public var failed: [Failure]
    }

    /// Regenerates every receipt from the store and removes the files it owns that no receipt produces.
    ///
    /// Output depends only on stored data, so a rebuild of an unchanged store writes the same bytes, and writes no
    /// file at all. A seat whose receipt cannot be made (see ``StoreReader/forEachReceipt(flight:failed:_:)``)
    /// does not stop the others: it is listed in the summary's `failed`, and its old files are removed rather than
    /// left stale.
    /// - Parameter store: The store to read.
    /// - Returns: Receipts made, rewritten and already current; files removed; seats that failed.
    /// - Throws: ``StoreError``, `DatabaseError`; ``Busy`` when another rebuild (or a refresh that does not end)
    ///   holds ``lockFile`` past ``rebuildLockWait``.
    @discardableResult
    public func rebuildAll(_ store: any StoreReader) throws -> RebuildSummary {
        try prepareDirectory()
        let intent = try lock(rebuildIntentFile, waitingUpTo: Self.rebuildLockWait)
        defer { intent.release() }
        let lock = try lock(waitingUpTo: Self.rebuildLockWait)
        defer { lock.release() }
        let group = try storeIO(AtomicFileGroup(directory: directory.path))
        var produced: Set<String> = []
        // Seats whose files cannot be replaced: not counted as receipts, and their files are left alone.
        var unwritable: Set<String> = []
        var written = 0
        var failed: [RebuildSummary.Failure] = []
        // One seat's orders in memory at a time; files written in groups as the refresh writes them, the directory
        // synced once more at the end.
        for flight in try store.flightsWithOrders() {
            try store.forEachReceipt(
                flight: flight,
                failed: { flight, seat, error in
                    failed.append(.init(flight: flight, seat: seat, reason: InertText.escape("\(error)")))
                    logger.error(
                        "a receipt could not be made; its files are removed",
                        metadata: [
                            "flight": "\(flight)", "seat": "\(seat)", "error": "\(InertText.escape("\(error)"))",
                        ])
                }
            ) { receipt in
                do {
                    if try stage(receipt, in: group) { written += 1 }
                    produced.insert(receipt.fileStem)
                } catch let error as ReceiptSeatFailure {
                    unwritable.insert(receipt.fileStem)
                    // Its files cannot be replaced (a directory at its name): this seat fails, the others go on.
                    failed.append(.init(flight: receipt.flight, seat: receipt.seat, reason: error.description))
                    logger.error(
                        "a receipt's files could not be written",
                        metadata: [
                            "flight": "\(receipt.flight)", "seat": "\(receipt.seat)",
                            "error": "\(InertText.escape(error.description))",
                        ])
                }
                if group.count >= 2 * Self.refreshChunk { try storeIO(group.commit()) }
            }
        }
        try storeIO(group.commit())
        var removed = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            if Self.isTemporary(name)
                || (Self.ownedStem(of: name).map { !produced.contains($0) && !unwritable.contains($0) } ?? false)
            {
                try storeIO(FileSystem.unlinkIfExists(directory.appendingPathComponent(name).path))
                removed += 1
            }
        }
        try storeIO(group.commit())
        // Everything is current now; marks taken before the rebuild began may still be cleared by a refresh later.
        let summary = RebuildSummary(receipts: produced.count, written: written, removed: removed, failed: failed)
        logger.info(
            "receipts rebuilt",
            metadata: [
                "receipts": "\(summary.receipts)", "written": "\(summary.written)", "removed": "\(removed)",
                "failed": "\(failed.count)",
            ])
        return summary
    }

    /// The JSON file's bytes: sorted keys, ISO 8601 UTC dates, a trailing newline, so a rebuild writes the same bytes.
    ///
    /// The same bytes as Foundation's `JSONEncoder` with `[.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]`
    /// and `.iso8601` dates (``encoderJSON(_:)``, compared in the tests), written directly by
    /// `Receipt.jsonBytes()`: a bulk sync leaves hundreds of orders per seat, and the encoder's containers were over
    /// half of a refresh's CPU (perf).
    public static func json(_ receipt: Receipt) throws -> Data {
        Data(receipt.jsonBytes())
    }

    /// The receipt through Foundation's `JSONEncoder`: the reference ``json(_:)`` must equal byte for byte.
    public static func encoderJSON(_ receipt: Receipt) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return try encoder.encode(receipt) + Data("\n".utf8)
    }

    // MARK: Files

    private func prepareDirectory() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Stages both files of a receipt in `group`; its ``AtomicFileGroup/commit()`` replaces them.
    /// - Returns: Whether a file was staged (`false`: both already held their bytes).
    @discardableResult
    private func stage(_ receipt: Receipt, in group: AtomicFileGroup) throws -> Bool {
        let stem = receipt.fileStem
        // The files that change, both checked before either is staged: never one file of a receipt new and the
        // other old. A file that already holds its bytes was put there by a writer, flushed before its rename; the
        // group's commit still fsyncs the directory, which makes that rename durable if a crash left it unsynced.
        // Comparing costs a read from the page cache, far less than a new copy; it needs no replacing, whoever owns it.
        let changed = [(stem + ".txt", receipt.textBytes()), (stem + ".json", receipt.jsonBytes())].filter {
            !Self.holds($0.1, path: directory.appendingPathComponent($0.0).path)
        }
        for (name, _) in changed { try checkReplaceable(directory.appendingPathComponent(name).path) }
        for (name, bytes) in changed { try stageFile(named: name, with: bytes, in: group) }
        return !changed.isEmpty
    }

    /// Stages one file's new bytes (the caller found that it does not hold them).
    private func stageFile(named name: String, with bytes: [UInt8], in group: AtomicFileGroup) throws {
        let target = directory.appendingPathComponent(name).path
        let temporary = directory.appendingPathComponent(
            ".\(name).\(ThisProcess.hostLabel)-\(ThisProcess.pid).\(UUID().uuidString).tmp"
        ).path
        try storeIO(group.stage(Data(bytes), temporary: temporary, target: target, mode: 0o644))
    }

    /// Whether the file at `path` exists and holds exactly `bytes`; any error reading it is a no, and so is a link
    /// (the rename that follows replaces it).
    static func holds(_ bytes: [UInt8], path: String) -> Bool {
        // O_NONBLOCK: a FIFO put at a receipt's name would block a plain open until a writer came (the receipts
        // thread, and the shutdown waiting for it, hung); it is then not a regular file, so a no.
        guard let fd = try? FileSystem.openFile(path, O_RDONLY | O_NONBLOCK) else { return false }
        defer { _ = close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG, Int(status.st_size) == bytes.count
        else { return false }
        // One byte more than expected, so a file that grew since the fstat reads as different.
        var buffer = [UInt8](repeating: 0, count: bytes.count + 1)
        let filled = buffer.withUnsafeMutableBytes { try? FileSystem.readFully(fd, into: $0, path: path) }
        return filled == bytes.count
            && buffer.withUnsafeBytes { file in
                bytes.withUnsafeBytes { memcmp(file.baseAddress!, $0.baseAddress!, bytes.count) == 0 }
            }
    }

    private func removeFiles(stem: String) throws {
        let paths = [stem + ".txt", stem + ".json"].map { directory.appendingPathComponent($0).path }
        for path in paths { try checkReplaceable(path) }
        for path in paths { try storeIO(FileSystem.unlinkIfExists(path)) }
    }

    /// Throws ``ReceiptSeatFailure`` (that seat fails alone, and stays marked) when the file at `path` could not be
    /// replaced or removed while the directory's other files can: a directory there, or a file another user owns in a
    /// sticky directory (a shared one). The group's rename or unlink would fail on it, and with it every refresh at
    /// the same place.
    private func checkReplaceable(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            throw ReceiptSeatFailure("\(path) is a directory, not a receipt file: move it away")
        }
        var parent = stat()
        let user = geteuid()
        // In a sticky directory only the file's owner, the directory's owner and root may replace a file.
        if user != 0, info.st_uid != user, lstat(directory.path, &parent) == 0, (parent.st_mode & S_ISVTX) != 0,
            parent.st_uid != user
        {
            throw ReceiptSeatFailure(
                "\(path) belongs to user \(info.st_uid), and the sticky directory lets only its owner replace it: remove it, or give it to this aggregator's user"
            )
        }
    }

    static func stem(flight: FlightID, seat: Seat) -> String {
        Receipt(flight: flight, seat: seat, currency: "", orders: [], total: 0).fileStem
    }

    /// The receipt stem of a file this writer could have written, such as `ZA101_2026-11-21_17B` for
    /// `ZA101_2026-11-21_17B.txt`, or `nil` for any other file.
    static func ownedStem(of name: String) -> String? {
        let stem: Substring
        if name.hasSuffix(".txt") {
            stem = name.dropLast(4)
        } else if name.hasSuffix(".json") {
            stem = name.dropLast(5)
        } else {
            return nil
        }
        let parts = stem.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, let flight = try? FlightID("\(parts[0])/\(parts[1])"),
            let seat = try? Seat(String(parts[2])), stem == Self.stem(flight: flight, seat: seat)
        else { return nil }
        return String(stem)
    }

    static func isTemporary(_ name: String) -> Bool { temporaryName(name) != nil }

    /// A temporary file name this writer could have made, parsed: `.<file>.<host>-<pid>.<uuid>.tmp`, or
    /// `.<file>.<uuid>.tmp` as earlier versions named them (no owner); nil for any other name.
    static func temporaryName(_ name: String) -> (file: String, owner: (host: String, pid: Int32)?)? {
        guard name.hasPrefix("."), name.hasSuffix(".tmp") else { return nil }
        let inner = name.dropFirst().dropLast(4)
        guard let dot = inner.lastIndex(of: "."), UUID(canonical: String(inner[inner.index(after: dot)...])) != nil
        else { return nil }
        let rest = inner[..<dot]
        if ownedStem(of: String(rest)) != nil { return (String(rest), nil) }
        guard let ownerDot = rest.lastIndex(of: "."), ownedStem(of: String(rest[..<ownerDot])) != nil else {
            return nil
        }
        let owner = rest[rest.index(after: ownerDot)...]
        guard let dash = owner.lastIndex(of: "-"), let pid = Int32(owner[owner.index(after: dash)...]), pid > 0,
            dash > owner.startIndex
        else { return nil }
        return (String(rest[..<ownerDot]), (String(owner[..<dash]), pid))
    }
}
