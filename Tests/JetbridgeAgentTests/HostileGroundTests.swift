import FileQueue
import Foundation
import JetbridgeProtocol
import JetbridgeTestKit
import Synchronization
import Testing

@testable import JetbridgeAgent

/// The built `jetbridge-agent sync`, a separate process, against a hostile ground on real ZeroMQ sockets (CURVE, ZAP):
/// absurd acks and oversized frames neither crash it nor reach its memory, and it ends as it should once the ground
/// answers sanely (issue 23).
@Suite("A hostile ground and the real agent process", .serialized)
struct HostileGroundTests {
    /// An ack frame for `batch`, encoded as the ground would send it.
    static func frame(_ batch: IncomingBatch, _ status: Ack.Status, new: Int? = nil, retryAfter: Double? = nil) -> Data
    {
        let ack = Ack(
            device: batch.header.device, first: batch.header.first, last: batch.header.last, status: status, new: new,
            duplicates: new == nil ? nil : 0, reason: status == .stored ? nil : "hostile", retryAfter: retryAfter)
        return (try? WireCoding.encode(ack)) ?? Data()
    }

    @Test(
        "limited with retryAfter inf, 1e300, 1e19 and stored with new 2^63−1 are logged and ignored; the agent drains")
    func absurdAcks() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        let ids = try sandbox.capture(10)
        let ground = try TestGround { batch, delivery in
            switch delivery {
            case 1: .frame(Self.frame(batch, .limited, retryAfter: .infinity))
            case 2: .frame(Self.frame(batch, .limited, retryAfter: 1e300))
            case 3: .frame(Self.frame(batch, .limited, retryAfter: 1e19))
            case 4: .frame(Self.frame(batch, .stored, new: Int.max))
            default: .store
            }
        }
        defer { ground.stop() }

        let run = try sandbox.startAgent(
            against: ground, arguments: ["--timeout", "60", "--json", "--log-level", "debug"])
        let status = await run.exit(within: .seconds(90))
        let output = run.output
        #expect(run.process.terminationReason == .exit, "the agent died of a signal: \(output)")
        #expect(status == 0, "\(output)")
        #expect(output.contains(#""outcome":"drained""#), "\(output)")
        // What the sane ack said, and nothing of the absurd ones.
        #expect(output.contains(#""acknowledged":10"#), "\(output)")
        #expect(output.contains(#""new":10"#), "\(output)")
        #expect(!output.contains("9223372036854775807,"), "\(output)")
        for problem in ["retryAfter inf", "retryAfter 1e+300", "retryAfter 1e+19", "new 9223372036854775807"] {
            #expect(output.contains(problem), "no warning naming \(problem): \(output)")
        }
        // Each one logged, and a warning only for the first: a ground answering every send must not flood the log.
        let lines = output.split(separator: "\n").filter { $0.contains("ignoring an ack") }
        #expect(lines.count == 4, "\(output)")
        #expect(lines.count { $0.contains(" warning ") } == 1, "\(output)")
        #expect(ground.delivered.withLock { $0.deliveries.values.max() ?? 0 } >= 5)
        #expect(Set(ground.delivered.withLock { $0.records.keys }) == Set(ids))
        #expect(try sandbox.queueStatus().acknowledgedThrough == 10)
    }

    @Test("a frame over 64 KiB from the ground is dropped by libzmq, never in the agent's memory; the agent reconnects")
    func oversizedFrame() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        let ids = try sandbox.capture(10)
        let huge = 128 << 20
        let release = Atomic<Bool>(false)
        let ground = try TestGround { _, delivery in
            if delivery == 1 { return .frame(Data(count: huge)) }
            return release.load(ordering: .relaxed) ? .store : .drop
        }
        defer { ground.stop() }

        let run = try sandbox.startAgent(against: ground, arguments: ["--timeout", "60", "--log-level", "info"])
        // Either the frame reached the agent (it says it is not an ack), or the connection it came on was dropped and
        // the agent is connected again (it says the link is back).
        try await waitUntil("the agent read the frame or connected again", timeout: .seconds(40)) {
            let output = run.output
            return output.contains("not an ack") || output.contains("link to the ground is back")
                || !run.process.isRunning
        }
        let peak = Self.peakResidentBytes(of: run.process.processIdentifier)
        release.store(true, ordering: .relaxed)
        let status = await run.exit(within: .seconds(60))
        let output = run.output
        #expect(run.process.terminationReason == .exit, "the agent died of a signal: \(output)")
        #expect(status == 0, "\(output)")
        #expect(!output.contains("not an ack"), "the frame reached the agent: \(output)")
        #expect(output.contains("link to the ground is back"), "\(output)")
        #expect(peak.map { $0 < huge * 3 / 4 } == true, "the agent's peak resident size: \((peak ?? 0) >> 20) MiB")
        #expect(Set(ground.delivered.withLock { $0.records.keys }) == Set(ids))
        #expect(try sandbox.queueStatus().acknowledgedThrough == 10)
    }

    /// `VmHWM` of a running process: its peak resident set, in bytes; nil when it is gone.
    static func peakResidentBytes(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kilobytes = Int(line.split(whereSeparator: \.isWhitespace).dropFirst().first ?? "")
        else { return nil }
        return kilobytes << 10
    }
}
