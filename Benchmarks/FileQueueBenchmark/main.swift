// filequeue-benchmark: durable appends against a plain write+fsync loop, group commit, sequential read.
// Run: swift build -c release --product filequeue-benchmark && .build/release/filequeue-benchmark [DIR]
import FileQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

let recordSize = 250
let singleCount = 3000
let bulkCount = 1_000_000
let bulkBatch = 10_000

func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
}

let base = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : FileManager.default.currentDirectoryPath
let root = URL(fileURLWithPath: base).appendingPathComponent(".filequeue-benchmark-\(getpid())")
try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: root) }

let record = Data((0..<recordSize).map { UInt8(truncatingIfNeeded: $0 &* 31) })

/// A plain loop: append 250 bytes to a file with write(2), then fsync(2).
func baseline(_ run: Int) -> (perSecond: Double, p50: Double, p99: Double) {
    let path = root.appendingPathComponent("baseline-\(run)").path
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0o644)
    precondition(fd >= 0)
    defer {
        close(fd)
        unlink(path)
    }
    var latencies: [UInt64] = []
    latencies.reserveCapacity(singleCount)
    let start = now()
    record.withUnsafeBytes { bytes in
        for _ in 0..<singleCount {
            let t0 = now()
            precondition(write(fd, bytes.baseAddress, bytes.count) == bytes.count)
            precondition(fsync(fd) == 0)
            latencies.append(now() - t0)
        }
    }
    let elapsed = now() - start
    latencies.sort()
    return (Double(singleCount) / seconds(elapsed), percentile(latencies, 0.5), percentile(latencies, 0.99))
}

func durableAppends(_ run: Int) throws -> (perSecond: Double, p50: Double, p99: Double) {
    let directory = root.appendingPathComponent("single-\(run)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let queue = try FileQueue(directory: directory)
    var latencies: [UInt64] = []
    latencies.reserveCapacity(singleCount)
    let start = now()
    for _ in 0..<singleCount {
        let t0 = now()
        try queue.append(record)
        latencies.append(now() - t0)
    }
    let elapsed = now() - start
    latencies.sort()
    return (Double(singleCount) / seconds(elapsed), percentile(latencies, 0.5), percentile(latencies, 0.99))
}

print("FileQueue benchmark — \(recordSize)-byte records, directory \(root.path)")
print("CRC32C: \(CRC32C.isHardwareAccelerated ? "SSE4.2 instruction" : "table")")
print("")
print("durable single appends (\(singleCount) per run, interleaved with the baseline)")
print("  run  write+fsync/s   p50 µs   p99 µs │ FileQueue.append/s   p50 µs   p99 µs │ ratio")
var ratios: [Double] = []
for run in 1...3 {
    let plain = baseline(run)
    let queue = try durableAppends(run)
    let ratio = queue.perSecond / plain.perSecond
    ratios.append(ratio)
    print(
        String(
            format: "  %3d  %13.0f %8.1f %8.1f │ %18.0f %8.1f %8.1f │ %5.2f×", run, plain.perSecond, plain.p50,
            plain.p99, queue.perSecond, queue.p50, queue.p99, ratio))
}
print(String(format: "  median ratio %.2f× (target ≥ 0.80×)", ratios.sorted()[1]))
print("")

// Group commit: append(contentsOf:) = one write and one fdatasync per segment touched.
func bulk(_ name: String, batchSize: Int, segmentSize: Int, sync: FileQueue.SyncPolicy) throws -> URL {
    let directory = root.appendingPathComponent(name)
    try? FileManager.default.removeItem(at: directory)
    let configuration = FileQueue.Configuration(segmentSize: segmentSize, syncPolicy: sync)
    let queue = try FileQueue(directory: directory, configuration: configuration)
    let batch = [Data](repeating: record, count: batchSize)
    let start = now()
    for _ in 0..<(bulkCount / batchSize) {
        try queue.append(contentsOf: batch)
    }
    let elapsed = now() - start
    print(
        String(
            format: "  %-44@ %10.0f records/s %7.0f MB/s",
            "\(batchSize)/call, \(segmentSize >> 20) MiB segments, sync \(sync)"
                as NSString, Double(bulkCount) / seconds(elapsed),
            Double(bulkCount * (recordSize + 24)) / seconds(elapsed) / 1e6))
    return directory
}

/// The disk alone: the same bytes written in `chunk`-byte writes, each followed by fdatasync.
func diskBaseline(chunk: Int) {
    let path = root.appendingPathComponent("disk").path
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    precondition(fd >= 0)
    defer {
        close(fd)
        unlink(path)
    }
    let bytes = [UInt8](repeating: 0x5A, count: chunk)
    let total = bulkCount * (recordSize + 24)
    let start = now()
    var written = 0
    while written < total {
        precondition(write(fd, bytes, chunk) == chunk)
        precondition(fdatasync(fd) == 0)
        written += chunk
    }
    let elapsed = now() - start
    print(
        String(
            format: "  %-44@ %10.0f records/s %7.0f MB/s", "plain write+fdatasync of \(chunk >> 10) KiB" as NSString,
            Double(bulkCount) / seconds(elapsed), Double(total) / seconds(elapsed) / 1e6))
}

print("bulk appends of \(bulkCount) records (target ≥ 1,000,000 records/s)")
_ = try bulk("bulk-nosync", batchSize: 10_000, segmentSize: 8 << 20, sync: .none)
diskBaseline(chunk: 10_000 * (recordSize + 24))
_ = try bulk("bulk-10k", batchSize: 10_000, segmentSize: 8 << 20, sync: .always)
diskBaseline(chunk: 100_000 * (recordSize + 24))
let bulkDirectory = try bulk("bulk-100k", batchSize: 100_000, segmentSize: 64 << 20, sync: .always)
print("")

// Sequential read from fresh instances (files in the page cache, as for a sync right after capture).
print("sequential read, checksums verified, 10,000 records per call (target ≥ 2,000,000 records/s)")
for run in 1...3 {
    let readQueue = try FileQueue(directory: bulkDirectory)
    let start = now()
    var next: UInt64 = 1
    var total = 0
    var payloadBytes = 0
    while true {
        let records = try readQueue.read(from: next, maxRecords: 10_000, maxBytes: 16 << 20)
        guard let last = records.last else { break }
        total += records.count
        payloadBytes += records.reduce(0) { $0 + $1.payload.count }
        next = last.sequence + 1
    }
    let elapsed = now() - start
    precondition(total == bulkCount && payloadBytes == bulkCount * recordSize)
    print(String(format: "  run %d %10.0f records/s", run, Double(total) / seconds(elapsed)))
}
