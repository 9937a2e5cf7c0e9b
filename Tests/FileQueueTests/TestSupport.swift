import FileQueue
import Foundation
import JetbridgeTestKit
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension TemporaryDirectory {
    /// The queue directory these tests use inside the test's directory.
    var queue: URL { url.appendingPathComponent("queue") }
}

/// The payload of test record `index`: readable, and self-checking so a part of one is never mistaken for one.
func payload(_ index: Int, size: Int = 40, prefix: String = "r") -> Data {
    let head = "\(prefix):\(index):"
    return Data((head + String(repeating: ".", count: max(0, size - head.utf8.count))).utf8)
}

/// Parses a payload made by `payload(_:size:prefix:)` (or `jetbridge-queue append --count`).
func parsePayload(_ data: Data) -> (prefix: String, index: Int)? {
    guard let text = String(data: data, encoding: .utf8) else { return nil }
    let parts = text.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count == 3, let index = Int(parts[1]), parts[2].allSatisfy({ $0 == "." }) else { return nil }
    return (String(parts[0]), index)
}

/// Every record from `sequence` on.
func readAll(_ queue: FileQueue, from sequence: UInt64 = 1) throws -> [FileQueue.Record] {
    var records: [FileQueue.Record] = []
    var next = sequence
    while true {
        let batch = try queue.read(from: next, maxRecords: 500)
        guard let last = batch.last else { return records }
        records += batch
        next = last.sequence + 1
    }
}

/// The built `jetbridge-queue`, next to the test bundle in the build directory.
let jetbridgeQueueExecutable = BuiltExecutable.expectedURL("jetbridge-queue")

/// Runs `jetbridge-queue` to completion.
@discardableResult
func runTool(_ arguments: [String]) throws -> (status: Int32, signaled: Bool, output: String) {
    let finished = try ExecutableRun.run(
        jetbridgeQueueExecutable, arguments, in: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
    return (finished.status, finished.signaled, finished.stdout)
}

/// Copies a file tree (for re-running a damage test from pristine bytes).
func copyDirectory(_ from: URL, to: URL) throws {
    try? FileManager.default.removeItem(at: to)
    try FileManager.default.copyItem(at: from, to: to)
}

func segmentFiles(_ directory: URL) throws -> [URL] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".seg") }.sorted()
        .map { directory.appendingPathComponent($0) }
}
