import Foundation
import JetbridgeModel
import Testing

@Suite struct LuggageTagTests {
    static let good = #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D", "ZMU"], "weight": 42.0}"#

    @Test func parsesTheDesignExample() throws {
        #expect(try LuggageTag.parse(qrPayload: Self.good) == .example)
        #expect(try LuggageTag.parse(qrPayload: "  " + Self.good + "\r\n") == .example)
    }

    @Test func normalisesCaseAndAcceptsIntegersAndExtraKeys() throws {
        let tag = try LuggageTag.parse(
            qrPayload: #"{"id":"f432bdb8-d84f-4461-8362-aff89f6c493e","owner":["d","zmu"],"weight":42,"airline":"ZA"}"#)
        #expect(tag == .example)
        #expect(tag.owner.description == "D ZMU")
        #expect(
            try LuggageTag.parse(
                qrPayload: #"{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"],"weight":0}"#
            ).weight == 0)
    }

    /// A weight is rounded to the 1/1000 lb a record keeps before it is checked, as the ground decodes a record
    /// (docs/PROTOCOL.md): 1000.0004 is 1000 and −0.0004 is 0 on both sides; 1000.0006 is past the limit on both.
    @Test func aWeightIsRoundedToAThousandthOfAPoundThenChecked() throws {
        func tag(_ weight: String) throws -> LuggageTag {
            try LuggageTag.parse(
                qrPayload: #"{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"],"weight":\#(weight)}"#)
        }
        #expect(try tag("1000.0004").weight == 1000)
        #expect(try tag("-0.0004").weight == 0)
        #expect(try tag("-0.0004").weight.sign == .plus)
        #expect(try tag("42.3456").weight == 42.346)
        // Float 32 first, as the record carries it: 1000.0005 is 1000.00048828125 there, so 1000 on both sides.
        #expect(try tag("1000.0005").weight == 1000)
        let error = expectValidation(.invalidWeight) { _ = try tag("1000.0006") }
        #expect(error?.path == "weight")
    }

    @Test(arguments: [
        (#"{"id": "F432BDB8", "owner": ["D","ZMU"], "weight": 1}"#, ValidationError.Code.invalidUUID, "id"),
        (#"{"id": 7, "owner": ["D","ZMU"], "weight": 1}"#, .wrongType, "id"),
        (#"{"owner": ["D","ZMU"], "weight": 1}"#, .missingField, "id"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "weight": 1}"#, .missingField, "owner"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"]}"#, .missingField, "weight"),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": null}"#, .missingField,
            "weight"
        ),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": "42"}"#, .wrongType,
            "weight"
        ),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": -0.5}"#, .invalidWeight,
            "weight"
        ),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": 1e400}"#, .malformedJSON, ""),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": 5000}"#, .invalidWeight,
            "weight"
        ),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D"], "weight": 1}"#, .invalidOwner, "owner"),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU","X"], "weight": 1}"#, .invalidOwner,
            "owner"
        ),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": [], "weight": 1}"#, .invalidOwner, "owner"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": "D ZMU", "weight": 1}"#, .wrongType, "owner"),
        (
            #"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["DA","ZMU"], "weight": 1}"#, .invalidOwner,
            "owner"
        ),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZM"], "weight": 1}"#, .invalidOwner, "owner"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZM1"], "weight": 1}"#, .invalidOwner, "owner"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["Ø","ZMU"], "weight": 1}"#, .invalidOwner, "owner"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D",7], "weight": 1}"#, .wrongType, "owner[1]"),
        (#"{"id": "F432BDB8-D84F-4461-8362-AFF89F6C493E", "owner": ["D","ZMU"], "weight": 1"#, .malformedJSON, ""),
        ("[1, 2]", .malformedJSON, ""),
        ("42", .malformedJSON, ""),
        ("", .malformedJSON, ""),
        ("   \n", .malformedJSON, ""),
        ("not json", .malformedJSON, ""),
    ])
    func rejects(payload: String, code: ValidationError.Code, path: String) {
        let error = expectValidation(code) { _ = try LuggageTag.parse(qrPayload: payload) }
        #expect(error?.path == path, "\(String(describing: error))")
    }

    @Test func messages() {
        let arity = expectValidation(.invalidOwner) {
            _ = try LuggageTag.parse(
                qrPayload: #"{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU","X"],"weight":1}"#)
        }
        #expect(
            arity?.message
                == #"owner must be a two-element array [initial, family] such as ["D", "ZMU"]; got 3 elements"#)
        let uuid = expectValidation(.invalidUUID) {
            _ = try LuggageTag.parse(qrPayload: #"{"id":"xyz","owner":["D","ZMU"],"weight":1}"#)
        }
        #expect(
            uuid?.description
                == "id: 'xyz' is not a UUID; expected the canonical form like F432BDB8-D84F-4461-8362-AFF89F6C493E")
        let missing = expectValidation(.missingField) {
            _ = try LuggageTag.parse(qrPayload: #"{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"]}"#)
        }
        #expect(missing?.message == "required field 'weight' is missing")
    }

    @Test func hostilePayloads() {
        let huge =
            #"{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"],"weight":1,"x":""#
            + String(repeating: "A", count: 10_000_000) + #""}"#
        let error = expectValidation(.payloadTooLarge) { _ = try LuggageTag.parse(qrPayload: huge) }
        #expect(error?.message == "tag payload is \(huge.utf8.count) bytes; a tag is at most 4096 bytes of JSON")
        // Deep nesting within the size cap fails cleanly instead of exhausting the stack.
        expectValidation(.malformedJSON) { _ = try LuggageTag.parse(qrPayload: String(repeating: "[", count: 4096)) }
        expectValidation(.malformedJSON) {
            _ = try LuggageTag.parse(
                qrPayload: String(repeating: "[", count: 2000) + String(repeating: "]", count: 2000))
        }
        let deep = String(repeating: "{\"a\":", count: 600) + "1" + String(repeating: "}", count: 600)
        expectValidation(.malformedJSON) { _ = try LuggageTag.parse(qrPayload: deep) }
        expectValidation(.malformedJSON) { _ = try LuggageTag.parse(qrPayload: "\u{0}\u{1}\u{FFFF}") }
        expectValidation(.malformedJSON) { _ = try LuggageTag.parse(qrPayload: "{\"id\":\"\u{D7FF}") }
        let padded = String(repeating: " ", count: 4097)
        expectValidation(.payloadTooLarge) { _ = try LuggageTag.parse(qrPayload: padded) }
    }

    @Test func weightRulesForTagsBuiltInCode() throws {
        for weight in [Double.nan, .infinity, -.infinity, -1, 1000.5] {
            var tag = LuggageTag.example
            tag.weight = weight
            expectValidation(.invalidWeight) { try tag.validate() }
        }
        for weight in [0.0, 42.3, 1000] {
            var tag = LuggageTag.example
            tag.weight = weight
            try tag.validate()
        }
    }

    @Test func ownerRules() throws {
        #expect(try Owner(initial: "d", family: "zMu") == Owner.example)
        expectValidation(.invalidOwner) { _ = try Owner(initial: "", family: "ZMU") }
        expectValidation(.invalidOwner) { _ = try Owner(initial: "1", family: "ZMU") }
        expectValidation(.invalidOwner) { _ = try Owner(initial: "D", family: "ZMUX") }
        expectValidation(.invalidOwner) { _ = try Owner(initial: "É", family: "ZMU") }
    }

    @Test func weightRoundTripsExactly() throws {
        var tag = LuggageTag.example
        tag.weight = 42.3
        #expect(try roundTrip(tag).weight == 42.3)
    }
}
