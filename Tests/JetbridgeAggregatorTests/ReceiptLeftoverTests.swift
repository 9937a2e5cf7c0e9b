import Foundation
import JetbridgeTestKit
import Logging
import SystemSupport
import Testing

@testable import JetbridgeAggregator

#if canImport(Glibc)
    import Glibc
#endif

/// The receipt writer's temporary files carry their writer (`.<file>.<host>-<pid>.<uuid>.tmp`), so that `serve`
/// removes the ones a killed writer left without touching another live aggregator's in a shared directory.
@Suite("Receipts: leftover temporary files")
struct ReceiptLeftoverTests {
    static let stem = "ZA101_2026-11-21_17B"

    /// The pid of a process that has exited.
    static func deadPID() throws -> Int32 {
        try ChildProcess.run(URL(fileURLWithPath: "/bin/true")).processIdentifier
    }

    @Test func onlyLeftoversAreRemoved() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let directory = fixture.receipts
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let host = ThisProcess.hostLabel
        let dead = try Self.deadPID()
        func name(_ file: String, _ owner: String?) -> String {
            ".\(file).\(owner.map { "\($0)." } ?? "")\(UUID().uuidString).tmp"
        }
        let removed = [
            name("\(Self.stem).txt", "\(host)-\(dead)"),  // this host, process gone
            name("\(Self.stem).json", "\(host)-\(getpid())"),  // this pid: an earlier process's
            name("\(Self.stem).txt", "other-host-12"),  // another host's, old
            name("\(Self.stem).json", nil),  // an older writer's name, old
        ]
        let kept = [
            "\(Self.stem).txt", "notes.tmp", ".\(Self.stem).txt.tmp",
            name("\(Self.stem).txt", "\(host)-\(getppid())"),  // a live process on this host
            name("\(Self.stem).txt", "other-host-12"),  // another host's, fresh
            name("\(Self.stem).json", nil),  // an older writer's name, fresh
        ]
        for file in removed + kept {
            try Data("x".utf8).write(to: directory.appendingPathComponent(file))
        }
        // Old: an hour ago.
        let old = Date().addingTimeInterval(-3600)
        for file in removed[2...] {
            try FileManager.default.setAttributes(
                [.modificationDate: old], ofItemAtPath: directory.appendingPathComponent(file).path)
        }
        #expect(try fixture.writer().removeLeftovers() == removed.count)
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: directory.path)) == Set(kept))
        #expect(try fixture.writer().removeLeftovers() == 0)
    }

    @Test func temporaryNamesCarryTheirWriter() throws {
        let parsed = try #require(
            ReceiptWriter.temporaryName(".\(Self.stem).txt.cart-host-7-42.\(UUID().uuidString).tmp"))
        #expect(parsed.file == "\(Self.stem).txt")
        #expect(parsed.owner?.host == "cart-host-7" && parsed.owner?.pid == 42)
        #expect(ReceiptWriter.temporaryName(".\(Self.stem).txt.\(UUID().uuidString).tmp")?.owner == nil)
        #expect(ReceiptWriter.isTemporary(".\(Self.stem).txt.\(UUID().uuidString).tmp"))
        for name in [
            ".\(Self.stem).txt.host.\(UUID().uuidString).tmp", ".\(Self.stem).txt.host-0.\(UUID().uuidString).tmp",
            ".\(Self.stem).txt.-4.\(UUID().uuidString).tmp", ".notes.txt.host-4.\(UUID().uuidString).tmp",
            ".\(Self.stem).txt.host-4.not-a-uuid.tmp",
        ] {
            #expect(ReceiptWriter.temporaryName(name) == nil, "\(name)")
        }
        #expect(!ThisProcess.hostLabel.contains(".") && !ThisProcess.hostLabel.isEmpty)
    }
}
