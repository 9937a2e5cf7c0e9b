// zeromq-benchmark: PUSH->PULL throughput through the ZeroMQ wrapper, next to zeromq-c-baseline (plain libzmq)
// doing exactly the same in the same run.
//
//   swift build -c release --product zeromq-benchmark --product zeromq-c-baseline
//   .build/release/zeromq-benchmark [--repetitions N] [--scale F] [--sizes 65536,1048576]
//
// Each configuration runs N times (default 5), alternating a C run and a Swift run so both see the same load on a
// shared machine. Each C run is its own process doing two back-to-back measurements, of which the faster counts, so
// the C side is not charged for a cold process; the Swift side runs in this already-warm process. Reported: the best
// run of each side (noise only ever makes a run slower) and the median of the per-pair Swift/C ratios.
import Foundation
import ZeroMQ

struct Configuration {
    let size: Int
    let count: Int
    let curve: Bool
    var label: String {
        let size = size >= 1 << 20 ? "\(size >> 20) MiB" : size >= 1024 ? "\(size >> 10) KiB" : "\(size) B"
        return "\(size)\(curve ? " CURVE" : "")"
    }
}

struct Measurement {
    let messages: Int
    let seconds: Double
    let size: Int
    var messagesPerSecond: Double { Double(messages) / seconds }
    var megabytesPerSecond: Double { Double(messages * size) / seconds / 1e6 }
}

/// The Swift side: identical to the C program, through the wrapper's public API.
func measureSwift(_ configuration: Configuration) throws -> Measurement {
    let context = try ZeroMQContext()
    let pull = try context.socket(.pull)
    let serverKeys = configuration.curve ? try CurveKeyPair.generate() : nil
    if let serverKeys { try pull.makeCurveServer(keys: serverKeys) }
    try pull.bind("tcp://127.0.0.1:*")
    let endpoint = try pull.lastEndpoint

    let sender = Thread {
        do {
            let push = try context.socket(.push)
            if let serverKeys {
                try push.makeCurveClient(keys: try CurveKeyPair.generate(), serverPublicKey: serverKeys.publicKey)
            }
            try push.connect(endpoint)
            let payload = Data(repeating: 0x42, count: configuration.size)
            for _ in 0..<configuration.count { try push.send(payload) }
            try push.close()
        } catch {
            fatalError("sender: \(error)")
        }
    }
    sender.start()

    var start = ContinuousClock.now
    for index in 0..<configuration.count {
        guard let frame = try pull.receive(), frame.count == configuration.size else {
            fatalError("receiver: short or missing message")
        }
        if index == 0 { start = .now }
    }
    let elapsed = ContinuousClock.now - start
    try pull.close()
    context.terminate()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    return Measurement(messages: configuration.count - 1, seconds: seconds, size: configuration.size)
}

/// The C side: runs zeromq-c-baseline from this executable's directory and parses its lines, one per run.
func measureC(_ configuration: Configuration, repetitions: Int) throws -> [Measurement] {
    let directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    let process = Process()
    process.executableURL = directory.appendingPathComponent("zeromq-c-baseline")
    process.arguments = [
        "\(configuration.size)", "\(configuration.count)", configuration.curve ? "curve" : "plain", "\(repetitions)",
    ]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        fatalError("zeromq-c-baseline failed (\(process.terminationStatus)): \(text)")
    }
    return text.split(separator: "\n").map { line in
        let fields = Dictionary(
            line.split(separator: " ").compactMap { field -> (Substring, Substring)? in
                let parts = field.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (parts[0], parts[1]) : nil
            },
            uniquingKeysWith: { $1 })
        guard let seconds = fields["seconds"].flatMap({ Double($0) }) else {
            fatalError("zeromq-c-baseline printed an unexpected line: \(line)")
        }
        return Measurement(messages: configuration.count - 1, seconds: seconds, size: configuration.size)
    }
}

var repetitions = 5
var scale = 1.0
var sizes: Set<Int>?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--repetitions": repetitions = arguments.popFirst().flatMap(Int.init) ?? repetitions
    case "--scale": scale = arguments.popFirst().flatMap(Double.init) ?? scale
    case "--sizes": sizes = arguments.popFirst().map { Set($0.split(separator: ",").compactMap { Int($0) }) }
    default:
        FileHandle.standardError.write(
            Data("usage: zeromq-benchmark [--repetitions N] [--scale F] [--sizes BYTES,…]\n".utf8))
        exit(64)
    }
}

let configurations = [
    Configuration(size: 100, count: 500_000, curve: false),
    Configuration(size: 1024, count: 300_000, curve: false),
    Configuration(size: 64 << 10, count: 10_000, curve: false),
    Configuration(size: 1 << 20, count: 600, curve: false),
    Configuration(size: 100, count: 200_000, curve: true),
    Configuration(size: 1024, count: 100_000, curve: true),
    Configuration(size: 64 << 10, count: 3_000, curve: true),
    Configuration(size: 1 << 20, count: 150, curve: true),
]
.filter { sizes?.contains($0.size) ?? true }
.map { Configuration(size: $0.size, count: max(2, Int(Double($0.count) * scale)), curve: $0.curve) }

func pad(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
func format(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }

print("PUSH -> PULL over tcp://127.0.0.1, one I/O thread, \(repetitions) alternating C/Swift runs per row")
print(
    "\(pad("message", 13)) \(pad("count", 8)) \(pad("C msgs/s", 11)) \(pad("C MB/s", 9)) "
        + "\(pad("Swift msgs/s", 13)) \(pad("Swift MB/s", 11)) \(pad("best/best", 10)) \(pad("median", 7))")
for configuration in configurations {
    var cRuns: [Measurement] = []
    var swiftRuns: [Measurement] = []
    for _ in 0..<repetitions {
        if let c = try measureC(configuration, repetitions: 2).min(by: { $0.seconds < $1.seconds }) { cRuns.append(c) }
        swiftRuns.append(try measureSwift(configuration))
    }
    guard let c = cRuns.min(by: { $0.seconds < $1.seconds }),
        let swift = swiftRuns.min(by: { $0.seconds < $1.seconds })
    else { continue }
    let ratios = zip(cRuns, swiftRuns).map { $1.messagesPerSecond / $0.messagesPerSecond }.sorted()
    let medianRatio = ratios[ratios.count / 2]
    print(
        "\(pad(configuration.label, 13)) \(pad("\(configuration.count)", 8)) "
            + "\(pad(format(c.messagesPerSecond), 11)) \(pad(format(c.megabytesPerSecond, 1), 9)) "
            + "\(pad(format(swift.messagesPerSecond), 13)) \(pad(format(swift.megabytesPerSecond, 1), 11)) "
            + "\(pad(format(swift.messagesPerSecond / c.messagesPerSecond, 2) + "x", 10)) "
            + "\(pad(format(medianRatio, 2) + "x", 7))")
}
