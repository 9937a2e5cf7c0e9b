import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeTestKit
import JetbridgeModel
import JetbridgeProtocol
import Logging
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Kills a real process with SIGKILL while it applies batches, then checks the store it left: every acknowledged
/// batch is there, no transaction is there in part, and the receipt marks still describe every seat.
@Suite("Crash: SIGKILL in the middle of apply")
struct CrashTests {
    static let childVariable = "JETBRIDGE_STORE_CRASH_CHILD"
    static let childDirectory = ProcessInfo.processInfo.environment[childVariable]
    static let batchesPerTransaction = 4
    static let recordsPerBatch = 50

    /// The records of one batch: device `cart-<b>`, transaction `t`; half orders, half scans of distinct bags.
    static func records(transaction t: Int, batch b: Int) -> [Record] {
        (0..<recordsPerBatch).map { i in
            let n = (t * batchesPerTransaction + b) * recordsPerBatch + i
            return n % 2 == 0
                ? order(n, seat: "\(n % 30 + 1)\(["A", "B", "C"][n % 3])", device: "cart-\(b)", at: Double(n))
                : scan(n, tag: n, device: "cart-\(b)", at: Double(n))
        }
    }

    static func batches(transaction t: Int) -> [IncomingBatch] {
        (0..<batchesPerTransaction).map { b in
            batch("cart-\(b)", UInt64(t * recordsPerBatch + 1), records(transaction: t, batch: b))
        }
    }

    /// The child: applies transactions forever and writes `ACK <transaction>` after each commit, as the aggregator
    /// acks after its commit. Runs only inside the process the test below starts.
    @Test(.enabled(if: childDirectory != nil)) func crashChild() throws {
        let directory = URL(fileURLWithPath: Self.childDirectory!)
        let store = try SQLiteStore(
            path: directory.appendingPathComponent(SQLiteStore.fileName).path, logger: Logger(label: "crash-child"))
        var transaction = 0
        while true {
            _ = try store.apply(Self.batches(transaction: transaction))
            FileHandle.standardOutput.write(Data("ACK \(transaction)\n".utf8))
            transaction += 1
        }
    }

    @Test func killedMidApplyKeepsEveryAckedBatchAndNoPartialTransaction() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let output = Pipe()
        let child = try ChildProcess(
            URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")),
            ["--testing-library", "swift-testing", "--filter", "crashChild"],
            environment: ProcessInfo.processInfo.environment.merging([Self.childVariable: fixture.directory.path]) {
                $1
            }, stdout: .pipe(output), stderr: .null)

        // Let it commit a few transactions, then kill it without warning while it is inside the next one.
        var text = ""
        var acked = -1
        while acked < 5 {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
            acked =
                text.split(separator: "\n").compactMap { $0.hasPrefix("ACK ") ? Int($0.dropFirst(4)) : nil }.max()
                ?? -1
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        try #require(acked >= 5, "the child acked nothing; its output: \(text.suffix(2_000))")

        let store = try fixture.open()
        let perTransaction = Self.batchesPerTransaction * Self.recordsPerBatch
        let stored = try store.orders().count + store.bags().count
        #expect(stored % perTransaction == 0, "a transaction is stored in part: \(stored) records")
        #expect(stored >= (acked + 1) * perTransaction, "an acked transaction is missing")
        let devices = try store.deviceReport().devices
        #expect(devices.reduce(0) { $0 + $1.records } == stored)
        #expect(devices.reduce(0) { $0 + $1.new } == stored)

        // Receipts were never written; the marks made with each commit bring them up to date.
        try fixture.writer().refreshDirty(store)
        let expected = try Receipt.all(orders: store.orders())
        #expect(!expected.isEmpty)
        for receipt in expected {
            let text = try String(
                contentsOf: fixture.receipts.appendingPathComponent(receipt.fileStem + ".txt"), encoding: .utf8)
            #expect(text == receipt.text)
        }

        // Every acked transaction, delivered again, is all duplicates.
        for transaction in 0...acked {
            let outcomes = try store.apply(Self.batches(transaction: transaction))
            #expect(outcomes.allSatisfy { $0.new == 0 && $0.duplicates == Self.recordsPerBatch })
        }
    }
}
