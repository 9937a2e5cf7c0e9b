import FileQueue
import Foundation
import JetbridgeModel
import Testing

@Suite("Many capture processes at once")
struct ConcurrencyTests {
    @Test("4 attendants × 50 orders and a bulk scan at the same time: nothing lost, sequences unique")
    func attendantsAndScanner() async throws {
        let sandbox = try AgentSandbox()
        let tags = (0..<3000).map { _ in UUID() }
        let input = Data(tags.map { Tags.json(id: $0) }.joined(separator: "\n").utf8)
        let attendants = 4
        let ordersEach = 50
        // Thread 0 is the scanner; the others are attendants, each running `order` processes one after another.
        let outputs = try await onThreads(attendants + 1) { index -> [String] in
            if index == 0 {
                let run = try sandbox.agent(["scan", "--at", "origin"], stdin: input)
                return run.status == 0 ? [] : ["scan failed: \(run)"]
            }
            var ids: [String] = []
            for number in 0..<ordersEach {
                let run = try sandbox.agent([
                    "order", "--seat", "\(index * 10 + number % 10)A", "--item", "Chips=\(number % 9 + 1)",
                ])
                ids.append(run.orderID ?? "order failed: \(run)")
            }
            return ids
        }
        let failures = outputs.joined().filter { !$0.hasPrefix("order ") && UUID(uuidString: $0) == nil }
        #expect(failures.isEmpty, "\(failures.prefix(3))")
        let printed = Set(outputs.dropFirst().joined())
        #expect(printed.count == attendants * ordersEach)

        let records = try sandbox.records()
        #expect(records.map(\.sequence) == Array(1...UInt64(tags.count + attendants * ordersEach)))
        let decoded = try sandbox.decodedRecords()
        let orderIDs = decoded.compactMap { record -> String? in
            if case .order(let order) = record { order.id.uuidString } else { nil }
        }
        let scanned = decoded.compactMap { record -> UUID? in
            if case .scan(let scan) = record { scan.tag.id } else { nil }
        }
        #expect(Set(orderIDs) == printed)
        #expect(orderIDs.count == printed.count)
        #expect(scanned == tags, "the scanner's records keep their input order")
        #expect(try sandbox.status()["records"] as? Int == records.count)
    }
}
