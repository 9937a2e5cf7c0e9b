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
}
