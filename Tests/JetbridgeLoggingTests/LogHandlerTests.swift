import Foundation
import JetbridgeModel
import JetbridgeLogging
import Logging
import Testing

/// Collects what a handler writes.
final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var all: [String] { lock.withLock { lines } }
    lazy var sink = LogSink { [self] line in lock.withLock { lines.append(line) } }
}

@Suite("Logs: text and JSON lines, device text escaped")
struct LogHandlerTests {
    @Test func jsonIsOneObjectPerLineWithTheFiveFieldsAndEscapedDeviceText() throws {
        let lines = Lines()
        var logger = Logger(label: "jetbridge-aggregator") {
            JetbridgeLogHandler(label: $0, level: .info, format: .json, sink: lines.sink)
        }
        logger[metadataKey: "instance"] = "a"
        logger.debug("not written")
        logger.warning(
            "refused \u{1B}[31mred\r\nfake line", metadata: ["seat": "17B\u{1B}]0;x\u{07}", "list": ["a", "b\n"]])
        #expect(lines.all.count == 1)
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("}\n"))
        #expect(line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" && $0 != "\u{1B}" })
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(Set(object.keys) == ["time", "level", "label", "message", "metadata"])
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "jetbridge-aggregator")
        #expect(object["message"] as? String == "refused \u{1B}[31mred\r\nfake line")
        let metadata = try #require(object["metadata"] as? [String: Any])
        #expect(metadata["seat"] as? String == "17B\u{1B}]0;x\u{07}")
        #expect(metadata["instance"] as? String == "a")
        #expect(metadata["list"] as? [String] == ["a", "b\n"])
        let time = try #require(object["time"] as? String)
        #expect(time.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(time)")
    }

    /// Issue 28: metadata numbers were JSON strings (`"allowedDevices":"0"`). A value logged as a number is a JSON
    /// number (a Bool a JSON boolean); text stays text, also when it reads as a number (a device id `"123"`); text
    /// lines show both alike.
    @Test func numbersLoggedAsNumbersAreJSONNumbers() throws {
        let lines = Lines()
        let json = Logger(label: "jetbridge-aggregator") {
            JetbridgeLogHandler(label: $0, level: .info, format: .json, sink: lines.sink)
        }
        let text = Logger(label: "jetbridge-aggregator") {
            JetbridgeLogHandler(label: $0, level: .info, format: .text, sink: lines.sink)
        }
        let metadata: Logger.Metadata = [
            "count": .stringConvertible(3), "big": .stringConvertible(UInt64.max), "rate": .stringConvertible(2.5),
            "infinite": .stringConvertible(Double.infinity), "on": .stringConvertible(true), "device": "123",
            "nested": ["inner": .stringConvertible(-7)],
        ]
        json.info("numbers", metadata: metadata)
        text.info("numbers", metadata: metadata)
        let all = lines.all
        try #require(all.count == 2)
        #expect(all[0].contains(#""big":18446744073709551615,"count":3,"device":"123","infinite":"inf","#), "\(all[0])")
        #expect(all[0].contains(#""nested":{"inner":-7},"on":true,"rate":2.5"#), "\(all[0])")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(all[0].utf8)) as? [String: Any])
        let values = try #require(object["metadata"] as? [String: Any])
        #expect(values["count"] as? Int == 3 && values["device"] as? String == "123")
        #expect(all[1].contains("big=18446744073709551615 count=3 device=123 infinite=inf nested=[inner: -7] on=true rate=2.5"), "\(all[1])")
    }

    @Test func textEscapesControlBidiAndZeroWidthCharacters() throws {
        let lines = Lines()
        let logger = Logger(label: "jetbridge-agent") {
            JetbridgeLogHandler(label: $0, level: .trace, format: .text, sink: lines.sink)
        }
        logger.info("seat \u{1B}[2J\rX", metadata: ["name": "Pea\u{202E}nuts\u{200B}\tok"])
        let line = try #require(lines.all.first)
        #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" })
        #expect(!line.unicodeScalars.contains { LogEscaping.mustEscape($0) && $0 != "\n" })
        #expect(line.contains(#"seat \u{1B}[2J\rX"#), "\(line)")
        #expect(line.contains(#"name=Pea\u{202E}nuts\u{200B}\tok"#), "\(line)")
        #expect(line.contains(" info jetbridge-agent: name="), "\(line)")
        #expect(line.contains(" [JetbridgeLoggingTests] seat "), "\(line)")
    }

    /// Logs escape what every other output of device text escapes (InertText): the Arabic letter mark, the soft
    /// hyphen and tag characters (Cf, past U+FFFF too) as well as the controls the first list named.
    @Test func everyCharacterThatIsNotInertIsEscapedInTextAndJSON() throws {
        let hostile = "A\u{061C}B\u{00AD}C\u{E0041}D\u{2029}E\u{8}F"
        let lines = Lines()
        let text = Logger(label: "jetbridge-agent") {
            JetbridgeLogHandler(label: $0, level: .trace, format: .text, sink: lines.sink)
        }
        let json = Logger(label: "jetbridge-agent") {
            JetbridgeLogHandler(label: $0, level: .trace, format: .json, sink: lines.sink)
        }
        text.info("\(hostile)", metadata: ["name": "\(hostile)"])
        json.info("\(hostile)", metadata: ["name": "\(hostile)"])
        let all = lines.all
        try #require(all.count == 2)
        for line in all {
            #expect(!line.unicodeScalars.contains { !InertText.isInert($0) && $0 != "\n" }, "\(line)")
        }
        #expect(all[0].contains(#"A\u{61C}B\u{AD}C\u{E0041}D\u{2029}E\u{8}F"#), "\(all[0])")
        #expect(all[1].contains(#"A\u061cB\u00adC\udb40\udc41D\u2029E\bF"#), "\(all[1])")
        // The JSON line reads back to exactly the device's text.
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(all[1].utf8)) as? [String: Any])
        #expect(object["message"] as? String == hostile)
        #expect((object["metadata"] as? [String: Any])?["name"] as? String == hostile)
    }

    @Test func badLevelsAndFormatsFromFlagsOrEnvironmentAreUsageErrors() throws {
        func settings(_ level: String?, _ format: String?, _ environment: [String: String]) throws
            -> LogSettings
        {
            try LogSettings.resolve(level: level, format: format, environment: environment)
        }
        #expect(try settings(nil, nil, [:]) == .init(level: nil, format: nil))
        #expect(
            try settings(nil, nil, ["JETBRIDGE_LOG_LEVEL": "debug", "JETBRIDGE_LOG_FORMAT": "json"])
                == .init(level: .debug, format: .json))
        #expect(throws: (any Error).self) { try settings(nil, nil, ["JETBRIDGE_LOG_LEVEL": "loud"]) }
        #expect(throws: (any Error).self) { try settings(nil, nil, ["JETBRIDGE_LOG_FORMAT": "xml"]) }
        // The flag wins over the environment, also over a bad value there.
        #expect(try settings("error", nil, ["JETBRIDGE_LOG_LEVEL": "loud"]).level == .error)
        #expect(throws: (any Error).self) { try settings(nil, "yaml", [:]) }
    }
}
