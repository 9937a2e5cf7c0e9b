import Foundation
import JetbridgeTestKit
import Testing

@testable import JetbridgeAgent

/// Files the agent keeps that are absent read as "none"; files that cannot be examined are errors. The tests run as
/// root, which no permission stops, so a file where a directory of the path belongs (`ENOTDIR`) stands in for a
/// directory this user may not read (`EACCES`): both are errors other than "does not exist", on the same code path
/// (`FileSystem.isPresent`). Before, both read through `FileManager.fileExists`, which answers false to them.
@Suite("What the agent cannot examine is an error, not absent")
struct UnreadableFilesTests {
    @Test func theSyncStateThatCannotBeExaminedIsNotNeverSynced() throws {
        let directory = try TemporaryDirectory()
        #expect(try SyncState.load(from: directory.url.appendingPathComponent("sync-state.json")) == nil)
        let file = directory.url.appendingPathComponent("home")
        try Data("a file where the home belongs".utf8).write(to: file)
        #expect(throws: AgentError.self) { try SyncState.load(from: file.appendingPathComponent("sync-state.json")) }
    }

    @Test func aLedgerThatCannotBeExaminedIsNotAnOrderNeverTaken() throws {
        let directory = try TemporaryDirectory()
        let id = UUID()
        #expect(try OrderLedger(directory: directory.url.appendingPathComponent("orders")).read(id: id) == nil)
        let file = directory.url.appendingPathComponent("orders")
        try Data("a file where the ledger belongs".utf8).write(to: file)
        let error = #expect(throws: AgentError.self) { try OrderLedger(directory: file).read(id: id) }
        #expect(error?.message.contains("Not a directory") == true, "\(String(describing: error))")
    }
}
