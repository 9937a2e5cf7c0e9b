import FileQueue
import Foundation
import JetbridgeProtocol
import SystemSupport
import Testing

@testable import JetbridgeAgent

/// An ack whose numbers no ground can mean (issue 23): ignored as if it had not come, never acted on, never counted
/// (docs/PROTOCOL.md, "Bounds of an ack").
@Suite("SyncWindow: acks outside the bounds")
struct AckBoundsTests {
    /// One absurd ack for a batch of three records, named for the test's output.
    struct Absurd: Sendable, CustomTestStringConvertible {
        let testDescription: String
        let status: Ack.Status
        var new: Int?
        var duplicates: Int?
        var index: Int?
        var retryAfter: Double?
        var supported: [Int]?

        func ack(for batch: SyncWindow.Batch) -> Ack {
            Ack(
                device: "cart-1", first: batch.first, last: batch.last, status: status, new: new,
                duplicates: duplicates, index: index, reason: status == .stored ? nil : "hostile",
                supported: supported, retryAfter: retryAfter)
        }
    }

    static let absurd: [Absurd] = [
        Absurd(testDescription: "limited, retryAfter inf", status: .limited, retryAfter: .infinity),
        Absurd(testDescription: "limited, retryAfter 1e300", status: .limited, retryAfter: 1e300),
        Absurd(testDescription: "limited, retryAfter 1e19", status: .limited, retryAfter: 1e19),
        Absurd(testDescription: "limited, retryAfter -1", status: .limited, retryAfter: -1),
        Absurd(testDescription: "limited, retryAfter NaN", status: .limited, retryAfter: .nan),
        Absurd(testDescription: "limited, retryAfter -inf", status: .limited, retryAfter: -.infinity),
        Absurd(testDescription: "limited, retryAfter just over an hour", status: .limited, retryAfter: 3600.5),
        Absurd(testDescription: "retry, retryAfter inf", status: .retry, retryAfter: .infinity),
        Absurd(testDescription: "stored, new Int.max", status: .stored, new: .max, duplicates: 0),
        Absurd(testDescription: "stored, new Int.max alone", status: .stored, new: .max),
        Absurd(testDescription: "stored, new Int.min", status: .stored, new: .min, duplicates: 3),
        Absurd(testDescription: "stored, new -1", status: .stored, new: -1, duplicates: 4),
        Absurd(testDescription: "stored, duplicates Int.max", status: .stored, new: 0, duplicates: .max),
        Absurd(testDescription: "stored, duplicates -1", status: .stored, new: 3, duplicates: -1),
        Absurd(testDescription: "stored, duplicates Int.min alone", status: .stored, duplicates: .min),
        Absurd(testDescription: "stored, new + duplicates > count", status: .stored, new: 3, duplicates: 1),
        Absurd(testDescription: "stored, new + duplicates < count", status: .stored, new: 1, duplicates: 1),
        Absurd(testDescription: "stored, new > count alone", status: .stored, new: 4),
        Absurd(testDescription: "rejected, index = count", status: .rejected, index: 3),
        Absurd(testDescription: "rejected, index Int.max", status: .rejected, index: .max),
        Absurd(testDescription: "rejected, index -2", status: .rejected, index: -2),
        Absurd(testDescription: "rejected, index Int.min", status: .rejected, index: .min),
        Absurd(
            testDescription: "unsupported-version, 1,000 versions", status: .unsupportedVersion,
            supported: Array(1...1000)),
    ]

    static func window() -> (SyncWindow, id: Int) {
        var window = SyncWindow(
            acknowledgedThrough: 0,
            limits: SyncWindow.Limits(batchRecords: 3, batchBytes: 1 << 20, window: 4, ackTimeout: 10, jitter: 0),
            seed: 1)
        let id = window.add(
            read: (1...3).map { SyncWindow.Record(sequence: $0, payload: Data("r\($0)".utf8)) }, now: 0)!
        window.sent(batchID: id, now: 0)
        return (window, id)
    }

    @Test(
        "an absurd ack is ignored: the batch waits on as before, goes again on its timeout, and a sane ack stores it",
        arguments: absurd)
    func ignored(_ absurd: Absurd) throws {
        var (window, id) = Self.window()
        let before = try #require(window.batch(id: id))
        let outcome = window.apply(absurd.ack(for: before), now: 1)
        guard case .invalid(let problem) = outcome else {
            Issue.record("applied: \(outcome)")
            return
        }
        #expect(!problem.isEmpty)
        // Nothing changed: not finished, not rescheduled, nothing set aside or acknowledged.
        #expect(window.batch(id: id) == before)
        #expect(window.acknowledgedThrough == 0)
        #expect(window.setAside.isEmpty)
        #expect(window.batchesToSend(now: 9.9).isEmpty)
        #expect(window.batchesToSend(now: 10) == [id])
        window.sent(batchID: id, now: 10)
        let stored = Ack(
            device: "cart-1", first: before.first, last: before.last, status: .stored, new: 3, duplicates: 0)
        #expect(window.apply(stored, now: 11) == .stored(records: 3, new: 3, duplicates: 0))
        #expect(window.acknowledgedThrough == 3)
    }

    @Test("the edges of the bounds are acks like any other")
    func edgesAccepted() throws {
        func apply(_ absurd: Absurd) throws -> SyncWindow.AckOutcome {
            var (window, id) = Self.window()
            return window.apply(absurd.ack(for: try #require(window.batch(id: id))), now: 1)
        }
        #expect(try apply(Absurd(testDescription: "", status: .limited, retryAfter: 3600)) == .limited(at: 3601))
        #expect(try apply(Absurd(testDescription: "", status: .limited, retryAfter: 0)) == .limited(at: 2))
        #expect(try apply(Absurd(testDescription: "", status: .limited)) == .limited(at: 2))
        #expect(
            try apply(Absurd(testDescription: "", status: .stored, new: 3, duplicates: 0))
                == .stored(records: 3, new: 3, duplicates: 0))
        #expect(
            try apply(Absurd(testDescription: "", status: .stored, new: 0, duplicates: 3))
                == .stored(records: 3, new: 0, duplicates: 3))
        #expect(
            try apply(Absurd(testDescription: "", status: .stored, new: 1))
                == .stored(records: 3, new: 1, duplicates: 2))
        #expect(
            try apply(Absurd(testDescription: "", status: .stored, duplicates: 2))
                == .stored(records: 3, new: 1, duplicates: 2))
        #expect(try apply(Absurd(testDescription: "", status: .stored)) == .stored(records: 3, new: 3, duplicates: 0))
        #expect(
            try apply(Absurd(testDescription: "", status: .rejected, index: -1))
                == .rebuild(batchID: 0, sequences: [1, 2, 3]))
        guard case .setAside(let record, _) = try apply(Absurd(testDescription: "", status: .rejected, index: 2)) else {
            Issue.record("index 2 of 3 sets record 3 aside")
            return
        }
        #expect(record.sequence == 3)
        guard
            case .fatal(let error) = try apply(
                Absurd(testDescription: "", status: .unsupportedVersion, supported: Array(2...17)))
        else {
            Issue.record("16 versions are an answer")
            return
        }
        #expect(error.code.exitCode == 69)
    }

    @Test("a reason is kept and shown to at most 500 scalars, however long, also one grapheme of 100,000 scalars")
    func longReasonIsCut() throws {
        for reason in [String(repeating: "x", count: 100_000), "e" + String(repeating: "\u{301}", count: 100_000)] {
            var (window, id) = Self.window()
            let batch = try #require(window.batch(id: id))
            let ack = Ack(
                device: "cart-1", first: batch.first, last: batch.last, status: .rejected, index: 1, reason: reason)
            guard case .setAside(_, let kept) = window.apply(ack, now: 1) else {
                Issue.record("index 1 sets a record aside")
                return
            }
            #expect(kept.unicodeScalars.count <= Ack.maxReasonScalars + 1)
            #expect(kept.hasSuffix("…"))
            #expect(ack.shownReason.unicodeScalars.count <= Ack.maxReasonScalars + 1)
        }
        #expect(Ack(device: "cart-1", first: 1, last: 1, status: .retry).shownReason == "no reason given")
        #expect(Ack(device: "cart-1", first: 1, last: 1, status: .retry, reason: "busy").shownReason == "busy")
    }
}
