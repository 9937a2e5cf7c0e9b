public import Foundation

/// Finds the executables this package builds (`jetbridge-agent`, `jetbridge-aggregator`, `jetbridge-queue`,
/// `zeromq-test-peer`), which SwiftPM puts next to the test bundle in `.build/<triple>/<config>/`; the tests run them
/// as an operator would.
public enum BuiltExecutable {
    /// Where the search starts: the running test binary (`/proc/self/exe`, `argv[0]`) and the bundle's directory.
    private static var starts: [URL] {
        var starts: [URL] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            starts.append(URL(fileURLWithPath: exe).deletingLastPathComponent())
        }
        starts.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent())
        if let url = Bundle.main.executableURL { starts.append(url.deletingLastPathComponent()) }
        starts.append(Bundle.main.bundleURL)
        return starts
    }

    /// The built executable `name`, found next to the test bundle or up to five directories above it.
    /// - Parameter name: The executable's name.
    /// - Returns: Its location.
    /// - Throws: ``NotFound`` naming where it looked and how to build it.
    public static func url(_ name: String) throws -> URL {
        for start in starts {
            var directory = start.standardizedFileURL
            for _ in 0..<6 {
                let url = directory.appendingPathComponent(name)
                if FileManager.default.isExecutableFile(atPath: url.path) { return url }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw NotFound(name: name, searched: starts.map(\.path))
    }

    /// ``url(_:)``, or where the executable should be (next to the test binary) when it is missing, so that running it
    /// fails with that path.
    /// - Parameter name: The executable's name.
    /// - Returns: Its location.
    public static func expectedURL(_ name: String) -> URL {
        (try? url(name)) ?? (starts.first ?? URL(fileURLWithPath: ".")).appendingPathComponent(name)
    }

    /// The executable was not built.
    public struct NotFound: Error, CustomStringConvertible {
        public var name: String
        public var searched: [String]
        public var description: String {
            "\(name) not found next to the test bundle (searched from \(searched)); build it: swift build --build-tests"
        }
    }
}
