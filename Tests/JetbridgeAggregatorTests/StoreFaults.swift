import Foundation
import GRDB

extension Fixture {
    /// Makes every insert of an order for `seat` fail inside the store's transaction, as a full disk would: through a
    /// trigger installed from a second connection, so the store under test is not changed.
    func failOrders(seat: String) throws {
        try DatabaseQueue(path: storePath).write { db in
            try db.execute(
                sql: """
                    CREATE TRIGGER injected_failure BEFORE INSERT ON orders WHEN NEW.seat = '\(seat)'
                    BEGIN SELECT RAISE(ABORT, 'injected failure'); END
                    """)
        }
    }

    /// Removes what ``failOrders(seat:)`` installed.
    func healOrders() throws {
        try DatabaseQueue(path: storePath).write { try $0.execute(sql: "DROP TRIGGER injected_failure") }
    }

    /// Makes the store thread's idle write probe fail too, as it would on a full disk: a directory where the probe
    /// creates its file (`.space-probe` next to the store). Without it the probe succeeds within an idle second of a
    /// failed transaction and `/readyz` is ready again before a slow test has looked.
    func failWriteProbe() throws {
        try FileManager.default.createDirectory(atPath: writeProbePath, withIntermediateDirectories: false)
    }

    /// Removes what ``failWriteProbe()`` made.
    func healWriteProbe() throws {
        try FileManager.default.removeItem(atPath: writeProbePath)
    }

    private var writeProbePath: String { (storePath as NSString).deletingLastPathComponent + "/.space-probe" }
}
