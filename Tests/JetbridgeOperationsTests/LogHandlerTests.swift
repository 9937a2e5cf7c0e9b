import Foundation
import JetbridgeOperations
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
        #expect(line.contains(" [JetbridgeOperationsTests] seat "), "\(line)")
    }

    @Test func badLevelsAndFormatsFromFlagsOrEnvironmentAreUsageErrors() throws {
        func settings(_ level: String?, _ format: String?, _ environment: [String: String]) throws
            -> LoggingOptions.Settings
        {
            try LoggingOptions.settings(level: level, format: format, environment: environment)
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
