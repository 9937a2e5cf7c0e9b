import Foundation
import JetbridgeModel
import JetbridgeStore
import NIOHTTP1
import SystemSupport

/// The console's JSON answers (`/api/…`), each one bounded page of one store read (``ConsoleReading``). Called on the
/// console's read pool, never on the event loop. Device text (device ids, item names, reasons) is escaped with
/// ``InertText`` before it is encoded; the page shows it through `textContent` only.
struct ConsoleAPI: Sendable {
    let store: any ConsoleReading
    let devicesFile: URL
    /// `--insecure`: no allow list is consulted, so no device is shown as revoked.
    var insecure = false
    /// The clock (tests fix it).
    var now: @Sendable () -> Date = { Date() }
    /// How long the problems filter reads flights' totals before it answers with the problem flights among those read,
    /// saying how many it has not read yet (``FlightsPage/unread``). Only the first answers after a start come near
    /// it: they read each of the day's flights' orders once (about 2 s for 101 flights, one of them with 600,000 bags,
    /// on PostgreSQL); the totals are kept, the page asks again every 3 s and the console reads the rest meanwhile
    /// (``warm(using:until:)``). A flight not read since the start is read only in the first half of the budget: one
    /// such read cannot be cut short (0.6 s for the 600,000-bag flight on PostgreSQL). Tests shorten it.
    var problemReadBudget: Duration = .milliseconds(500)
    /// Answers being read now: ``warm()`` waits while there are any, so that it never takes CPU from an operator's
    /// answer on a busy machine.
    private let answering = Locked(0)
    /// The board's list of flights, kept between answers (``ConsoleFlightList``).
    let flightList = ConsoleFlightList()

    /// Flights per page of the board.
    static let flightsPerPage = 25
    /// Bags per page of a flight.
    static let bagsPerPage = 50
    /// Flights whose totals the "problems only" filter reads at most (one day's flights at a large airport).
    static let problemScanLimit = 400

    func answer(_ request: MetricsServer.Request) -> MetricsServer.Response {
        answering.withLock { $0 += 1 }
        defer { answering.withLock { $0 -= 1 } }
        do {
            let body: any Encodable
            switch request.path {
            case "/api/flights": body = try flights(request.query)
            case "/api/flight": body = try flight(request.query)
            case "/api/devices": body = try devices()
            case "/api/bag": body = try bag(request.query)
            case "/api/receipt": body = try receipt(request.query)
            default:
                return Self.json(.notFound, Failure(error: "no such endpoint \(InertText.escape(request.path))"))
            }
            return Self.json(.ok, body)
        } catch let error as Refusal {
            return Self.json(.badRequest, Failure(error: error.message))
        } catch {
            return Self.json(.serviceUnavailable, Failure(error: "the store did not answer: \(InertText.escape("\(error)"))"))
        }
    }

    /// A request the console cannot answer as asked: 400 with this message.
    struct Refusal: Error {
        var message: String
    }

    struct Failure: Encodable {
        var error: String
    }

    static func json(_ status: HTTPResponseStatus, _ body: any Encodable) -> MetricsServer.Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        let text = (try? encoder.encode(body)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return .init(status: status, contentType: "application/json; charset=utf-8", body: text)
    }

    // MARK: Flights

    struct BagCounts: Encodable {
        var total, arrived, inTransit, missing, checked: Int
    }

    struct Item: Encodable {
        var name: String
        var count: Int
        var revenue: Int
        var revenueText: String
    }

    /// A flight's devices that announced it, by their state in the fleet report (docs/AGGREGATOR.md, "The fleet of a
    /// flight").
    struct FleetCounts: Encodable {
        var announced, confirmed, sending, silent: Int
    }

    struct FlightLine: Encodable {
        var flight: String
        var date: String
        /// Devices that stored an order or a scan of the flight ("devices seen").
        var devices: [String]
        var fleet: FleetCounts
        var orders: Int
        var currency: String
        /// Minor units of `currency`.
        var revenue: Int
        var revenueText: String
        var items: [Item]
        var bags: BagCounts
        var error: String?
        /// Missing bags, or sales that cannot be totalled.
        var problem: Bool
    }

    struct CurrencyTotal: Encodable {
        var currency: String
        var revenue: Int
        var revenueText: String
        var flights: Int
    }

    struct FlightsPage: Encodable {
        var now: Date
        var today: String
        var date: String?
        var dates: [String]
        var flights: [FlightLine]
        var page: Int
        var pages: Int
        var matching: Int
        /// Revenue of the listed flights per currency: never added across currencies.
        var revenueByCurrency: [CurrencyTotal]
        var note: String?
        /// Problems filter: flights of the day not read yet (``ConsoleAPI/problemReadBudget``), absent when none.
        var unread: Int?
    }

    static func line(_ summary: ConsoleFlightSummary, fleet: FleetFlightCounts?) -> FlightLine {
        let bags = summary.bags
        return FlightLine(
            flight: summary.flight.rawValue, date: summary.flight.date,
            devices: summary.devices.map(InertText.escape),
            fleet: FleetCounts(
                announced: fleet?.announced ?? 0, confirmed: fleet?.confirmed ?? 0, sending: fleet?.sending ?? 0,
                silent: fleet?.silent ?? 0),
            orders: summary.orders, currency: summary.currency,
            revenue: summary.revenue,
            revenueText: summary.currency.isEmpty
                ? "-" : NumberText.groupedMoney(summary.revenue, currency: summary.currency) + " " + summary.currency,
            items: summary.items.map {
                Item(
                    name: InertText.escape($0.name), count: $0.count, revenue: $0.revenue,
                    revenueText: NumberText.groupedMoney($0.revenue, currency: summary.currency))
            },
            bags: BagCounts(
                total: bags.total, arrived: bags.arrived, inTransit: bags.inTransit, missing: bags.missing,
                checked: bags.checked),
            error: summary.error.map(InertText.escape), problem: bags.missing > 0 || summary.error != nil)
    }

    /// Today's flights first (UTC), then the others by date, latest first; `date` for one day, `q` for flights whose
    /// id contains it, `problems=1` for problem flights only (within one day: today's unless `date` says), `page`. The
    /// list of flights is kept between answers once it is long (``ConsoleFlightList``).
    func flights(_ query: [String: String]) throws -> FlightsPage {
        let now = now()
        let today = Self.day(now)
        var date = query["date"].flatMap { $0.isEmpty ? nil : $0 }
        if let date, !Self.isDay(date) { throw Refusal(message: "date must be YYYY-MM-DD, not '\(InertText.escape(date))'") }
        let problemsOnly: Bool
        switch query["problems"] ?? "" {
        case "", "0": problemsOnly = false
        case "1": problemsOnly = true
        case let text: throw Refusal(message: "problems must be 1 or 0, not '\(InertText.escape(text))'")
        }
        if problemsOnly && date == nil { date = today }
        let search = (query["q"] ?? "").trimmingCharacters(in: .whitespaces).uppercased()
        let list = try flightList.current(reading: store.consoleFlights)
        let dates = list.dates
        var chosen = date.map { Array(list.flights(on: $0)) } ?? list.todayFirst(today)
        if !search.isEmpty { chosen.removeAll { !$0.rawValue.contains(search) } }
        var note: String?
        var unread: Int?
        var summaries: [ConsoleFlightSummary] = []
        let page = try Self.page(query["page"])
        let matching: Int
        if problemsOnly {
            if chosen.count > Self.problemScanLimit {
                note = "only the first \(Self.problemScanLimit) of \(chosen.count) flights were checked for problems"
                chosen = Array(chosen.prefix(Self.problemScanLimit))
            }
            let started = ContinuousClock.now
            var read: [ConsoleFlightSummary] = []
            for flight in chosen {
                let elapsed = ContinuousClock.now - started
                if !read.isEmpty && elapsed > problemReadBudget { break }
                if !read.isEmpty && elapsed > problemReadBudget / 2 && !store.consoleSummaryIsKept(flight: flight) {
                    continue
                }
                read.append(try store.consoleSummary(flight: flight))
            }
            if read.count < chosen.count {
                unread = chosen.count - read.count
                note = [
                    note,
                    "\(chosen.count - read.count) of \(chosen.count) flights not read yet since the console started: "
                        + "they are being read, and this list fills in as it refreshes",
                ].compactMap { $0 }.joined(separator: "; ")
            }
            let problems = read.filter { $0.bags.missing > 0 || $0.error != nil }
            matching = problems.count
            summaries = Array(problems.dropFirst((page - 1) * Self.flightsPerPage).prefix(Self.flightsPerPage))
        } else {
            matching = chosen.count
            summaries = try chosen.dropFirst((page - 1) * Self.flightsPerPage).prefix(Self.flightsPerPage).map(
                store.consoleSummary)
        }
        var totals: [String: CurrencyTotal] = [:]
        for summary in summaries where !summary.currency.isEmpty && summary.error == nil {
            var total = totals[summary.currency] ?? CurrencyTotal(
                currency: summary.currency, revenue: 0, revenueText: "", flights: 0)
            guard let sum = try? Money.add(total.revenue, summary.revenue, what: "revenue") else { continue }
            total.revenue = sum
            total.flights += 1
            total.revenueText = NumberText.groupedMoney(sum, currency: summary.currency) + " " + summary.currency
            totals[summary.currency] = total
        }
        // One read for the page's flights, not one per flight.
        let fleet = try store.consoleFleet(flights: summaries.map(\.flight), now: now)
        return FlightsPage(
            now: now, today: today, date: date, dates: dates,
            flights: summaries.map { Self.line($0, fleet: fleet[$0.flight.rawValue]) }, page: page,
            pages: max(1, (matching + Self.flightsPerPage - 1) / Self.flightsPerPage), matching: matching,
            revenueByCurrency: totals.values.sorted { $0.currency < $1.currency }, note: note, unread: unread)
    }

    /// Reads today's flights' totals once, so that the store keeps them for the board's first answer. Failures are
    /// left for the answers to report. From the last of today's flights back: the board lists them from the first, so
    /// an answer asked for meanwhile (on the other read thread) does not decode the same flights at the same time
    /// (before, both decoded the first page's orders side by side, and the first answer took twice as long). Between
    /// two flights it waits while an answer is being read: on two cores shared with the store thread, the operator's
    /// answer comes first.
    /// - Parameters:
    ///   - reader: The reader to read them on: ``store``, or another reader sharing its kept totals.
    ///   - stopped: Whether the console is shutting down.
    func warm(using reader: (any ConsoleReading)? = nil, until stopped: @Sendable () -> Bool = { false }) {
        let store = reader ?? self.store
        let today = Self.day(now())
        guard let list = try? flightList.current(reading: store.consoleFlights) else { return }
        for flight in list.flights(on: today).reversed() {
            while answering.withLock({ $0 }) > 0 && !stopped() { Thread.sleep(forTimeInterval: 0.02) }
            if stopped() { return }
            _ = try? store.consoleSummary(flight: flight)
        }
    }

    // MARK: One flight

    struct DeviceLine: Encodable {
        var device: String
        /// `confirmed`, `sending` or `silent` (the fleet report's state), `not-announced` for a device that never
        /// announced the flight.
        var fleetState: String
        /// Its last announcement of the flight.
        var announcedAt: Date?
        /// When the ground confirmed its summary of the flight after that announcement.
        var confirmedAt: Date?
        var orders: Int
        var scans: Int
        var lastContact: Date?
        /// Seconds since the last contact.
        var lagSeconds: Double?
        var rejects: Int
        var lastRejectAt: Date?
        var lastRejectReason: String?
        var limited: Int
    }

    struct BagLine: Encodable {
        var tag: String
        var owner: String
        var weight: Double
        var status: String
        var departedAt: Date?
        var arrivedAt: Date?
        var lastScanAt: Date
        var lastPoint: String?
        var lastDevice: String?
        var ownerConflict: Bool
        var flight: String
    }

    struct FlightPage: Encodable {
        var now: Date
        var summary: FlightLine
        var devices: [DeviceLine]
        var status: String
        var bags: [BagLine]
        var after: String?
        var next: String?
    }

    static func bagLine(_ bag: ConsoleBag) -> BagLine {
        BagLine(
            tag: bag.bag.tagID.uuidString, owner: bag.bag.owner.description, weight: bag.bag.weight,
            status: bag.status.rawValue, departedAt: bag.bag.departedAt, arrivedAt: bag.bag.arrivedAt,
            lastScanAt: bag.bag.newestScannedAt, lastPoint: bag.lastPoint?.rawValue,
            lastDevice: bag.lastDevice.map(InertText.escape), ownerConflict: bag.bag.ownerConflict,
            flight: bag.bag.flight.rawValue)
    }

    /// `flight=ID`; `status=missing|in-transit|arrived|all` (default: missing when there are missing bags, else
    /// all); `after=TAG` for the next page.
    func flight(_ query: [String: String]) throws -> FlightPage {
        let flight = try Self.flightID(query["flight"])
        let now = now()
        let summary = try store.consoleSummary(flight: flight)
        let status: BagStatus?
        switch query["status"] ?? "" {
        case "": status = summary.bags.missing > 0 ? .missing : nil
        case "all": status = nil
        case let text:
            // `checked` is reserved (no scan today leaves a bag in it): the page offers the other three.
            guard let known = BagStatus(rawValue: text), known != .checked else {
                throw Refusal(message: "status must be missing, in-transit, arrived or all, not '\(InertText.escape(text))'")
            }
            status = known
        }
        let after = try query["after"].flatMap { $0.isEmpty ? nil : try Self.tag($0) }
        let page = try store.consoleBags(flight: flight, status: status, after: after, limit: Self.bagsPerPage)
        let report = try store.fleetReport(flight: flight, now: now)
        let fleet = Dictionary(
            report.devices.filter { $0.announcedAt != nil }.map { ($0.device, $0) }, uniquingKeysWith: { first, _ in first })
        let devices = try store.consoleDevices(flight: flight).map { device in
            let statistics = device.statistics
            let row = fleet[device.device]
            return DeviceLine(
                device: InertText.escape(device.device), fleetState: row?.state.rawValue ?? "not-announced",
                announcedAt: row?.announcedAt, confirmedAt: row?.confirmedAt, orders: device.orders, scans: device.scans,
                lastContact: statistics?.lastSync, lagSeconds: statistics?.lastSync.map { now.timeIntervalSince($0) },
                rejects: statistics?.rejects ?? 0, lastRejectAt: statistics?.lastRejectAt,
                lastRejectReason: statistics?.lastRejectReason.map(InertText.escape), limited: statistics?.limited ?? 0)
        }
        return FlightPage(
            now: now, summary: Self.line(summary, fleet: FleetFlightCounts(report)), devices: devices, status: status?.rawValue ?? "all",
            bags: page.bags.map(Self.bagLine), after: after?.uuidString, next: page.next?.uuidString)
    }

    // MARK: Devices, bags, receipts

    struct DevicesPage: Encodable {
        struct Line: Encodable {
            var device: String
            var lastSync: Date?
            var batches, records, new, duplicates, rejects, limited: Int
            var lastRejectAt: Date?
            var lastRejectReason: String?
            /// On the allow list now (`false`: revoked, or never allowed); `nil` in insecure mode, which has none, and
            /// when the allow list cannot be read (`serve` keeps the list it had: not known here).
            var allowed: Bool?
        }
        var now: Date
        var insecure: Bool
        var devices: [Line]
        var allowListError: String?
    }

    func devices() throws -> DevicesPage {
        var allowed: Set<String> = []
        var allowListError: String?
        do { allowed = Set(try DeviceAllowlist.load(from: devicesFile).devices.keys) } catch {
            allowListError = InertText.escape("\(error)")
        }
        return DevicesPage(
            now: now(), insecure: insecure,
            devices: try store.deviceReport().devices.map {
                .init(
                    device: InertText.escape($0.device), lastSync: $0.lastSync, batches: $0.batches,
                    records: $0.records, new: $0.new, duplicates: $0.duplicates, rejects: $0.rejects,
                    limited: $0.limited, lastRejectAt: $0.lastRejectAt,
                    lastRejectReason: $0.lastRejectReason.map(InertText.escape),
                    allowed: insecure || allowListError != nil ? nil : allowed.contains($0.device))
            }, allowListError: allowListError)
    }

    struct BagPage: Encodable {
        var now: Date
        var tag: String
        var bags: [BagLine]
    }

    func bag(_ query: [String: String]) throws -> BagPage {
        let tag = try Self.tag(query["tag"] ?? "")
        return BagPage(now: now(), tag: tag.uuidString, bags: try store.consoleBag(tag: tag).map(Self.bagLine))
    }

    struct ReceiptPage: Encodable {
        var now: Date
        var flight: String
        var seat: String
        /// The receipt as `receipts/` holds it (`.txt`), rendered from the database now; `nil` when the seat has no
        /// orders.
        var text: String?
        var error: String?
    }

    func receipt(_ query: [String: String]) throws -> ReceiptPage {
        let flight = try Self.flightID(query["flight"])
        let seatText = query["seat"] ?? ""
        let seat: Seat
        do { seat = try Seat(parsing: seatText) } catch {
            throw Refusal(message: "seat '\(InertText.escape(seatText))' is not a seat: \(error)")
        }
        do {
            let receipt = try store.receipt(flight: flight, seat: seat)
            return ReceiptPage(now: now(), flight: flight.rawValue, seat: seat.rawValue, text: receipt?.text, error: nil)
        } catch let error as ValidationError {
            return ReceiptPage(
                now: now(), flight: flight.rawValue, seat: seat.rawValue, text: nil,
                error: InertText.escape("\(error)"))
        }
    }

    // MARK: Parameters

    static func flightID(_ text: String?) throws -> FlightID {
        guard let text, !text.isEmpty else { throw Refusal(message: "flight is missing (flight=ZA101/2026-11-21)") }
        do { return try FlightID(parsing: text) } catch {
            throw Refusal(message: "'\(InertText.escape(text))' is not a flight id such as ZA101/2026-11-21")
        }
    }

    static func tag(_ text: String) throws -> UUID {
        guard let tag = UUID(uuidString: text.trimmingCharacters(in: .whitespaces)) else {
            throw Refusal(message: "'\(InertText.escape(text))' is not a tag id (a UUID such as 7C4E…-…)")
        }
        return tag
    }

    /// `YYYY-MM-DD` of `date` in UTC (the board's "today", and ``FlightBagsReader``'s recent flights).
    static func day(_ date: Date) -> String {
        String(ISO8601DateFormatter.string(from: date, timeZone: TimeZone(identifier: "UTC")!, formatOptions: [.withFullDate]))
    }

    /// Whether `text` is a day of the calendar written `YYYY-MM-DD` (`2026-02-30` is not).
    static func isDay(_ text: String) -> Bool {
        let shaped =
            text.count == 10
            && text.enumerated().allSatisfy { index, character in
                index == 4 || index == 7 ? character == "-" : character.isASCII && character.isNumber
            }
        guard shaped else { return false }
        let parts = text.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3, (1...12).contains(parts[1]) else { return false }
        let (year, month) = (parts[0], parts[1])
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return (1...days).contains(parts[2])
    }

    /// The highest page asked for: 25 million flights, far past any store, and far from overflowing an offset.
    static let maximumPage = 1_000_000

    /// `page=N`: a whole number from 1 to ``maximumPage``; absent or empty, the first page.
    static func page(_ text: String?) throws -> Int {
        guard let text, !text.isEmpty else { return 1 }
        guard let page = Int(text), (1...maximumPage).contains(page) else {
            throw Refusal(
                message:
                    "page must be a whole number from 1 to \(maximumPage), not "
                    + "'\(InertText.escape(String(text.prefix(40))))'")
        }
        return page
    }
}
