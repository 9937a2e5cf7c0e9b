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
}
