import Foundation
import JetbridgeModel
import Testing

@Suite struct RecordTests {
    @Test func orderKeysAreInRecordOrder() throws {
        #expect(
            try KeyOrderRecorder.keys(of: Order.example) == [
                "type", "id", "revision", "flight", "seat", "lineItems",
                "lineItems[0].item", "lineItems[0].item.name", "lineItems[0].item.unitPrice", "lineItems[0].count",
                "lineItems[1].item", "lineItems[1].item.name", "lineItems[1].item.unitPrice", "lineItems[1].count",
                "currency", "createdAt", "device",
            ])
    }

    @Test func scanKeysAreInRecordOrder() throws {
        #expect(
            try KeyOrderRecorder.keys(of: Scan.example) == [
                "type", "id", "tag", "tag.id", "tag.owner", "tag.weight", "point", "scannedAt", "flight", "device",
            ])
        #expect(try KeyOrderRecorder.keys(of: Record.scan(.example)).first == "type")
    }

    @Test func jsonShapeOfRecords() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .secondsSince1970
        let order = String(decoding: try encoder.encode(Order.example), as: UTF8.self)
        #expect(
            order
                == #"{"createdAt":1795250000,"currency":"USD","device":"galley-1","flight":"ZA101\/2026-11-21","id":"3F2504E0-4F89-41D3-9A0C-0305E82C3301","lineItems":[{"count":2,"item":{"name":"Peanuts","unitPrice":200}},{"count":1,"item":{"name":"Chips","unitPrice":300}}],"revision":1,"seat":"17B","type":"order"}"#
        )
        let scan = String(decoding: try encoder.encode(Scan.example), as: UTF8.self)
        #expect(
            scan
                == #"{"device":"ramp-1","flight":"ZA101\/2026-11-21","id":"9B2E7C1A-0D4F-4E8B-A6C3-5F1D2E3A4B5C","point":"origin","scannedAt":1795246400,"tag":{"id":"F432BDB8-D84F-4461-8362-AFF89F6C493E","owner":["D","ZMU"],"weight":42},"type":"scan"}"#
        )
    }

    @Test func roundTrips() throws {
        #expect(try roundTrip(Order.example) == .example)
        #expect(try roundTrip(Scan.example) == .example)
        let records: [Record] = [.order(.example), .scan(.example)]
        #expect(try roundTrip(records) == records)
        #expect(records.map(\.id) == [Order.example.id, Scan.example.id])
        #expect(records.map(\.device) == ["galley-1", "ramp-1"])
        #expect(records.allSatisfy { $0.flight == .example })
        for record in records { try record.validate() }
    }

    func records(_ json: String) throws -> [Record] {
        try JSONDecoder().decode([Record].self, from: Data(json.utf8))
    }

    func orderJSON(_ replacing: String = "", with: String = "") -> String {
        let json = String(decoding: try! JSONEncoder().encode(Order.example), as: UTF8.self)
        return replacing.isEmpty ? json : json.replacingOccurrences(of: replacing, with: with)
    }

    @Test func unknownAndMissingTypes() {
        let unknown = expectValidation(.invalidRecordType) { _ = try records(#"[{"type":"refund","id":"x"}]"#) }
        #expect(unknown?.message == "unknown record type 'refund'; expected 'order' or 'scan'")
        #expect(unknown?.path == "[0].type")
        let missing = expectValidation(.missingField) { _ = try records(#"[{"id":"x"}]"#) }
        #expect(missing?.path == "[0].type")
        expectValidation(.invalidRecordType) { _ = try JSONDecoder().decode(Scan.self, from: Data(orderJSON().utf8)) }
    }

    @Test func badFieldsInsideABatchNameTheRecord() throws {
        let scanJSON = String(decoding: try JSONEncoder().encode(Scan.example), as: UTF8.self)
        let seat = expectValidation(.invalidSeat) {
            _ = try records("[\(scanJSON),\(orderJSON(#""17B""#, with: #""017B""#))]")
        }
        #expect(seat?.path == "[1].seat")
        let flight = expectValidation(.invalidFlight) {
            _ = try records("[\(orderJSON("2026-11-21", with: "2026-11-31"))]")
        }
        #expect(flight?.path == "[0].flight")
        let id = expectValidation(.invalidUUID) { _ = try records("[\(orderJSON("3F2504E0-", with: "3F2504E0"))]") }
        #expect(id?.path == "[0].id")
        let owner = expectValidation(.invalidOwner) {
            _ = try records("[\(scanJSON.replacingOccurrences(of: #""ZMU""#, with: #""ZM""#))]")
        }
        #expect(owner?.path == "[0].tag.owner")
        let point = expectValidation(.invalidScanPoint) {
            _ = try records("[\(scanJSON.replacingOccurrences(of: "origin", with: "gate"))]")
        }
        #expect(point?.path == "[0].point")
        let count = expectValidation(.missingField) {
            _ = try records("[\(orderJSON(#""count":2"#, with: #""kount":2"#))]")
        }
        #expect(count?.path.hasPrefix("[0].lineItems[0]") == true)
    }

    @Test func decodedButInvalidRecordsFailValidation() throws {
        let zeroCount = try records("[\(orderJSON(#""count":2"#, with: #""count":0"#))]")[0]
        expectValidation(.invalidCount) { try zeroCount.validate() }
        var scan = Scan.example
        scan.tag.weight = -1
        let negative = expectValidation(.invalidWeight) { try Record.scan(scan).validate() }
        #expect(negative?.path == "tag.weight")
        scan = .example
        scan.device = ""
        expectValidation(.invalidDevice) { try Record.scan(scan).validate() }
    }

    @Test func scanPointParsing() throws {
        #expect(try ScanPoint(parsing: "Origin") == .origin)
        #expect(try ScanPoint(parsing: "destination") == .destination)
        let error = expectValidation(.invalidScanPoint) { _ = try ScanPoint(parsing: "gate") }
        #expect(error?.message == "scan point 'gate' is unknown; use origin or destination")
    }

    @Test func validationErrorsAreCodable() throws {
        let error = ValidationError(.invalidSeat, "bad", path: "[3].seat", file: nil)
        #expect(try roundTrip(error) == error)
    }
}
