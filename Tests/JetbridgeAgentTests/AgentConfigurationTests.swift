import Foundation
import JetbridgeModel
import JetbridgeTestKit
import Testing

import SystemSupport
@testable import JetbridgeAgent

@Suite("AgentConfiguration")
struct AgentConfigurationTests {
    let directory: URL

    init() throws {
        directory = try TemporaryDirectory.create(prefix: "jetbridge-agent")
    }

    func resolve(_ json: String? = nil, overrides: AgentConfiguration.Overrides = .init()) throws(AgentError)
        -> AgentConfiguration
    {
        let file = directory.appendingPathComponent("agent.json")
        if let json { try? Data(json.utf8).write(to: file) }
        return try AgentConfiguration.resolve(
            home: AgentHome(url: directory.appendingPathComponent("home")), configFile: json == nil ? nil : file.path,
            overrides: overrides, currentDirectory: directory, hostName: "gate-12.example.com")
    }

    @Test("defaults work with no configuration at all")
    func defaults() throws {
        let configuration = try resolve()
        #expect(configuration.file == nil)
        #expect(configuration.device == "gate-12")
        #expect(configuration.flight.rawValue == "ZA101/2026-11-21")
        #expect(configuration.queueDirectory.path == directory.appendingPathComponent("home/queue").path)
        #expect(configuration.inventory == .builtIn)
        #expect(try configuration.loadInventory() == AgentConfiguration.builtInInventory)
        #expect(configuration.ground == .defaults)
        #expect(configuration.sync == .defaults)
        #expect(configuration.queueMaxBytes == nil)
    }

    @Test("the file overrides defaults and flags override the file; paths are relative to home and file")
    func precedence() throws {
        let configuration = try resolve(
            #"{"device": "cart-2", "flight": "za9/2026-01-02", "queue": "/var/spool/jb", "inventory": "menu.plist", "queueMaxBytes": 1000, "ground": {"serverPublicKey": "0123456789012345678901234567890123456789"}, "sync": {"ackTimeoutSeconds": 2.5}}"#,
            overrides: .init(flight: "ZA10/2026-01-03"))
        #expect(configuration.device == "cart-2")
        #expect(configuration.flight.rawValue == "ZA10/2026-01-03")
        #expect(configuration.queueDirectory.path == "/var/spool/jb")
        #expect(configuration.inventory == .file(directory.appendingPathComponent("menu.plist")))
        #expect(configuration.queueMaxBytes == 1000)
        #expect(configuration.ground.data == AgentConfiguration.Ground.defaults.data)
        #expect(configuration.ground.serverPublicKey?.count == 40)
        #expect(configuration.sync.ackTimeoutSeconds == 2.5)
        #expect(configuration.sync.window == AgentConfiguration.Sync.defaults.window)
    }

    @Test("relative paths resolve under a home that does not exist yet, and next to the configuration file")
    func relativePaths() throws {
        let configuration = try resolve(#"{"queue": "spool", "inventory": "../menus/menu.plist"}"#)
        #expect(configuration.queueDirectory.path == directory.appendingPathComponent("home/spool").path)
        #expect(
            configuration.inventory
                == .file(directory.deletingLastPathComponent().appendingPathComponent("menus/menu.plist")))
        let home = AgentHome.resolve(flag: "a/b", environment: [:], currentDirectory: directory)
        #expect(home.url.path == directory.appendingPathComponent("a/b").path)
    }

    @Test("unknown keys are refused at every level", arguments: ["{\"flihgt\": 1}", "{\"sync\": {\"windows\": 1}}"])
    func unknownKeys(json: String) throws {
        #expect {
            try resolve(json)
        } throws: { error in
            (error as? AgentError)?.code == .dataError && "\(error)".contains("unknown key")
        }
    }

    @Test(
        "device ids derived from host names are valid",
        arguments: ["", "a.b.c", "héllo wörld", String(repeating: "x", count: 100), "-gate", "..", "nul", "COM1.lan",
            "_x"])
    func derivedDevice(hostName: String) throws {
        try Validation.deviceID(AgentConfiguration.defaultDeviceID(hostName: hostName))
    }
}

extension AgentConfigurationTests {
    /// Issue 16, item 8: the agent's configuration takes the ground's device id rule.
    @Test("a configured device id that reads as a path or a reserved name is refused", arguments: [".", "..", "CON", "-x", "a."])
    func pathLikeDevice(device: String) throws {
        #expect {
            try resolve("{\"device\": \"\(device)\"}")
        } throws: { error in
            (error as? AgentError)?.code == .dataError && "\(error)".contains("invalid device id")
        }
    }
}

@Suite("TagLineReader")
struct TagLineReaderTests {
    func lines(_ input: String, chunk: Int = 16) throws -> [String] {
        var pipe: [Int32] = [0, 0]
        #expect(Foundation.pipe(&pipe) == 0)
        let data = Data(input.utf8)
        let writeEnd = pipe[1]
        let writer = Thread {
            data.withUnsafeBytes { buffer in
                var offset = 0
                while offset < buffer.count {
                    let written = write(writeEnd, buffer.baseAddress! + offset, buffer.count - offset)
                    if written <= 0 { break }
                    offset += written
                }
            }
            close(writeEnd)
        }
        writer.start()
        defer { close(pipe[0]) }
        var reader = TagLineReader(fd: pipe[0], path: "pipe", cap: 8, chunk: chunk)
        var result: [String] = []
        while let line = try reader.next() {
            switch line {
            case .bytes(let bytes): result.append("\(reader.lineNumber):" + String(decoding: bytes, as: UTF8.self))
            case .tooLong(let length): result.append("\(reader.lineNumber):long \(length)")
            }
        }
        return result
    }

    @Test("lines, CRLF, a last line without a newline, over-long lines across reads")
    func splitting() throws {
        let long = String(repeating: "y", count: 100)
        #expect(try lines("a\nbb\r\n\nccc") == ["1:a", "2:bb", "3:", "4:ccc"])
        #expect(try lines("\(long)\nok\n\(long)") == ["1:long 100", "2:ok", "3:long 100"])
        #expect(try lines("12345678\n123456789\n") == ["1:12345678", "2:long 9"])
        #expect(try lines("") == [])
    }
}

@Suite("BufferedRandom")
struct BufferedRandomTests {
    @Test("time-ordered ids from its draws: version 7, RFC 9562 variant, no repeats across refills")
    func version7() {
        var random = BufferedRandom()
        let time = Date(timeIntervalSince1970: 1_795_250_000)
        // 10,000 ids are 20,000 draws: more than two buffers of 8,192.
        let made = (0..<10_000).map { _ in UUID(timeOrdered: time, using: &random) }
        #expect(Set(made).count == made.count)
        for id in made.prefix(100) {
            let text = id.uuidString
            #expect(Array(text)[14] == "7")
            #expect("89AB".contains(Array(text)[19]))
        }
        // The draws themselves are not constant: a buffer that was never filled would be all zeros.
        #expect(Set((0..<100).map { _ in random.next() }).count == 100)
    }
}
