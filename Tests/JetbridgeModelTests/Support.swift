import Foundation
import JetbridgeModel
import JetbridgeTestKit
import Testing

/// Runs `body`, expecting a `ValidationError` with `code`; returns it for further checks.
@discardableResult
func expectValidation(
    _ code: ValidationError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) -> ValidationError? {
    do {
        try body()
        Issue.record("expected \(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as ValidationError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch let error as DecodingError {
        let reason = ValidationError(error)
        #expect(reason.code == code, "\(reason)", sourceLocation: sourceLocation)
        return reason
    } catch {
        Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

/// A fresh directory for one test, removed by the caller's `defer`.
func makeTemporaryDirectory() throws -> URL { try TemporaryDirectory.create(prefix: "JetbridgeModelTests") }

/// The package root, found from this file's location (`Tests/JetbridgeModelTests/Support.swift`).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

// The test kit's fixed ids and dates, under the names this target's tests use.
func uuid(_ n: Int) -> UUID { JetbridgeTestKit.uuid(n) }
func date(_ seconds: Double) -> Date { JetbridgeTestKit.date(seconds) }

func roundTrip<T: Codable>(_ value: T) throws -> T {
    try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
}

// MARK: Key order

/// Records every keyed key in the order `encode(to:)` writes it, as dotted paths (`tag.owner`). Foundation's
/// JSONEncoder on Linux does not keep key order, so it cannot show the record layout.
final class KeyOrderRecorder {
    var keys: [String] = []

    static func keys(of value: some Encodable) throws -> [String] {
        let recorder = KeyOrderRecorder()
        try value.encode(to: RecordingEncoder(recorder: recorder, prefix: ""))
        return recorder.keys
    }
}

private struct RecordingEncoder: Encoder {
    let recorder: KeyOrderRecorder
    let prefix: String
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(KeyedRecorder<Key>(recorder: recorder, prefix: prefix))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { UnkeyedRecorder(recorder: recorder, prefix: prefix) }
    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleRecorder(recorder: recorder, prefix: prefix)
    }
}

private struct KeyedRecorder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let recorder: KeyOrderRecorder
    let prefix: String
    var codingPath: [any CodingKey] = []

    private func path(_ key: Key) -> String { prefix.isEmpty ? key.stringValue : prefix + "." + key.stringValue }
    mutating func encodeNil(forKey key: Key) throws { recorder.keys.append(path(key)) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        recorder.keys.append(path(key))
        try value.encode(to: RecordingEncoder(recorder: recorder, prefix: path(key)))
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        recorder.keys.append(path(key))
        return KeyedEncodingContainer(KeyedRecorder<NestedKey>(recorder: recorder, prefix: path(key)))
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        recorder.keys.append(path(key))
        return UnkeyedRecorder(recorder: recorder, prefix: path(key))
    }
    mutating func superEncoder() -> any Encoder { RecordingEncoder(recorder: recorder, prefix: prefix) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        RecordingEncoder(recorder: recorder, prefix: path(key))
    }
}

private struct UnkeyedRecorder: UnkeyedEncodingContainer {
    let recorder: KeyOrderRecorder
    let prefix: String
    var codingPath: [any CodingKey] = []
    var count = 0

    mutating func encodeNil() throws { count += 1 }
    mutating func encode<T: Encodable>(_ value: T) throws {
        try value.encode(to: RecordingEncoder(recorder: recorder, prefix: "\(prefix)[\(count)]"))
        count += 1
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        defer { count += 1 }
        return KeyedEncodingContainer(KeyedRecorder<NestedKey>(recorder: recorder, prefix: "\(prefix)[\(count)]"))
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        defer { count += 1 }
        return UnkeyedRecorder(recorder: recorder, prefix: "\(prefix)[\(count)]")
    }
    mutating func superEncoder() -> any Encoder { RecordingEncoder(recorder: recorder, prefix: prefix) }
}

private struct SingleRecorder: SingleValueEncodingContainer {
    let recorder: KeyOrderRecorder
    let prefix: String
    var codingPath: [any CodingKey] = []

    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {
        if !(value is String || value is Double || value is Int || value is Bool || value is Float) {
            try value.encode(to: RecordingEncoder(recorder: recorder, prefix: prefix))
        }
    }
}
