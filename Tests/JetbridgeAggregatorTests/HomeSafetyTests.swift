import Foundation
import JetbridgeAggregator
import JetbridgeStore
import JetbridgeTestKit
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 23, item 13: in a home others could write, a link planted where the ground writes a file turned `serve`
/// (run as root) into a tool that truncates and rewrites any file. The real executable, on a real home: a link is
/// refused and its target left as it was; a home open to others is tightened (ours) or refused (another user's).
@Suite("Home: links are never written through, the home is 0700")
struct HomeSafetyTests {
    typealias CLI = AggregatorCLITests

    static let anyPorts = ["--data", "tcp://127.0.0.1:*", "--acks", "tcp://127.0.0.1:*"]
    static let precious = "precious: not the aggregator's\n"

    /// A fixture with a home (`ground`, not created) and a file outside it that a planted link points at.
    struct Setting {
        let fixture: Fixture
        var home: URL { fixture.directory.appendingPathComponent("ground") }
        var target: URL { fixture.directory.appendingPathComponent("target") }

        init(targetContents: String = HomeSafetyTests.precious) throws {
            fixture = try Fixture()
            try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
            try Data(targetContents.utf8).write(to: target)
        }

        /// Plants `name` in the home as a link to ``target``.
        func plant(_ name: String) throws {
            try FileManager.default.createSymbolicLink(
                atPath: home.appendingPathComponent(name).path, withDestinationPath: target.path)
        }

        var targetContents: String { (try? String(contentsOf: target, encoding: .utf8)) ?? "<unreadable>" }

        func isLink(_ name: String) -> Bool {
            var info = stat()
            return lstat(home.appendingPathComponent(name).path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
        }

        func mode(_ url: URL) -> mode_t {
            var info = stat()
            stat(url.path, &info)
            return info.st_mode & 0o7777
        }

        /// Runs `serve` (insecure, any ports) and waits for it to end; one that serves is killed after its start-up
        /// line, so a `serve` that does not refuse fails the test instead of hanging it.
        func serve() async throws -> CLI.Output {
            let (process, stdout, stderr) = try CLI.start(
                ["--home", home.path, "serve", "--insecure"] + HomeSafetyTests.anyPorts, in: fixture.directory)
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            var served = false
            try await waitUntil("serve ends or serves") {
                served = (try String(contentsOf: stderr, encoding: .utf8)).contains("aggregator serving")
                return served || !process.isRunning
            }
            if served {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            process.waitUntilExit()
            return CLI.Output(
                status: served ? -1 : process.terminationStatus,
                stdout: try String(contentsOf: stdout, encoding: .utf8),
                stderr: try String(contentsOf: stderr, encoding: .utf8))
        }
    }

    @Test(
        "serve refuses a link planted where it writes its lock or its status, and leaves the target alone",
        arguments: ["serve.lock", "status.json"])
    func serveRefusesAPlantedLink(name: String) async throws {
        let setting = try Setting()
        defer { setting.fixture.remove() }
        try setting.plant(name)
        let output = try await setting.serve()
        #expect(output.status == 73, "\(output)")
        let path = setting.home.appendingPathComponent(name).path
        #expect(output.stderr.contains("\(path) is a symbolic link"), "\(output)")
        #expect(!output.stderr.contains("aggregator serving"))
        #expect(setting.targetContents == Self.precious)
        #expect(setting.isLink(name), "the link itself is the operator's to inspect and remove")
    }

    @Test(
        "a link at the SQLite store or its -wal or -shm is refused before SQLite opens it (its target untouched)",
        arguments: ["jetbridge.sqlite", "jetbridge.sqlite-wal", "jetbridge.sqlite-shm"])
    func aPlantedStoreLinkIsRefused(name: String) throws {
        // SQLite writes a new database into an empty file a link at the store points to.
        let setting = try Setting(targetContents: "")
        defer { setting.fixture.remove() }
        try setting.plant(name)
        let output = try CLI.run(["--home", setting.home.path, "store", "migrate"], in: setting.fixture.directory)
        #expect(output.status == 73, "\(output)")
        let path = setting.home.appendingPathComponent(name).path
        #expect(output.stderr.contains("\(path) is a symbolic link"), "\(output)")
        #expect(setting.targetContents == "")
        #expect(setting.isLink(name))
    }

    @Test("devices allow and keys generate refuse a link at devices.json or a key file")
    func aPlantedLinkAtAReplacedFileIsRefused() throws {
        // An allow list the link's target holds, so that reading it succeeds and the write is what is refused.
        let list = "{\"devices\":{}}\n"
        let setting = try Setting(targetContents: list)
        defer { setting.fixture.remove() }
        try setting.plant("devices.json")
        let key = try CurveKeyPair.generate().publicKeyZ85
        let allow = try CLI.run(
            ["--home", setting.home.path, "devices", "allow", "--", "cart-1", key], in: setting.fixture.directory)
        #expect(allow.status == 73, "\(allow)")
        #expect(allow.stderr.contains("\(setting.home.path)/devices.json is a symbolic link"), "\(allow)")
        #expect(setting.isLink("devices.json"))

        try FileManager.default.createDirectory(
            at: setting.home.appendingPathComponent("keys"), withIntermediateDirectories: true)
        try setting.plant("keys/server.pub")
        let generate = try CLI.run(
            ["--home", setting.home.path, "keys", "generate", "--force"], in: setting.fixture.directory)
        #expect(generate.status == 73, "\(generate)")
        #expect(generate.stderr.contains("\(setting.home.path)/keys/server.pub is a symbolic link"), "\(generate)")
        #expect(setting.targetContents == list)
    }

    @Test("a home this user owns that others may enter or write is tightened to 0700 when serve starts")
    func serveTightensItsOwnOpenHome() async throws {
        let setting = try Setting()
        defer { setting.fixture.remove() }
        chmod(setting.home.path, 0o777)
        let serve = try await ServeProcess(store: "jetbridge.sqlite", in: setting.fixture.directory, name: "ground")
        #expect(setting.mode(setting.home) == 0o700)
        try await serve.stop()
        // And every command that writes into the home does the same.
        chmod(setting.home.path, 0o755)
        let generate = try CLI.run(["--home", setting.home.path, "keys", "generate"], in: setting.fixture.directory)
        #expect(generate.status == 0, "\(generate)")
        #expect(setting.mode(setting.home) == 0o700)
    }

    @Test(
        "a home another user owns that group or others may write is refused, and nothing is written in it",
        .enabled(if: geteuid() == 0, "giving a directory to another user needs root"))
    func anotherUsersOpenHomeIsRefused() async throws {
        let setting = try Setting()
        defer { setting.fixture.remove() }
        chmod(setting.home.path, 0o777)
        #expect(chown(setting.home.path, 65534, 65534) == 0)
        let output = try await setting.serve()
        #expect(output.status == 65, "\(output)")
        #expect(output.stderr.contains("\(setting.home.path) is writable by group or others (mode 777)"), "\(output)")
        #expect(output.stderr.contains("owned by uid 65534"), "\(output)")
        #expect(output.stderr.contains("chmod 700 \(setting.home.path)"), "\(output)")
        #expect(setting.mode(setting.home) == 0o777, "another user's directory is not changed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: setting.home.path) == [])

        let generate = try CLI.run(["--home", setting.home.path, "keys", "generate"], in: setting.fixture.directory)
        #expect(generate.status == 65, "\(generate)")
        // Not writable by others: its owner's business, served as before.
        chmod(setting.home.path, 0o755)
        let again = try CLI.run(["--home", setting.home.path, "keys", "generate"], in: setting.fixture.directory)
        #expect(again.status == 0, "\(again)")
        #expect(setting.mode(setting.home) == 0o755)
    }

    @Test("a SQLite store outside the home in a directory others may write is refused")
    func aStoreInADirectoryOthersMayWriteIsRefused() throws {
        let setting = try Setting()
        defer { setting.fixture.remove() }
        let open = setting.fixture.directory.appendingPathComponent("open")
        try FileManager.default.createDirectory(at: open, withIntermediateDirectories: true)
        chmod(open.path, 0o1777)
        let store = open.appendingPathComponent("ground.sqlite").path
        let output = try CLI.run(
            ["--home", setting.home.path, "store", "migrate", "--store", store], in: setting.fixture.directory)
        #expect(output.status == 65, "\(output)")
        #expect(output.stderr.contains("\(open.path) is writable by group or others (mode 1777)"), "\(output)")
        #expect(!FileManager.default.fileExists(atPath: store))
        chmod(open.path, 0o755)
        let fixed = try CLI.run(
            ["--home", setting.home.path, "store", "migrate", "--store", store], in: setting.fixture.directory)
        #expect(fixed.status == 0, "\(fixed)")
    }
}
