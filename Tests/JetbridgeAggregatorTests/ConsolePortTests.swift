import Foundation
import JetbridgeTestKit
import Testing

@testable import JetbridgeAggregator

#if canImport(Glibc)
    import Glibc
#endif

/// The hostile-input rules on the console's port (issue 26, item 4): a real `serve --console` process, attacked over
/// real sockets (``RawTCP``, the metrics port's client) with a 1 MiB header, a client sending a byte a second, a
/// thousand connections opened at once (once the slow client is closed: they would close it first, to make room) and
/// huge bodies on the sign-in form. Each is bounded (a
/// 4xx answer or the connection closed, in bounded time), serve's memory (VmRSS) stays bounded, the console still
/// answers a signed-in script, and a real `jetbridge-agent sync` meanwhile delivers every record.
@Suite("Console: the port's limits", .serialized)
struct ConsolePortTests {
    /// How long the server may take to end a hostile request: the 10 s request timeout, and slack for a loaded machine.
    static let bound: Duration = .seconds(30)

    /// The first answer's status on `connection`, or nil when it was closed without one.
    static func status(_ connection: RawTCP) -> Int? {
        guard let answer = try? connection.readResponse() else { return nil }
        return answer.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }

    @Test func hugeHeadersSlowClientsAThousandConnectionsAndHugeBodiesAreBoundedWhileDevicesSync() async throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let serve = try await ServeProcess(store: fixture.storePath, in: fixture.directory, name: "a", console: true)
        let console = try #require(serve.consoleEndpoint)
        let token = try ConsoleSignInTests.token(in: serve)
        let bearer = ["Authorization: Bearer \(token)"]
        let pid = serve.process.processIdentifier
        let scans = 200
        let cart = try ProofOfDeliveryEndToEndTests.Agent(
            device: "ramp-1", serve: serve, in: fixture.directory, confirm: false)
        try await cart.capture(scans: scans)

        // Warm: every page and endpoint answered once; then the baseline.
        for path in ["/", "/devices", "/api/flights", "/api/devices", "/sign-in"] {
            #expect(try await ConsoleSignInTests.get(console, path, bearer).status == 200, "\(path)")
        }
        let before = try residentKilobytes(of: pid)

        // 1. A 1 MiB header: refused (400) once past the 16 KiB head limit and closed (the kernel's buffers take the rest).
        // On threads of their own: the clients block.
        let bigHeader = Task {
            try await onOwnThread { () throws -> (sent: Int, status: Int?, closed: Bool) in
                let connection = try RawTCP(console)
                defer { connection.close() }
                let head =
                    Array("GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".utf8)
                    + Array(repeating: UInt8(ascii: "a"), count: 1 << 20)
                let sent = connection.sendAll(head + Array("\r\n\r\n".utf8), stallAfter: .seconds(5))
                let status = Self.status(connection)
                try waitUntilBlocking("the 1 MiB header's connection closes", timeout: Self.bound) {
                    connection.serverSideIsClosed
                }
                return (sent, status, true)
            }
        }

        // 2. Slowloris: a head sent a byte a second never completes; the connection is closed at the request timeout.
        let slow = Task {
            try await onOwnThread { () throws -> (bytes: Int, seconds: Double) in
                let connection = try RawTCP(console)
                defer { connection.close() }
                let start = ContinuousClock.now
                let head =
                    Array("GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ".utf8)
                    + Array(repeating: UInt8(ascii: "a"), count: 120)
                var sent = 0
                for byte in head {
                    if connection.serverSideIsClosed || (try? connection.send(bytes: [byte])) == nil { break }
                    sent += 1
                    guard ContinuousClock.now - start < Self.bound else { break }
                    usleep(1_000_000)
                }
                let elapsed = ContinuousClock.now - start
                return (sent, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
            }
        }

        // 3. Huge bodies on the sign-in form: announced (100 MiB) and chunked without a length; each 413 or closed
        // after at most a few reads, never read in full.
        let hugeBodies = Task {
            try await onOwnThread { () throws -> [(sent: Int, status: Int?)] in
                var results: [(Int, Int?)] = []
                let chunk = Array(repeating: UInt8(ascii: "a"), count: 1 << 20)
                for chunked in [false, true] {
                    let connection = try RawTCP(console)
                    defer { connection.close() }
                    let head =
                        chunked
                        ? "POST /sign-in HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        : "POST /sign-in HTTP/1.1\r\nHost: x\r\nContent-Length: \(100 << 20)\r\n\r\n"
                    try connection.send(head)
                    var sent = 0
                    for _ in 0..<100 {
                        let piece = chunked ? Array("100000\r\n".utf8) + chunk + Array("\r\n".utf8) : chunk
                        let written = connection.sendAll(piece, stallAfter: .seconds(3))
                        sent += written
                        if written < piece.count { break }
                    }
                    results.append((sent, Self.status(connection)))
                    try waitUntilBlocking("the huge body's connection closes", timeout: Self.bound) {
                        connection.serverSideIsClosed
                    }
                }
                return results
            }
        }

        // Meanwhile: a real device syncs every record.
        var (code, output) = try await cart.sync()
        #expect(code == 0, "\(output)")
        let slowloris = try await slow.value
        #expect(slowloris.bytes < 40, "a byte a second was taken for \(slowloris.bytes) s")

        // 4. Then a thousand connections at once, each with half a request: the server holds at most its cap of 128.
        let held = try await onOwnThread {
            (0..<1_000).compactMap { _ -> RawTCP? in
                let connection = try? RawTCP(console, connectTimeout: 2)
                try? connection?.send("GET /api/flights HTTP/1.1\r\n")
                return connection
            }
        }
        defer { for connection in held { connection.close() } }

        // A device syncs through that too.
        try await cart.capture(scans: scans)
        (code, output) = try await cart.sync()
        #expect(code == 0, "\(output)")
        let flights = try await ConsoleSignInTests.get(console, "/api/flights", bearer)
        #expect(flights.status == 200)
        let line = try #require(
            ((try JSONSerialization.jsonObject(with: Data(flights.body.utf8)) as? [String: Any])?["flights"]
                as? [[String: Any]])?.first)
        #expect((line["bags"] as? [String: Int])?["total"] == 2 * scans, "\(line)")
        #expect(line["devices"] as? [String] == ["ramp-1"])

        let header = try await bigHeader.value
        #expect(header.status == nil || header.status == 400, "\(header)")
        for (index, body) in try await hugeBodies.value.enumerated() {
            #expect(body.status == nil || body.status == 413, "body \(index): \(body)")
            #expect(body.sent < 16 << 20, "body \(index): \(body.sent) bytes taken of 100 MiB")
        }
        try await waitUntil("the server holds at most its cap of the thousand connections", timeout: Self.bound) {
            RawTCP.openOnTheServer(held) <= 128
        }
        #expect(serve.count("console at its connection cap") >= 1, "\(serve.logText)")
        // Still answering a fresh client once the floods are over.
        #expect(try await ConsoleSignInTests.get(console, "/api/devices", bearer).status == 200)
        let after = try residentKilobytes(of: pid)
        print(
            "console under attack: VmRSS \(before) kB before, \(after) kB after; 1 MiB header: \(header.sent) bytes "
                + "taken, status \(header.status.map(String.init) ?? "none (closed)"); slowloris closed after "
                + "\(slowloris.bytes) bytes in \(Int(slowloris.seconds)) s; \(held.count) connections opened; huge "
                + "bodies: \(try await hugeBodies.value.map { "\($0.sent) bytes, \($0.status.map(String.init) ?? "closed")" })"
        )
        #expect(after - before < 20 << 10, "VmRSS grew from \(before) kB to \(after) kB")
        try await serve.stop()
    }
}
