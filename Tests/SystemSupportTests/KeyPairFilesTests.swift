import Foundation
import JetbridgeTestKit
import Testing

@testable import SystemSupport

#if canImport(Glibc)
    import Glibc
#endif

/// One rule for both tools' key files (docs/SECURITY.md, "Key files").
@Suite struct KeyPairFilesTests {
    func files(_ directory: URL) -> KeyPairFiles {
        KeyPairFiles(directory: directory.appendingPathComponent("keys").path, secretName: "k.key", publicName: "k.pub")
    }

    func mode(_ path: String) throws -> Int {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1
    }

    @Test func bothFilesAre0600InA0700DirectoryWhateverTheDirectoryWas() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let files = files(directory)
            try FileManager.default.createDirectory(
                atPath: files.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            #expect(!files.exists)
            try files.write(secret: "secret", public: "public")
            #expect(files.exists)
            #expect(try mode(files.directory) == 0o700)
            #expect(try mode(files.secretPath) == 0o600 && mode(files.publicPath) == 0o600)
            let read = try files.read()
            #expect(read.secret == "secret" && read.public == "public")
        }
    }

    @Test func eachProblemIsNamed() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let files = files(directory)
            #expect(throws: KeyPairFiles.Problem.noKeyPair) { try files.read() }
            try files.write(secret: "s", public: "p")
            try FileManager.default.removeItem(atPath: files.publicPath)
            #expect(throws: KeyPairFiles.Problem.missing(files.publicPath, other: files.secretPath)) {
                try files.read()
            }
            try FileManager.default.createDirectory(atPath: files.publicPath, withIntermediateDirectories: false)
            #expect(throws: KeyPairFiles.Problem.directory(files.publicPath)) { try files.read() }
            try FileManager.default.removeItem(atPath: files.publicPath)
            try Data([0xFF, 0xFE]).write(to: URL(fileURLWithPath: files.publicPath))
            #expect(throws: KeyPairFiles.Problem.notText(files.publicPath)) { try files.read() }
            try Data("p".utf8).write(to: URL(fileURLWithPath: files.publicPath))
            chmod(files.secretPath, 0o640)
            #expect(throws: KeyPairFiles.Problem.exposed(files.secretPath, mode: 0o640)) { try files.read() }
        }
    }

    @Test func aLinkWhereAKeyIsWrittenIsRefused() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let files = files(directory)
            let target = directory.appendingPathComponent("elsewhere")
            try Data("keep".utf8).write(to: target)
            try FileManager.default.createDirectory(atPath: files.directory, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: files.secretPath, withDestinationPath: target.path)
            #expect(throws: SystemError.self) { try files.write(secret: "s", public: "p") }
            #expect(try String(contentsOf: target, encoding: .utf8) == "keep")
        }
    }
}
