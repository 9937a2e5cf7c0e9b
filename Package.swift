// swift-tools-version: 6.1
import PackageDescription

// Layers, bottom up (docs/ARCHITECTURE.md): SystemSupport (syscalls, atomic writes, a lock, threads; `package` API, no
// product) under everything that touches the system; MessagePack, ZeroMQ (over CZeroMQ), FileQueue (over CCRC32C)
// stand alone otherwise; JetbridgeModel imports Foundation only; JetbridgeProtocol adds the codec; JetbridgeLogging is
// the log handler; the agent and aggregator libraries sit on top; executables are thin argument-parser front ends on
// one scaffold, JetbridgeCLI (the only target besides them that imports ArgumentParser).
//
// Linux only: the code uses Glibc calls (fdatasync, /proc, flock semantics) and CI builds and tests on Linux alone,
// so no other platform is claimed.
let package = Package(
    name: "Jetbridge",
    products: [
        .library(name: "MessagePack", targets: ["MessagePack"]),
        .library(name: "ZeroMQ", targets: ["ZeroMQ"]),
        .library(name: "FileQueue", targets: ["FileQueue"]),
        .library(name: "JetbridgeModel", targets: ["JetbridgeModel"]),
        .executable(name: "jetbridge-agent", targets: ["jetbridge-agent"]),
        .executable(name: "jetbridge-aggregator", targets: ["jetbridge-aggregator"]),
        .executable(name: "jetbridge-queue", targets: ["jetbridge-queue"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // serve --metrics: swift-metrics types exported by swift-prometheus over SwiftNIO's HTTP/1 server.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // The scale-out store (issue 11): PostgreSQL through the Swift server ecosystem's client.
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    ],
    targets: [
        // MARK: System
        // One helper per system job for every layer (swift-nio's `syscall` and NIOConcurrencyHelpers): the syscall
        // wrapper and its error, atomic file writes, `Locked`, named threads, `Duration` conversions, the open-files
        // limit.
        // CFatalSignals: the fatal-signal handler, in C because a signal handler must not allocate. CSystemCalls:
        // system calls Swift's Glibc module does not export (`syncfs`, a GNU extension).
        .target(name: "CFatalSignals"),
        .target(name: "CSystemCalls"),
        .target(name: "SystemSupport", dependencies: ["CFatalSignals", "CSystemCalls"]),
        .testTarget(name: "SystemSupportTests", dependencies: ["SystemSupport"]),

        // MARK: Codec
        .target(name: "MessagePack"),
        .executableTarget(
            name: "messagepack-fuzz", dependencies: ["MessagePack", "JetbridgeModel", "JetbridgeProtocol"],
            path: "Fuzz/MessagePackFuzz"),
        .testTarget(name: "MessagePackTests", dependencies: ["MessagePack"], resources: [.copy("Fixtures")]),
        .executableTarget(
            name: "messagepack-benchmark",
            dependencies: ["MessagePack"],
            path: "Benchmarks/MessagePackBenchmark"
        ),

        // MARK: ZeroMQ
        // No pkgConfig: Debian's libzmq.pc adds krb5 -isystem flags SwiftPM refuses; zmq.h is on the default path.
        .systemLibrary(name: "CZeroMQ", providers: [.apt(["libzmq3-dev"]), .brew(["zeromq"])]),
        .target(name: "ZeroMQ", dependencies: ["CZeroMQ", "SystemSupport"]),
        .executableTarget(name: "zeromq-test-peer", dependencies: ["ZeroMQ"], path: "Tests/ZeroMQTestPeer"),
        .testTarget(name: "ZeroMQTests", dependencies: ["ZeroMQ", "zeromq-test-peer"]),
        .executableTarget(name: "zeromq-benchmark", dependencies: ["ZeroMQ"], path: "Benchmarks/ZeroMQBenchmark"),
        .executableTarget(
            name: "zeromq-c-baseline",
            dependencies: ["CZeroMQ"],
            path: "Benchmarks/ZeroMQCBaseline",
            linkerSettings: [.linkedLibrary("zmq")]
        ),

        // MARK: Queue
        .target(name: "CCRC32C"),
        .target(name: "FileQueue", dependencies: ["CCRC32C", "SystemSupport"]),
        .executableTarget(
            name: "jetbridge-queue",
            dependencies: [
                "FileQueue", "JetbridgeCLI", "SystemSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "FileQueueTests", dependencies: ["FileQueue", "jetbridge-queue"]),
        .executableTarget(
            name: "filequeue-benchmark",
            dependencies: ["FileQueue"],
            path: "Benchmarks/FileQueueBenchmark"
        ),

        // MARK: Domain and protocol
        .target(name: "JetbridgeModel", dependencies: ["SystemSupport"]),
        .testTarget(name: "JetbridgeModelTests", dependencies: ["JetbridgeModel"]),
        // CCRC32C is the leaf checksum primitive the queue uses too; the batch header carries a CRC-32C of frame 2.
        .target(name: "JetbridgeProtocol", dependencies: ["MessagePack", "JetbridgeModel", "CCRC32C"]),
        .testTarget(name: "JetbridgeProtocolTests", dependencies: ["JetbridgeProtocol", "MessagePack", "JetbridgeModel"]),
        .executableTarget(
            name: "record-decode-benchmark",
            dependencies: ["BenchmarkSupport", "JetbridgeProtocol", "JetbridgeModel", "MessagePack"],
            path: "Benchmarks/RecordDecodeBenchmark"
        ),

        // MARK: Logging and the command line
        // The log handler of every tool (text or JSON lines, device text escaped) and the log settings; no argument
        // parser, so a server library could log through it too.
        .target(
            name: "JetbridgeLogging",
            dependencies: ["JetbridgeModel", "SystemSupport", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "JetbridgeLoggingTests",
            dependencies: ["JetbridgeLogging", "JetbridgeModel", .product(name: "Logging", package: "swift-log")]
        ),
        // The scaffold the three executables share: global options, `main` (option moving, "did you mean", the log
        // bootstrap, the final error and the exit status), `--version`. Only executables depend on it: the libraries
        // import no argument parser.
        .target(
            name: "JetbridgeCLI",
            dependencies: [
                "FileQueue", "JetbridgeLogging", "JetbridgeModel", "JetbridgeProtocol", "SystemSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "JetbridgeCLITests",
            dependencies: [
                "JetbridgeCLI", "JetbridgeLogging", "SystemSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // MARK: Agent and aggregator
        .target(
            name: "JetbridgeAgent",
            dependencies: [
                "JetbridgeModel", "JetbridgeProtocol", "ZeroMQ", "FileQueue", "SystemSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // CSQLiteSettings: SQLite's process-wide settings, in C because `sqlite3_config` is variadic.
        .target(name: "CSQLiteSettings", linkerSettings: [.linkedLibrary("sqlite3")]),
        // The store: the rules, the SQLite and PostgreSQL engines behind StoreReader/StoreWriter, the report models.
        // No networking of its own and no command line: the aggregator, its commands and the benchmarks use it.
        .target(
            name: "JetbridgeStore",
            dependencies: [
                "JetbridgeModel", "JetbridgeProtocol", "SystemSupport", "CSQLiteSettings",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .target(
            name: "JetbridgeAggregator",
            dependencies: [
                "JetbridgeModel", "JetbridgeProtocol", "JetbridgeStore", "ZeroMQ", "SystemSupport",
                // FileQueue: only its format version, for jetbridge_build_info.
                "FileQueue",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        .testTarget(
            name: "JetbridgeAggregatorTests",
            dependencies: [
                "JetbridgeAggregator", "JetbridgeStore", "JetbridgeModel", "JetbridgeProtocol", "MessagePack", "ZeroMQ",
                "SystemSupport", "jetbridge-aggregator", "jetbridge-agent", "jetbridge-queue",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The store tests create a fresh PostgreSQL database per test.
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The metrics port's tests answer with MetricsServer's own responder (HTTPResponseStatus).
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .executableTarget(
            name: "store-benchmark",
            dependencies: [
                "BenchmarkSupport", "JetbridgeStore", "JetbridgeModel",
                .product(name: "Logging", package: "swift-log"),
                "JetbridgeProtocol", "MessagePack",
                // --postgres: databases created and dropped, and the COPY floor (postgres-nio's copyFrom).
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/StoreBenchmark"
        ),
        // The console at real size (issue 26): a 10-million-record store built by bulk inserts, each page timed over
        // HTTP against a real server with its console.
        .executableTarget(
            name: "console-benchmark",
            dependencies: [
                "BenchmarkSupport", "JetbridgeAggregator", "JetbridgeStore", "JetbridgeModel", "JetbridgeProtocol",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            path: "Benchmarks/ConsoleBenchmark"
        ),
        .executableTarget(
            name: "jetbridge-agent",
            dependencies: [
                "JetbridgeAgent", "JetbridgeCLI", "JetbridgeLogging", "JetbridgeModel", "JetbridgeProtocol",
                "SystemSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                // sync's ServiceGroup (SIGTERM/SIGINT) lives in @main, as the aggregator's does.
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "jetbridge-aggregator",
            dependencies: [
                // SystemSupport: fatal signals end the process (FatalSignals); serve raises its open-files limit.
                "JetbridgeAggregator", "JetbridgeCLI", "JetbridgeLogging", "JetbridgeProtocol", "SystemSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                "JetbridgeModel",
            ]
        ),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "jetbridge-agent", "jetbridge-aggregator", "jetbridge-queue", "MessagePack", "JetbridgeModel", "FileQueue",
            ]
        ),
        .testTarget(name: "JetbridgeAgentTests", dependencies: ["JetbridgeAgent", "JetbridgeModel", "SystemSupport"]),
        .executableTarget(
            name: "capture-benchmark",
            dependencies: ["BenchmarkSupport", "FileQueue", "MessagePack", "JetbridgeModel"],
            path: "Benchmarks/CaptureBenchmark"
        ),
        .executableTarget(
            name: "sync-benchmark",
            dependencies: [
                "BenchmarkSupport", "FileQueue", "MessagePack", "JetbridgeModel",
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // --store postgres: the receipts' progress and the rows counted in the shared database.
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            path: "Benchmarks/SyncBenchmark"
        ),

        // MARK: Test kit
        // What the tests share (temporary directories, fixed ids and dates, the seeded generator, built-executable
        // lookup, waits on conditions, the one process runner, log capture); Foundation, SystemSupport (the one seeded
        // generator) and swift-log only, so benchmarks can use it too. Not a product: a regular target that only test targets and benchmarks depend on (added
        // below).
        .target(
            name: "JetbridgeTestKit",
            dependencies: ["SystemSupport", .product(name: "Logging", package: "swift-log")],
            path: "Tests/JetbridgeTestKit"
        ),

        // MARK: Benchmark support
        // What several benchmarks share (the seeded generator, the sync record mix, clocks, the direct-insert floor, the
        // PostgreSQL COPY floor); not a product: nothing outside Benchmarks/ uses it.
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                "JetbridgeModel", .product(name: "GRDBSQLite", package: "GRDB.swift"),
                // PostgresCopy: the COPY floor of the PostgreSQL store (postgres-nio's copyFrom).
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/Support"
        ),
    ],
    swiftLanguageModes: [.v6]
)

// Strict settings for every Swift target, in one place (swift-log's habit).
let cTargets: Set<String> = ["CZeroMQ", "CCRC32C", "zeromq-c-baseline"]
for target in package.targets where !cTargets.contains(target.name) {
    target.swiftSettings =
        (target.swiftSettings ?? []) + [
            .enableUpcomingFeature("ExistentialAny"),
            .enableUpcomingFeature("MemberImportVisibility"),
            .enableUpcomingFeature("InternalImportsByDefault"),
        ]
}

// Sync tests drive the agent (in this process, and the built `jetbridge-agent` as a process) against a ground peer
// written in the test with the ZeroMQ library (or `zeromq-test-peer`, a process of its own), and the pipeline tests
// read the queue and decode acks.
for target in package.targets where target.name == "JetbridgeAgentTests" {
    target.dependencies += [
        "ZeroMQ", "JetbridgeProtocol", "FileQueue", "MessagePack", .product(name: "Logging", package: "swift-log"),
        "jetbridge-agent", "zeromq-test-peer",
    ]
}

// Every test target may use the test kit; of the benchmarks, those that draw seeded data.
let testKitBenchmarks: Set<String> = ["BenchmarkSupport", "messagepack-benchmark", "store-benchmark"]
for target in package.targets where target.type == .test || testKitBenchmarks.contains(target.name) {
    target.dependencies.append("JetbridgeTestKit")
}
