import Foundation
import JetbridgeAggregator
import JetbridgeStore
import Testing

@Suite("Limits in the allow list: flights per day and bytes per second")
struct DeviceLimitsFileTests {
    @Test func theNewLimitsHaveDefaultsAndAreReadCheckedAndKept() throws {
        #expect(DeviceLimits.defaults.flightsPerDay == 500)
        #expect(DeviceLimits.defaults.bytesPerSecond == 2 << 20)
        let fixture = try Fixture()
        defer { fixture.remove() }
        let file = fixture.directory.appendingPathComponent("devices.json")
        try Data(
            #"{"devices":{},"limits":{"*":{"flightsPerDay":40},"ramp-9":{"flightsPerDay":900,"bytesPerSecond":65536}}}"#
                .utf8
        ).write(to: file)
        let loaded = try DeviceAllowlist.load(from: file)
        #expect(
            loaded.limits(for: "ramp-9")
                == DeviceLimits(
                    recordsPerFlight: 100_000, recordsPerSecond: 10_000, flightsPerDay: 900, bytesPerSecond: 65_536))
        #expect(loaded.limits(for: "cart-1").flightsPerDay == 40)
        #expect(loaded.limits(for: "cart-1").bytesPerSecond == 2 << 20)
        #expect(
            loaded.storeLimits.limits(for: "ramp-9")
                == DeviceFlightLimits(recordsPerFlight: 100_000, flightsPerDay: 900))
        try loaded.save(to: file)
        #expect(try DeviceAllowlist.load(from: file) == loaded)
        for (key, value) in [("flightsPerDay", 0), ("bytesPerSecond", -1)] {
            try Data(#"{"devices":{},"limits":{"cart-1":{"\#(key)":\#(value)}}}"#.utf8).write(to: file)
            do {
                _ = try DeviceAllowlist.load(from: file)
                Issue.record("\(key) \(value) was accepted")
            } catch let error as AggregatorError {
                #expect(error.message.contains("limits of 'cart-1': \(key) \(value) must be at least 1"), "\(error)")
                #expect(error.message.contains(file.path))
            }
        }
    }

    /// A misspelt key is refused with the file, the device and the keys it may hold, as `aggregator.json`'s are: a
    /// typo in a limit meant to hold a stolen key back would otherwise leave the default in force unseen.
    @Test func anUnknownKeyIsRefusedAndNamed() throws {
        let fixture = try Fixture()
        defer { fixture.remove() }
        let file = fixture.directory.appendingPathComponent("devices.json")
        for (json, expected) in [
            (
                #"{"devices":{},"limits":{"cart-7":{"recordPerSecond":5}}}"#,
                "limits of 'cart-7': unknown key 'recordPerSecond'; known keys: bytesPerSecond, flightsPerDay, "
                    + "recordsPerFlight, recordsPerSecond"
            ),
            (
                #"{"devices":{},"limit":{"*":{"recordsPerSecond":5}}}"#,
                "unknown key 'limit'; known keys: devices, limits"
            ),
        ] {
            try Data(json.utf8).write(to: file)
            do {
                let loaded = try DeviceAllowlist.load(from: file)
                Issue.record("\(json) was accepted: \(loaded)")
            } catch let error as AggregatorError {
                #expect(error.message == "\(file.path): \(expected)")
                #expect(error.exitCode == 65)
            }
        }
    }
}
