import FileQueue
import Foundation
import JetbridgeProtocol
import JetbridgeTestKit
import Synchronization
import Testing
import ZeroMQ

@testable import JetbridgeAgent

#if canImport(Glibc)
    import Glibc
#endif

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
        try sandbox.capture(10)
        let huge = 128 << 20
        // The ground is a process of its own: its 128 MiB (and their ciphertext) must not count in this process, where
        // other tests measure the memory of the servers they run.
        let serverKeys = try CurveKeyPair.generate()
        let ground = try ExecutableRun(
            "zeromq-test-peer", ["big-ack-ground", serverKeys.publicKeyZ85, serverKeys.secretKeyZ85, "\(huge)"],
            in: sandbox.directory)
        defer {
            // SIGKILL: a child started from a test's thread inherits its blocked SIGTERM.
            kill(ground.process.processIdentifier, SIGKILL)
            ground.process.waitUntilExit()
        }
        try await waitUntil("the ground listens") { ground.output.contains("listening") || !ground.process.isRunning }
        let endpoints = try #require(ground.output.split(separator: "\n").first { $0.hasPrefix("listening ") })
            .split(separator: " ").map(String.init)
        try #require(endpoints.count == 3, "\(ground.output)")

        let run = try sandbox.startAgent(
            data: endpoints[1], acks: endpoints[2], serverPublicKeyZ85: serverKeys.publicKeyZ85,
            deviceKeys: try CurveKeyPair.generate(), arguments: ["--timeout", "60", "--log-level", "info"])
        defer { if run.process.isRunning { run.process.terminate() } }
        // Either the frame reached the agent (it says it is not an ack), or the connection it came on was dropped and
        // the agent is connected again (it says the link is back).
        try await waitUntil("the ground sent the frame and the agent read it or connected again", timeout: .seconds(60))
        {
            let output = run.output
            return ground.output.contains("sent")
                && (output.contains("not an ack") || output.contains("link to the ground is back"))
                || !run.process.isRunning
        }
        let peak = Self.peakResidentBytes(of: run.process.processIdentifier)
        run.process.terminate()
        let status = await run.exit(within: .seconds(30))
        let output = run.output
        #expect(ground.output.contains("sent"), "\(ground.output)")
        #expect(run.process.terminationReason == .exit, "the agent died of a signal: \(output)")
        #expect(status == 75, "stopped by SIGTERM with the batch unacknowledged: \(output)")
        #expect(!output.contains("not an ack"), "the frame reached the agent: \(output)")
        #expect(output.contains("link to the ground is back"), "\(output)")
        #expect(peak.map { $0 < huge * 3 / 4 } == true, "the agent's peak resident size: \((peak ?? 0) >> 20) MiB")
    }

    @Test("a message of two frames is not an ack, even when its last frame is one: ignored, the batch goes again")
    func twoFrames() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        let ids = try sandbox.capture(10)
        let ground = try TestGround { batch, delivery in
            guard delivery == 1 else { return .store }
            return .frames([Data("junk".utf8), Self.frame(batch, .stored, new: 10)])
        }
        defer { ground.stop() }

        let run = try sandbox.startAgent(against: ground, arguments: ["--timeout", "60"])
        let status = await run.exit(within: .seconds(90))
        let output = run.output
        #expect(status == 0, "\(output)")
        #expect(output.contains("not an ack (2 frames)"), "\(output)")
        #expect(ground.delivered.withLock { $0.deliveries.values.max() ?? 0 } >= 2)
        #expect(Set(ground.delivered.withLock { $0.records.keys }) == Set(ids))
        #expect(try sandbox.queueStatus().acknowledgedThrough == 10)
    }

    @Test("the PUSH takes no message over 64 KiB either: a data-side peer's 128 MiB never reaches the agent's memory")
    func oversizedOnThePush() async throws {
        let sandbox = try SyncSandbox()
        defer { sandbox.remove() }
        try sandbox.capture(10)
        let huge = 128 << 20
        let peer = try RawPullPeer(sending: huge)
        try Data(#"{"device": "cart-1"}"#.utf8).write(to: sandbox.home.url.appendingPathComponent("agent.json"))
        // Plaintext, so that the peer can speak ZMTP by hand; nothing listens on the ack endpoint.
        let run = try ExecutableRun(
            "jetbridge-agent",
            [
                "--home", sandbox.home.url.path, "sync", "--insecure", "--to", "tcp://127.0.0.1:\(peer.port)",
                "--acks", "ipc://\(sandbox.directory.path)/acks", "--until-drained", "--timeout", "4",
            ], in: sandbox.directory)
        var peak: Int?
        while run.process.isRunning {
            // The high-water mark only grows: its last reading is the agent's peak.
            peak = Self.peakResidentBytes(of: run.process.processIdentifier) ?? peak
            try await Task.sleep(for: .milliseconds(20))
        }
        let status = await run.exit(within: .seconds(30))
        let sent = peer.stop()
        #expect(sent.handshake, "the agent's PUSH did not complete a ZMTP handshake with the peer")
        #expect(run.process.terminationReason == .exit, "the agent died of a signal: \(run.output)")
        #expect(status == 75, "\(run.output)")
        #expect(sent.bytes < huge, "the agent read all \(sent.bytes) bytes")
        #expect(peak.map { $0 < huge * 3 / 4 } == true, "the agent's peak resident size: \((peak ?? 0) >> 20) MiB")
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

/// A hostile "ground" on the data channel that speaks ZMTP 3.0 by hand (NULL mechanism, as a `PULL`), which libzmq
/// cannot: after the handshake it sends the agent's `PUSH` one message of `size` bytes, then stops when the agent ends
/// the connection or everything is written.
final class RawPullPeer: Sendable {
    struct Sent: Sendable {
        var handshake = false
        var bytes = 0
    }

    let port: UInt16
    private let listener: Int32
    private let sent = Mutex(Sent())
    private let done = Atomic<Bool>(false)
    private let connection = Atomic<Int32>(-1)

    init(sending size: Int) throws {
        let listener = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.bind(listener, $0, length) == 0 && listen(listener, 4) == 0
                    && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound, "cannot listen on 127.0.0.1: errno \(errno)")
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in serve(size: size) }
        thread.name = "raw-pull-peer"
        thread.start()
    }

    /// Ends the connection and waits for the thread. - Returns: What was sent.
    func stop() -> Sent {
        shutdown(listener, Int32(SHUT_RDWR))
        let socket = connection.load(ordering: .relaxed)
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
        while !done.load(ordering: .relaxed) { usleep(1000) }
        close(listener)
        return sent.withLock { $0 }
    }

    private func serve(size: Int) {
        defer { done.store(true, ordering: .relaxed) }
        let socket = accept(listener, nil, nil)
        guard socket >= 0 else { return }
        connection.store(socket, ordering: .relaxed)
        defer { close(socket) }
        // Greeting: signature, version 3.0, mechanism NULL, not as-server, filler.
        var greeting = [UInt8](repeating: 0, count: 64)
        greeting[0] = 0xFF
        greeting[9] = 0x7F
        greeting[10] = 3
        for (offset, byte) in "NULL".utf8.enumerated() { greeting[12 + offset] = byte }
        guard write(socket, greeting), read(socket, count: 64) != nil,
            let header = read(socket, count: 2), header[0] & 0x04 != 0
        else { return }
        // The agent's READY, then ours: Socket-Type PULL.
        let bodySize = header[0] & 0x02 != 0 ? nil : Int(header[1])
        guard let bodySize, read(socket, count: bodySize) != nil else { return }
        var ready: [UInt8] = [5] + Array("READY".utf8) + [11] + Array("Socket-Type".utf8) + [0, 0, 0, 4]
        ready += Array("PULL".utf8)
        guard write(socket, [0x04, UInt8(ready.count)] + ready) else { return }
        sent.withLock { $0.handshake = true }
        // One message frame, long form: flags, 8-byte size, then the bytes.
        var frame: [UInt8] = [0x02]
        frame += withUnsafeBytes(of: UInt64(size).bigEndian) { Array($0) }
        guard write(socket, frame) else { return }
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        var left = size
        while left > 0 {
            let count = chunk.withUnsafeBytes { send(socket, $0.baseAddress, min(left, $0.count), Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return }
            left -= count
            sent.withLock { $0.bytes += count }
        }
    }

    private func write(_ socket: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    private func read(_ socket: Int32, count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let got = bytes[offset...].withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { return nil }
            offset += got
        }
        return bytes
    }
}
