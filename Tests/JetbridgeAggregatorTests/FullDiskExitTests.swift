import Foundation
import GRDB
import JetbridgeTestKit
import SystemSupport
import Testing
import ZeroMQ

@testable import JetbridgeAggregator
import JetbridgeStore

#if canImport(Glibc)
    import Glibc
#endif

/// A full disk (or quota) is "try again later" (exit 75) for every command, and one failure for `serve`'s log,
/// whatever file it hit: the one rule of ``FailureClass``.
@Suite("Full disk: one rule, exit 75")
struct FullDiskExitTests {
    /// With a full quota each receipt attempt names a new temporary file; before the one rule, `EDQUOT` was not a
    /// full disk for the log, so every attempt was a new failure and logged.
    @Test func aFullQuotaIsOneFailureWhateverFileItHit() {
        var failures = RepeatedFailure()
        let start = ContinuousClock.now
        let first = StoreError(.fileSystem, "write failed", path: "/r/.17B.txt.1.tmp", errno: EDQUOT)
        let second = StoreError(.fileSystem, "write failed", path: "/r/.17C.txt.2.tmp", errno: EDQUOT)
        #expect(failureKind(first) == "no space left on device")
        #expect(failures.failed("\(first)", kind: failureKind(first), now: start) == .log)
        #expect(failures.failed("\(second)", kind: failureKind(second), now: start + .seconds(1)) == .quiet)
    }

    /// Every error type that can carry a full disk, through the one classifier, and what the operator gets.
    @Test func oneRuleForEveryErrorType() {
        #expect(FailureClass(SystemError("write", path: "/x", errno: ENOSPC)) == .noSpace)
        #expect(FailureClass(SystemError("write", path: "/x", errno: EDQUOT)) == .noSpace)
        #expect(FailureClass(SystemError("write", path: "/x", errno: EACCES)) == .other)
        #expect(FailureClass(StoreError(.fileSystem, "write failed", path: "/r", errno: EDQUOT)) == .noSpace)
        #expect(FailureClass(StoreError(.corruptRow, "bad seat", path: "seat")) == .other)
        #expect(FailureClass(DatabaseError(resultCode: .SQLITE_FULL)) == .noSpace)
        #expect(FailureClass(DatabaseError(resultCode: .SQLITE_BUSY)) == .busy)
        #expect(FailureClass(DatabaseError(resultCode: .SQLITE_LOCKED)) == .busy)
        #expect(FailureClass(DatabaseError(resultCode: .SQLITE_IOERR)) == .other)
        #expect(FailureClass(PostgresStoreError("could not extend file", sqlState: "53100")) == .noSpace)
        #expect(FailureClass(PostgresStoreError("syntax", sqlState: "42601")) == .other)
        #expect(FailureClass(CocoaError(.fileWriteOutOfSpace)) == .noSpace)
        #expect(FailureClass(CocoaError(.fileWriteNoPermission)) == .other)
        let quota = AggregatorError(
            temporary: SystemError("write", path: "/g/devices.json", errno: EDQUOT),
            context: "cannot write /g/devices.json")
        #expect(quota?.exitCode == 75)
        #expect(
            quota?.message.hasPrefix("cannot write /g/devices.json: no space left on device; free some space") == true)
        #expect(AggregatorError(temporary: SystemError("write", errno: EACCES), context: "x") == nil)
        // Opening the store: busy and full are 75, anything else 69, as before.
        #expect(AggregatorServer.storeError(DatabaseError(resultCode: .SQLITE_FULL), path: "/s").exitCode == 75)
        #expect(AggregatorServer.storeError(DatabaseError(resultCode: .SQLITE_BUSY), path: "/s").exitCode == 75)
        #expect(AggregatorServer.storeError(DatabaseError(resultCode: .SQLITE_CORRUPT), path: "/s").exitCode == 69)
    }

    /// A real full disk: `keys generate` and `devices allow` into a home on a full tmpfs, and `receipts rebuild`
    /// into a full receipts directory, each exit 75 and say to free space (before: exit 1).
    @Test(.enabled(if: SmallFileSystem.available, "mounting a tmpfs needs root; skipped here"))
    func everyCommandExits75OnAFullDisk() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let store = try fixture.open()
        _ = try store.apply([batch("cart-1", 1, [order(1, lines: [(chips, 2)])])])
        try store.close()
        let disk = fixture.directory.appendingPathComponent("disk")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        try #require(SmallFileSystem.mount(at: disk.path, size: "256k"))
        defer { SmallFileSystem.unmount(disk.path) }
        // The receipts directory and a second home live on the tmpfs; then it is filled.
        try FileManager.default.createDirectory(
            at: disk.appendingPathComponent("receipts"), withIntermediateDirectories: true)
        let ground = disk.appendingPathComponent("ground")
        try FileManager.default.createDirectory(
            at: ground.appendingPathComponent("keys"), withIntermediateDirectories: true)
        try SmallFileSystem.fill(disk)

        let keys = try AggregatorCLITests.run(["--home", ground.path, "keys", "generate"], in: fixture.directory)
        #expect(keys.status == 75, "\(keys)")
        #expect(keys.stderr.contains("no space left on device; free some space and try again"), "\(keys)")
        let key = try CurveKeyPair.generate().publicKeyZ85
        let allow = try AggregatorCLITests.run(
            ["--home", ground.path, "devices", "allow", "--", "cart-1", key], in: fixture.directory)
        #expect(allow.status == 75, "\(allow)")
        let configuration = fixture.directory.appendingPathComponent("aggregator.json")
        try Data(#"{"receipts": "\#(disk.path)/receipts"}"#.utf8).write(to: configuration)
        let rebuild = try AggregatorCLITests.run(
            ["--home", fixture.directory.path, "--config", configuration.path, "receipts", "rebuild"],
            in: fixture.directory)
        #expect(rebuild.status == 75, "\(rebuild)")
        #expect(rebuild.stderr.contains("free some space and try again"), "\(rebuild)")
    }
}
