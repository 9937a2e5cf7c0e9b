import Foundation
internal import GRDB
import JetbridgeModel
import JetbridgeProtocol

extension SQLiteStore {
    /// How many of the migrations below the file has applied.
    public func schemaVersion() throws -> Int {
        try pool.read { db in try Self.migrator.appliedMigrations(db).count }
    }

    /// The schema, as migrations so that a later version can grow it in place.
    ///
    /// Tables are rowid tables: rows append at the end of the table (each transaction's in id order) and only the
    /// narrow UNIQUE index on the 16-byte id is random, which keeps inserts near SQLite's one-transaction floor (see
    /// docs/STORE.md). The one extra index, `orders(flight)`, serves receipts and per-flight reports; it grows at one
    /// hot spot per flight. An index on `(flight, seat)` had one per seat, and each commit rewrote nearly all its
    /// pages: measured, it cost ~20% of the store's throughput.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE orders (
                        id BLOB NOT NULL CHECK (length(id) = 16),
                        revision INTEGER NOT NULL CHECK (revision >= 1),
                        flight TEXT NOT NULL,
                        seat TEXT NOT NULL,
                        device TEXT NOT NULL,
                        record BLOB NOT NULL
                    );
                    CREATE UNIQUE INDEX orders_id ON orders(id);
                    CREATE INDEX orders_flight ON orders(flight);

                    CREATE TABLE scans (
                        id BLOB NOT NULL CHECK (length(id) = 16),
                        flight TEXT NOT NULL,
                        tag BLOB NOT NULL CHECK (length(tag) = 16),
                        point INTEGER NOT NULL CHECK (point IN (0, 1)),
                        scanned_at REAL NOT NULL,
                        owner TEXT NOT NULL CHECK (length(owner) = 4),
                        weight REAL NOT NULL CHECK (weight >= 0),
                        device TEXT NOT NULL,
                        record BLOB NOT NULL
                    );
                    CREATE UNIQUE INDEX scans_id ON scans(id);

                    CREATE TABLE devices (
                        device TEXT NOT NULL PRIMARY KEY,
                        last_sync REAL,
                        batches INTEGER NOT NULL DEFAULT 0,
                        records INTEGER NOT NULL DEFAULT 0,
                        new_records INTEGER NOT NULL DEFAULT 0,
                        duplicates INTEGER NOT NULL DEFAULT 0,
                        rejects INTEGER NOT NULL DEFAULT 0,
                        last_reject_at REAL,
                        last_reject_reason TEXT
                    ) WITHOUT ROWID;

                    CREATE TABLE dirty_receipts (
                        flight TEXT NOT NULL,
                        seat TEXT NOT NULL,
                        generation INTEGER NOT NULL,
                        PRIMARY KEY (flight, seat)
                    ) WITHOUT ROWID;

                    -- A corrected order that moves to another seat (or flight) leaves the old seat's receipt stale:
                    -- mark it in the same statement, hence the same transaction, as the update.
                    CREATE TRIGGER orders_moved AFTER UPDATE OF flight, seat ON orders
                    WHEN OLD.flight IS NOT NEW.flight OR OLD.seat IS NOT NEW.seat
                    BEGIN
                        INSERT INTO dirty_receipts (flight, seat, generation) VALUES (OLD.flight, OLD.seat, 1)
                        ON CONFLICT (flight, seat) DO UPDATE SET generation = generation + 1;
                    END;
                    """)
        }
        migrator.registerMigration("v2") { db in
            // Every field of a scan is a column, and bags are merged from the columns; nothing ever read a scan's
            // bytes back. Dropping them stores ~170 fewer bytes per scan, so commits write fewer pages to the WAL
            // (docs/STORE.md, "Measured"). SQLite rewrites the table once here.
            try db.execute(sql: "ALTER TABLE scans DROP COLUMN record")
        }
        migrator.registerMigration("v3") { db in
            // A flight sells in one currency (docs/PROTOCOL.md): the first order stored for a flight fixes it, and
            // `apply` refuses an order in another. A store from an earlier version gets each flight's currency from
            // its oldest stored order.
            try db.execute(
                sql: """
                    CREATE TABLE flights (
                        flight TEXT NOT NULL PRIMARY KEY,
                        currency TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
            let rows = try Row.fetchCursor(db, sql: "SELECT flight, record FROM orders ORDER BY rowid")
            let insert = try db.makeStatement(sql: "INSERT OR IGNORE INTO flights (flight, currency) VALUES (?, ?)")
            while let row = try rows.next() {
                let bytes: Data = row[1]
                guard case .order(let order) = try? RecordCoding.decode(bytes) else { continue }
                try insert.execute(arguments: [row[0] as String, order.currency])
            }
        }
        migrator.registerMigration("device-limits") { db in
            // Batches answered `limited` (a device past its records per second or per flight), per device.
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN limited INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE devices ADD COLUMN last_limited_at REAL;
                    ALTER TABLE devices ADD COLUMN last_limited_reason TEXT;
                    """)
        }
        migrator.registerMigration("device-flights") { db in
            // The per-device flight limits' counters (docs/STORE.md, "Per-device flight limits"): records first stored
            // per device and flight, kept by `apply` in the same transaction; the window index answers "flights first
            // stored in the last 24 hours" from a range of one device's entries. A store from an earlier version gets
            // each pair's count of stored orders and scans, as first stored long ago (0: outside every window; when
            // they came was not recorded). SQLite reads `orders` and `scans` once each here.
            try db.execute(
                sql: """
                    CREATE TABLE device_flights (
                        device TEXT NOT NULL,
                        flight TEXT NOT NULL,
                        records INTEGER NOT NULL CHECK (records >= 0),
                        first_stored_at REAL NOT NULL,
                        PRIMARY KEY (device, flight)
                    ) WITHOUT ROWID;
                    CREATE INDEX device_flights_window ON device_flights(device, first_stored_at);
                    INSERT INTO device_flights (device, flight, records, first_stored_at)
                    SELECT device, flight, sum(n), 0 FROM (
                        SELECT device, flight, count(*) AS n FROM orders GROUP BY device, flight
                        UNION ALL
                        SELECT device, flight, count(*) AS n FROM scans GROUP BY device, flight
                    ) GROUP BY device, flight;
                    """)
        }
        migrator.registerMigration("proof-of-delivery") { db in
            // A device's summary of a flight (docs/PROTOCOL.md, "Proof of delivery") reads that device's rows of that
            // flight and no other's. Entries of one (device, flight) are in rowid order, so each insert appends at one
            // hot spot per device and flight, as `orders_flight` does per flight.
            try db.execute(
                sql: """
                    CREATE INDEX orders_device_flight ON orders(device, flight);
                    CREATE INDEX scans_device_flight ON scans(device, flight);
                    """)
        }
        migrator.registerMigration("console-indexes") { db in
            // The console's reads (SQLiteStore+Console.swift): a flight's bags in tag order with their status from
            // the index alone, and its devices. Without them a page of a 600,000-bag flight sorted every scan of the
            // store. Each costs the scans' inserts one more index write (docs/STORE.md, "Schema").
            try db.execute(
                sql: """
                    CREATE INDEX scans_flight_tag ON scans(flight, tag, point);
                    CREATE INDEX scans_flight_device ON scans(flight, device);
                    """)
        }
        migrator.registerMigration("fleet-announcements") { db in
            // The ground's view of the fleet (docs/PROTOCOL.md, "Announce"): per device and flight, when the device
            // last announced it holds records of the flight the ground has not confirmed, and when the ground last
            // confirmed the device's summary of it since. The index serves `report devices --flight` and the
            // per-flight counts of `status` and /metrics (flights announced in a recent window).
            try db.execute(
                sql: """
                    CREATE TABLE announcements (
                        device TEXT NOT NULL,
                        flight TEXT NOT NULL,
                        announced_at REAL NOT NULL,
                        confirmed_at REAL,
                        PRIMARY KEY (device, flight)
                    ) WITHOUT ROWID;
                    CREATE INDEX announcements_flight ON announcements(flight, device);
                    CREATE INDEX announcements_recent ON announcements(announced_at);
                    """)
        }
        migrator.registerMigration("kept-digests") { db in
            // Proof of delivery answers `confirmed` from a digest kept per device and flight (docs/STORE.md, "Kept
            // digests"): `apply` adds the rows it stores; these triggers mark a pair's digest stale when one of its rows
            // is deleted or changed by anything (an amendment, an operator's statement), and the next summary reads
            // the rows again. Existing pairs start stale: each is read once, at its first summary. Summaries now read
            // rows rarely, so `scans_device_flight` goes: the console's `scans_flight_device` finds the same rows, and
            // every scan's insert writes one index entry less (issue 29).
            try db.execute(
                sql: """
                    DROP INDEX IF EXISTS scans_device_flight;
                    ALTER TABLE device_flights ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE device_flights ADD COLUMN digest_hi INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE device_flights ADD COLUMN digest_lo INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE device_flights ADD COLUMN digest_valid INTEGER NOT NULL DEFAULT 0;
                    CREATE TRIGGER orders_digest_stale AFTER UPDATE OF id, revision, flight, device ON orders BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE device = OLD.device AND flight = OLD.flight AND digest_valid;
                    END;
                    CREATE TRIGGER orders_digest_deleted AFTER DELETE ON orders BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE device = OLD.device AND flight = OLD.flight AND digest_valid;
                    END;
                    CREATE TRIGGER scans_digest_stale AFTER UPDATE OF id, flight, device ON scans BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE device = OLD.device AND flight = OLD.flight AND digest_valid;
                    END;
                    CREATE TRIGGER scans_digest_deleted AFTER DELETE ON scans BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE device = OLD.device AND flight = OLD.flight AND digest_valid;
                    END;
                    """)
        }
        migrator.registerMigration("digest-stale-new-pair") { db in
            // A row moved into another pair by hand (its flight or device changed) marks that pair stale too: its kept
            // digest did not count the row, and only the old pair was marked. A summary's mismatch is then answered
            // from a kept digest the rows were read for once (RowReadDigests), which needs every valid kept digest to
            // be the rows'. `apply`'s own corrections give both pairs back the validity they had (`validBefore`).
            try db.execute(
                sql: """
                    DROP TRIGGER orders_digest_stale;
                    CREATE TRIGGER orders_digest_stale AFTER UPDATE OF id, revision, flight, device ON orders BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE ((device = OLD.device AND flight = OLD.flight) OR (device = NEW.device AND flight = NEW.flight))
                            AND digest_valid;
                    END;
                    DROP TRIGGER scans_digest_stale;
                    CREATE TRIGGER scans_digest_stale AFTER UPDATE OF id, flight, device ON scans BEGIN
                        UPDATE device_flights SET digest_valid = 0
                        WHERE ((device = OLD.device AND flight = OLD.flight) OR (device = NEW.device AND flight = NEW.flight))
                            AND digest_valid;
                    END;
                    """)
        }
        migrator.registerMigration("announcements-first") { db in
            // When a device first announced each flight: a device announces new flights only up to its flights per
            // day (docs/PROTOCOL.md, "Announce"), and a flight announced again is not new. Existing rows: 0, outside
            // every window.
            try db.execute(
                sql: "ALTER TABLE announcements ADD COLUMN first_announced_at REAL NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("device-flights-flight") { db in
            // The devices of one flight (the fleet report, the console's flight page every 3 s): a seek, where the
            // primary key `(device, flight)` made it a scan of every device's every flight (1.5 million pairs in a
            // year of 1,000 devices). One entry per device and flight, not per record.
            try db.execute(sql: "CREATE INDEX device_flights_flight ON device_flights(flight)")
        }
        return migrator
    }

    static let upsertOrderSQL = """
        INSERT INTO orders (id, revision, flight, seat, device, record) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET revision = excluded.revision, flight = excluded.flight, seat = excluded.seat,
            device = excluded.device, record = excluded.record
        WHERE excluded.revision > orders.revision AND excluded.device = orders.device
        """

    /// Who owns a stored order: asked only when an upsert changed nothing (a duplicate, or another device's order).
    static let orderDeviceSQL = "SELECT device FROM orders WHERE id = ?"

    /// A stored order's revision, flight and device: asked before upserting an order that could raise it.
    static let storedOrderSQL = "SELECT revision, flight, device FROM orders WHERE id = ?"

    /// Whether a pair's kept digest is valid.
    static let pairValiditySQL = "SELECT digest_valid FROM device_flights WHERE device = ? AND flight = ?"

    /// Adds what raised revisions did to a pair's kept digest, and gives it back the validity it had before the
    /// transaction marked it (`?4`: it was valid; otherwise it stays as it is).
    static let reviseDigestSQL = """
        UPDATE device_flights SET held = held + ?1, digest_hi = digest_hi + ?2, digest_lo = digest_lo + ?3,
            digest_valid = CASE WHEN ?4 THEN 1 ELSE digest_valid END
        WHERE device = ?5 AND flight = ?6
        """

    static let flightCurrencySQL = "SELECT currency FROM flights WHERE flight = ?"

    static let insertFlightSQL = "INSERT INTO flights (flight, currency) VALUES (?, ?)"

    static let insertScanSQL = """
        INSERT INTO scans (id, flight, tag, point, scanned_at, owner, weight, device)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO NOTHING
        """

    static let markDirtySQL = """
        INSERT INTO dirty_receipts (flight, seat, generation) VALUES (?, ?, 1)
        ON CONFLICT (flight, seat) DO UPDATE SET generation = generation + 1
        """

    static let deviceBatchSQL = """
        INSERT INTO devices (device, last_sync, batches, records, new_records, duplicates) VALUES (?, ?, 1, ?, ?, ?)
        ON CONFLICT (device) DO UPDATE SET last_sync = max(coalesce(last_sync, excluded.last_sync), excluded.last_sync), batches = batches + 1,
            records = records + excluded.records, new_records = new_records + excluded.new_records,
            duplicates = duplicates + excluded.duplicates
        """

    /// A device's records on a flight (its primary key).
    static let deviceFlightSQL = "SELECT records FROM device_flights WHERE device = ? AND flight = ?"

    /// A device's flights first stored after a time, and the oldest of them (a range of `device_flights_window`).
    static let deviceWindowSQL = """
        SELECT count(*), min(first_stored_at) FROM device_flights WHERE device = ? AND first_stored_at > ?
        """

    /// Adds a transaction's new records to a device's count on a flight; the first sets when it was first stored.
    /// Adds a round's new records to a pair's counter and kept digest (docs/STORE.md, "Kept digests"); a pair's first
    /// row starts valid, as every row of the pair is this round's.
    static let addDeviceFlightSQL = """
        INSERT INTO device_flights (device, flight, records, first_stored_at, held, digest_hi, digest_lo, digest_valid)
        VALUES (?1, ?2, ?3, ?4, ?3, ?5, ?6, 1)
        ON CONFLICT (device, flight) DO UPDATE SET records = records + excluded.records, held = held + excluded.held,
            digest_hi = digest_hi + excluded.digest_hi, digest_lo = digest_lo + excluded.digest_lo
        """

    /// `?4`: how many limited batches.
    static let deviceLimitedSQL = """
        INSERT INTO devices (device, limited, last_limited_at, last_limited_reason) VALUES (?1, ?4, ?2, ?3)
        ON CONFLICT (device) DO UPDATE SET limited = limited + excluded.limited, last_limited_at = excluded.last_limited_at,
            last_limited_reason = excluded.last_limited_reason
        """

    /// `?4`: how many rejected batches.
    static let deviceRejectSQL = """
        INSERT INTO devices (device, rejects, last_reject_at, last_reject_reason) VALUES (?1, ?4, ?2, ?3)
        ON CONFLICT (device) DO UPDATE SET rejects = rejects + excluded.rejects, last_reject_at = excluded.last_reject_at,
            last_reject_reason = excluded.last_reject_reason
        """
}
