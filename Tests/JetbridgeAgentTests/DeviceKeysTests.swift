import Foundation
import Testing
import ZeroMQ

#if canImport(Glibc)
    import Glibc
#endif

import SystemSupport
@testable import JetbridgeAgent

@Suite("DeviceKeys")
struct DeviceKeysTests {
    @Test("generate writes a 0600 secret, load reads the pair back, a second generate needs --force")
    func generateAndLoad() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jetbridge-keys-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = AgentHome(url: directory)
        let publicKey = try DeviceKeys.generate(in: home, force: false)
        #expect(publicKey.utf8.count == 40)
        let mode = try FileManager.default.attributesOfItem(atPath: home.secretKeyFile.path)[.posixPermissions]
        #expect((mode as? NSNumber)?.intValue == 0o600)
        #expect(try DeviceKeys.load(from: home).publicKeyZ85 == publicKey)
        #expect(throws: AgentError.self) { try DeviceKeys.generate(in: home, force: false) }
        #expect(try DeviceKeys.generate(in: home, force: true) != publicKey)
    }

    /// One rule for the key pair files of both tools (docs/SECURITY.md): the secret and the public key 0600 in a 0700
    /// directory whatever the umask, and a secret that group or others may reach refused, naming the fix (the
    /// aggregator refused one, the agent used it).
    @Test(arguments: [0o640, 0o604, 0o644, 0o660])
    func aSecretKeyOthersCanReachIsRefused(mode: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("jetbridge-keys-\(UUID())")
        defer { try? FileManager.default.removeItem(at: directory) }
        let home = AgentHome(url: directory)
        try DeviceKeys.generate(in: home, force: false)
        for file in [home.secretKeyFile, home.publicKeyFile] {
            let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions]
            #expect((mode as? NSNumber)?.intValue == 0o600, "\(file.path)")
        }
        let keys = try FileManager.default.attributesOfItem(atPath: home.keysDirectory.path)[.posixPermissions]
        #expect((keys as? NSNumber)?.intValue == 0o700)
        chmod(home.secretKeyFile.path, mode_t(mode))
        let error = try #require(throws: AgentError.self) { try DeviceKeys.load(from: home) }
        #expect(error.code == .dataError)
        #expect(error.message.contains("accessible to group or others (mode \(String(mode, radix: 8)))"), "\(error)")
        #expect(error.message.contains("chmod 600 \(home.secretKeyFile.path)"), "\(error)")
        chmod(home.secretKeyFile.path, 0o600)
        #expect(try DeviceKeys.load(from: home).publicKeyZ85.count == 40)
    }

    @Test("the allow command quotes the key and survives a key that starts with a dash")
    func allowCommand() {
        #expect(
            DeviceKeys.allowCommand(device: "cart-1", publicKeyZ85: "a$c")
                == "jetbridge-aggregator devices allow cart-1 'a$c'")
        #expect(
            DeviceKeys.allowCommand(device: "cart-1", publicKeyZ85: "-bc")
                == "jetbridge-aggregator devices allow -- cart-1 '-bc'")
    }
}
