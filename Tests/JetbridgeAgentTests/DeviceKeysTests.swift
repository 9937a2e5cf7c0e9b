import Foundation
import Testing
import ZeroMQ

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
