import Foundation
import GRDB
import Testing

@testable import JetbridgeAggregator
@testable import JetbridgeStore

/// `HotStatement` binds through the SQLite C API; a bind SQLite refuses must throw rather than leave the previous
/// record's value bound for the next step.
@Suite struct HotStatementTests {
    @Test func aRefusedBindThrowsAndAnEmptyBlobStaysABlob() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a TEXT NOT NULL, b BLOB NOT NULL)")
            let insert = try HotStatement(db, sql: "INSERT INTO t (a, b) VALUES (?, ?)")
            try insert.bind("first", at: 1)
            try insert.bind(Data([1, 2]), at: 2)
            #expect(try insert.run() == 1)
            // Parameter 3 does not exist: SQLITE_RANGE.
            #expect(throws: DatabaseError.self) { try insert.bind("second", at: 3) }
            // An empty blob is bound as an empty blob, not as NULL (which NOT NULL would refuse).
            try insert.bind("empty", at: 1)
            try insert.bind(Data(), at: 2)
            #expect(try insert.run() == 1)
            #expect(try Data.fetchAll(db, sql: "SELECT b FROM t ORDER BY rowid") == [Data([1, 2]), Data()])
        }
    }

    /// Texts and blobs are bound in place from buffers the statement keeps (`BoundBytes`): each record's values must
    /// be stored whole whatever the previous record's sizes (a buffer grows past its first 64 bytes, and a shorter
    /// value after a longer one keeps only its own bytes), and once the `HotStatement` is gone its cached statement
    /// must hold no pointer into the freed buffers (its parameters are NULL again).
    @Test func valuesBoundInPlaceAreStoredWholeAndUnboundAfterwards() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id BLOB, a TEXT, b BLOB)")
            let sql = "INSERT INTO t (id, a, b) VALUES (?, ?, ?)"
            let rows: [(UUID, String, Data)] = [
                (UUID(), "short", Data([1])),
                (UUID(), String(repeating: "long text é ", count: 40), Data((0..<1_000).map { UInt8($0 % 251) })),
                (UUID(), "", Data()),
                (UUID(), "after", Data([9, 8, 7])),
            ]
            do {
                let insert = try HotStatement(db, sql: sql)
                for (id, text, bytes) in rows {
                    // Built here and gone before the step: what is bound is the statement's own copy.
                    try insert.bind(id, at: 1)
                    try insert.bind(String(text.unicodeScalars), at: 2)
                    try insert.bind(Data(bytes), at: 3)
                    #expect(try insert.run() == 1)
                }
            }
            let stored = try Row.fetchAll(db, sql: "SELECT id, a, b FROM t ORDER BY rowid")
            #expect(stored.count == rows.count)
            for (row, (id, text, bytes)) in zip(stored, rows) {
                #expect(row[0] as Data == id.blob)
                #expect(row[1] as String == text)
                #expect(row[2] as Data == bytes)
            }
            // The same cached statement, stepped with nothing bound again, inserts NULLs: no stale pointer was left.
            #expect(try HotStatement(db, sql: sql).run() == 1)
            let last = try #require(try Row.fetchOne(db, sql: "SELECT id, a, b FROM t ORDER BY rowid DESC LIMIT 1"))
            #expect(last[0] as DatabaseValue == .null && last[1] as DatabaseValue == .null)
            #expect(last[2] as DatabaseValue == .null)
        }
    }
}
