import Foundation
import JetbridgeTestKit
import JetbridgeAggregator
import JetbridgeStore
import Testing
import ZeroMQ
import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 16, item 6: `serve` and the server key's file permissions; each problem said as it is, and `keys generate`
/// (which would replace the ground's identity) advised only when there is no key pair at all.
@Suite("Server keys: permissions and damaged files")
struct ServerKeyFileTests {
    func serve(_ fixture: Fixture) -> AggregatorError? {
        var configuration = AggregatorConfiguration()
        configuration.dataEndpoint = "tcp://127.0.0.1:*"
        configuration.acksEndpoint = "tcp://127.0.0.1:*"
        return #expect(throws: AggregatorError.self) {
            let server = try AggregatorServer(
                home: AggregatorHome(directory: fixture.directory), configuration: configuration, logger: quietLogger)
            server.stop()
        }
    }

    func home(_ fixture: Fixture) throws -> AggregatorHome {
        let home = AggregatorHome(directory: fixture.directory)
        try ServerKeys.generate(in: home, force: false)
        return home
    }

    /// One mode rule for both tools' key files: the public key is 0600 like the secret (the home is private), whatever
    /// the umask; it was written 0644 (0600 only when the command's umask happened to mask it).
    @Test func bothKeyFilesAreOwnerOnly() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        for file in [home.serverSecretKeyFile, home.serverPublicKeyFile] {
            let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file.path): \(String(mode ?? 0, radix: 8))")
        }
        let keys = try FileManager.default.attributesOfItem(atPath: home.keysDirectory.path)[.posixPermissions] as? Int
        #expect(keys == 0o700)
    }

    @Test(arguments: [0o640, 0o604, 0o644, 0o660, 0o606])
    func aSecretKeyOthersCanReachIsRefused(mode: Int) throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        chmod(home.serverSecretKeyFile.path, mode_t(mode))
        let error = try #require(serve(fixture))
        #expect(error.code == .dataError)
        #expect(error.exitCode == 65)
        #expect(error.message.contains("accessible to group or others (mode \(String(mode, radix: 8)))"))
        #expect(error.message.contains("chmod 600 \(home.serverSecretKeyFile.path)"))
        // Fixed as told, it serves.
        chmod(home.serverSecretKeyFile.path, 0o600)
        #expect(try ServerKeys.load(from: home).publicKeyZ85.count == 40)
    }

    @Test func aSecretKeyThatIsADirectoryIsSaidSo() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        try FileManager.default.removeItem(at: home.serverSecretKeyFile)
        try FileManager.default.createDirectory(at: home.serverSecretKeyFile, withIntermediateDirectories: false)
        let error = try #require(serve(fixture))
        #expect(error.code == .dataError)
        #expect(error.message.contains("\(home.serverSecretKeyFile.path) is a directory, not a key file"))
        #expect(!error.message.contains("run `jetbridge-aggregator"))
    }

    @Test func oneMissingHalfIsNotTreatedAsNoKeyPair() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        try FileManager.default.removeItem(at: home.serverSecretKeyFile)
        let error = try #require(serve(fixture))
        #expect(error.code == .dataError)
        #expect(error.message.contains("\(home.serverSecretKeyFile.path) is missing while"))
        #expect(error.message.contains("restore it from a backup"))
    }

    @Test(.enabled(if: getuid() != 0, "root reads any file"))
    func anUnreadableSecretKeyIsSaidSo() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        chmod(home.serverSecretKeyFile.path, 0o000)
        let error = try #require(serve(fixture))
        #expect(error.message.contains("cannot read \(home.serverSecretKeyFile.path): Permission denied"))
        #expect(!error.message.contains("run `jetbridge-aggregator"))
    }

    @Test func aKeyThatIsNotTextIsSaidSo() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let home = try home(fixture)
        try Data([0xFF, 0xFE, 0x00]).write(to: home.serverSecretKeyFile)
        chmod(home.serverSecretKeyFile.path, 0o600)
        let error = try #require(serve(fixture))
        #expect(error.message.contains("is not a key file"))
    }
}
