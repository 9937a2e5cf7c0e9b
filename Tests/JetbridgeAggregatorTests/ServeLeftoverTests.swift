import Foundation
import JetbridgeAggregator
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serve` clears the temporary receipt files a killed writer left (issue 23 item 11: a killed aggregator left 1–5
/// per run, and only `receipts rebuild` removed them), and leaves alone those another live aggregator may be writing
/// in a shared directory.
@Suite("serve: leftover temporary receipt files")
struct ServeLeftoverTests {
    @Test func serveRemovesLeftoverTemporaryReceiptFilesAtStart() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let receipts = fixture.directory.appendingPathComponent("a/receipts")
        try FileManager.default.createDirectory(at: receipts, withIntermediateDirectories: true)
        let stem = "ZA101_2026-11-21_17B"
        // A process that has exited: its pid names a writer that is gone.
        let gone = try ChildProcess.run(URL(fileURLWithPath: "/bin/true"))
        var hostName = [CChar](repeating: 0, count: 256)
        gethostname(&hostName, 255)
        let label = String(
            String(decoding: hostName.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).prefix(64).map {
                $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") ? $0 : "-"
            })
        let leftovers = [
            ".\(stem).txt.\(label)-\(gone.processIdentifier).\(UUID().uuidString).tmp",
            ".\(stem).json.\(UUID().uuidString).tmp",  // an older name, an hour old
        ]
        let live = [
            ".\(stem).txt.\(label)-\(getpid()).\(UUID().uuidString).tmp",  // this test process: alive
            ".\(stem).json.other-host-9.\(UUID().uuidString).tmp",  // another host's, fresh
            "\(stem).txt",
        ]
        for name in leftovers + live { try Data("x".utf8).write(to: receipts.appendingPathComponent(name)) }
        try FileManager.default.setAttributes(
            [.modificationDate: Date().addingTimeInterval(-3600)],
            ofItemAtPath: receipts.appendingPathComponent(leftovers[1]).path)
        let serve = try await ServeProcess(store: "jetbridge.sqlite", in: fixture.directory, name: "a")
        try await waitUntil("serve removed the leftovers") {
            leftovers.allSatisfy { !FileManager.default.fileExists(atPath: receipts.appendingPathComponent($0).path) }
        }
        for name in live {
            #expect(FileManager.default.fileExists(atPath: receipts.appendingPathComponent(name).path), "\(name)")
        }
        #expect(serve.count("removed temporary receipt files a stopped writer left") == 1, "\(serve.logText)")
        try await serve.stop()
        #expect(serve.process.terminationStatus == 0)
    }
}
