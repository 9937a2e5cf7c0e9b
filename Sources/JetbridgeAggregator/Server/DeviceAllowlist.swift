public import Foundation
import JetbridgeModel
public import JetbridgeStore
import ZeroMQ
import SystemSupport

/// The devices the aggregator admits: device id → CURVE public key (Z85), kept in `<home>/devices.json` as
/// `{"devices":{"cart-1":"<40 characters>", …}}` and replaced atomically on every change; optionally with
/// `"limits":{"cart-1":{"recordsPerFlight":…,"recordsPerSecond":…,"flightsPerDay":…,"bytesPerSecond":…}, "*":{…}}`
/// (docs/AGGREGATOR.md, "Keys and the allow list", limits).
public struct DeviceAllowlist: Hashable, Sendable {
    /// Device id → public key (Z85).
    public private(set) var devices: [String: String]
    /// Limits per device id, `*` for every device without its own; what is not set is ``DeviceLimits/defaults``.
    public var limits: [String: DeviceLimits.Override]

    public init(devices: [String: String] = [:], limits: [String: DeviceLimits.Override] = [:]) {
        self.devices = devices
        self.limits = limits
    }

    /// The limits that hold for `device`: its own settings, then `*`'s, then the defaults.
    public func limits(for device: String) -> DeviceLimits {
        DeviceLimits.defaults.applying(limits["*"]).applying(limits[device])
    }

    /// Each device's flight limits as `apply` takes them: ``limits(for:)``'s records per flight and flights per day,
    /// from this list as it is now (a later reload needs a new value).
    public var storeLimits: StoreLimits {
        let list = self
        return StoreLimits { list.limits(for: $0).flightLimits }
    }

    /// The ZAP handler's view: public key → device id.
    public var byPublicKey: [String: String] {
        Dictionary(devices.map { ($0.value, $0.key) }, uniquingKeysWith: { first, _ in first })
    }

    /// Admits `device` with `publicKey`, replacing its previous key.
    /// - Throws: ``AggregatorError`` `.dataError` for an invalid device id or key, or a key that already
    ///   belongs to another device (one key must name one device, or `User-Id` would be ambiguous).
    public mutating func allow(device: String, publicKey: String) throws {
        try Self.check(device: device)
        let key = publicKey.trimmingCharacters(in: .whitespacesAndNewlines)
        guard Z85.curveKey(key) != nil else {
            throw AggregatorError(
                .dataError, "'\(Validation.visible(publicKey.prefix(60)))' is not a CURVE public key (40 characters of Z85)")
        }
        if let owner = devices.first(where: { $0.value == key && $0.key != device })?.key {
            throw AggregatorError(.dataError, "that public key already belongs to device '\(owner)'")
        }
        devices[device] = key
    }

    /// Removes `device`.
    /// - Returns: Whether it was there.
    @discardableResult
    public mutating func revoke(device: String) -> Bool {
        devices.removeValue(forKey: device) != nil
    }

    static func check(device: String) throws {
        do { try Validation.deviceID(device) } catch {
            throw AggregatorError(.dataError, "'\(Validation.visible(device.prefix(60)))' is not a valid device id: \(error)")
        }
    }

    private struct File: Codable {
        var devices: [String: String]
        var limits: [String: DeviceLimits.Override]?

        init(devices: [String: String], limits: [String: DeviceLimits.Override]?) {
            self.devices = devices
            self.limits = limits
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case devices, limits
        }

        /// Refuses a key it does not know, as `aggregator.json` does (a misspelt `limits` would leave every device
        /// at the defaults unseen).
        init(from decoder: any Decoder) throws {
            do {
                try StrictKeys.check(decoder, known: CodingKeys.self)
            } catch let unknown as StrictKeys.UnknownKey {
                throw AggregatorError(.dataError, unknown.message)
            }
            let container = try decoder.container(keyedBy: CodingKeys.self)
            devices = try container.decode([String: String].self, forKey: .devices)
            limits = try container.decodeIfPresent([String: DeviceLimits.Override].self, forKey: .limits)
        }
    }

    /// Reads the allow list; a missing file is an empty list.
    /// - Throws: ``AggregatorError`` `.dataError` when the file is not a valid allow list.
    public static func load(from url: URL) throws -> DeviceAllowlist {
        guard FileManager.default.fileExists(atPath: url.path) else { return DeviceAllowlist() }
        do {
            let file = try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
            var list = DeviceAllowlist()
            for (device, key) in file.devices { try list.allow(device: device, publicKey: key) }
            for (device, limits) in file.limits ?? [:] {
                if device != "*" { try check(device: device) }
                try limits.check(device: device)
            }
            list.limits = file.limits ?? [:]
            return list
        } catch let error as AggregatorError {
            throw AggregatorError(.dataError, "\(url.path): \(error.message)")
        } catch {
            throw AggregatorError(.dataError, "\(url.path) is not a valid allow list: \(error)")
        }
    }

    /// Writes the allow list atomically (temporary file, fsync, rename, fsync of the directory).
    /// - Throws: ``AggregatorError``.
    public func save(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(File(devices: devices, limits: limits.isEmpty ? nil : limits))
        data.append(0x0A)
        try AtomicFile.write(data, to: url, mode: 0o644)
    }
}
