import Foundation
import JetbridgeModel
import Testing

@Suite struct FlightIDTests {
    @Test(arguments: ["ZA101/2026-11-21", "U21/2024-02-29", "9W9999/2000-02-29", "ZA101A/2026-12-31", "AB1/2026-01-01"])
    func valid(text: String) throws {
        let flight = try FlightID(text)
        #expect(flight.rawValue == text)
        #expect(try roundTrip(flight) == flight)
    }

    @Test(arguments: [
        "", "ZA101", "ZA101-2026-11-21", "Z101/2026-11-21", "12101/2026-11-21", "ZA0101/2026-11-21",
        "ZA10101/2026-11-21", "ZA/2026-11-21", "ZA101AB/2026-11-21", "za101/2026-11-21", "ZA101/2026-13-01",
        "ZA101/2026-02-29", "ZA101/1900-02-29", "ZA101/2026-04-31", "ZA101/2026-11-00", "ZA101/26-11-21",
        "ZA101/2026/11/21", "ZA101/2026-11-21 ", "ZA101/0000-01-01", "ZA1٠1/2026-11-21", "ZA101/2026-1x-21",
    ])
    func invalid(text: String) {
        expectValidation(.invalidFlight) { _ = try FlightID(text) }
    }

    @Test func messageSaysWhy() {
        let error = expectValidation(.invalidFlight) { _ = try FlightID("ZA101/2026-02-30") }
        #expect(
            error?.message
                == "invalid flight 'ZA101/2026-02-30': 2026-02-30 is not a calendar date; expected CARRIER+NUMBER/YYYY-MM-DD such as ZA101/2026-11-21"
        )
    }

    @Test func parsingIsLenient() throws {
        #expect(try FlightID(parsing: " za101/2026-11-21\n") == .example)
        let flight = try FlightID("ZA101A/2026-11-21")
        #expect(flight.carrier == "ZA")
        #expect(flight.number == "101A")
        #expect(flight.date == "2026-11-21")
    }

    @Test func decodingRejectsBadShapes() {
        let error = expectValidation(.invalidFlight) {
            _ = try JSONDecoder().decode([FlightID].self, from: Data(#"["ZA101/2026-11-21","nope"]"#.utf8))
        }
        #expect(error?.path == "[1]")
    }
}

@Suite struct SeatTests {
    @Test(arguments: ["1A", "17B", "99K", "10H", "9J"])
    func valid(text: String) throws {
        let seat = try Seat(text)
        #expect(seat.rawValue == text)
        #expect(try roundTrip(seat) == seat)
    }

    @Test(arguments: ["", "B", "17", "0A", "017B", "100A", "17I", "17L", "17b", "B17", "17BB", " 17B", "-1A", "١٧B"])
    func invalid(text: String) {
        expectValidation(.invalidSeat) { _ = try Seat(text) }
    }

    @Test func message() {
        let error = expectValidation(.invalidSeat) { _ = try Seat("017B") }
        #expect(error?.message == "invalid seat '017B': use a row 1–99 and a letter A–K (no I), such as 17B")
        #expect(error?.path == "seat")
    }

    @Test func parsingAndOrder() throws {
        #expect(try Seat(parsing: " 17b ") == .example)
        let seat = try Seat("17B")
        #expect(seat.row == 17)
        #expect(seat.letter == "B")
        #expect(try [Seat("10A"), Seat("2C"), Seat("2A")].sorted() == [Seat("2A"), Seat("2C"), Seat("10A")])
    }
}
