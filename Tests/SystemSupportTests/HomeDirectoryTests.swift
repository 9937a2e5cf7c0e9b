import Foundation
import JetbridgeTestKit
import Testing

@testable import SystemSupport

/// The home rule both programs document: `--home`, else a non-empty `$JETBRIDGE_HOME`, else the default.
@Suite struct HomeDirectoryTests {
    @Test func theFlagWinsThenTheEnvironmentThenTheDefault() {
        let named = ["JETBRIDGE_HOME": "/srv/jb"]
        #expect(HomeDirectory.path(flag: "here", environment: named, defaultPath: ".jetbridge/x") == "here")
        #expect(HomeDirectory.path(flag: nil, environment: named, defaultPath: ".jetbridge/x") == "/srv/jb")
        #expect(HomeDirectory.path(flag: nil, environment: [:], defaultPath: ".jetbridge/x") == ".jetbridge/x")
    }

    @Test func anEmptyEnvironmentVariableIsAsIfUnset() {
        #expect(HomeDirectory.path(flag: nil, environment: ["JETBRIDGE_HOME": ""], defaultPath: "d") == "d")
    }

    @Test func hintsNameTheHomeUnlessItIsTheDefault() {
        #expect(HomeDirectory.isDefault(flag: nil, environment: [:]))
        #expect(!HomeDirectory.isDefault(flag: nil, environment: ["JETBRIDGE_HOME": "/srv/jb"]))
        #expect(!HomeDirectory.isDefault(flag: "x", environment: [:]))
        #expect(HomeDirectory.command("jetbridge-agent", home: nil, "keys generate") == "jetbridge-agent keys generate")
        #expect(
            HomeDirectory.command("jetbridge-agent", home: "/srv/cart-9", "sync")
                == "jetbridge-agent --home /srv/cart-9 sync")
        #expect(
            HomeDirectory.command("jetbridge-aggregator", home: "/srv/my ground", "serve")
                == "jetbridge-aggregator --home '/srv/my ground' serve")
    }

    /// One lookup for both tools: `--config` must exist, else the home's file if present, else the defaults.
    @Test func theConfigurationIsTheFlagElseTheHomesFileElseTheDefaults() throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.url
        do {
            let homeFile = directory.appendingPathComponent("agent.json").path
            let other = directory.appendingPathComponent("other.json").path
            #expect(try HomeDirectory.configuration(flag: nil, homeFile: homeFile) == .defaults)
            FileManager.default.createFile(atPath: homeFile, contents: Data("{}".utf8))
            #expect(try HomeDirectory.configuration(flag: nil, homeFile: homeFile) == .home(homeFile))
            let missing = #expect(throws: HomeDirectory.MissingConfiguration.self) {
                try HomeDirectory.configuration(flag: other, homeFile: homeFile)
            }
            #expect(missing?.description.contains("\(other) (from --config) does not exist") == true)
            FileManager.default.createFile(atPath: other, contents: Data("{}".utf8))
            #expect(try HomeDirectory.configuration(flag: other, homeFile: homeFile) == .flag(other))
        }
    }
}
