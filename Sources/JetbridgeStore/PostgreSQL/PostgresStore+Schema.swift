import Foundation
import NIOCore
import NIOPosix
import PostgresNIO

// The schema: its migrations, applied in order under an advisory lock, and its version.
extension PostgresStore {
    /// The schema, one entry per version, applied in order on open under an advisory lock (see ``migrate()``).
    ///
    /// Text columns compare as bytes (`COLLATE "C"`), like SQLite's BINARY collation, so that every ordering (flights,
    /// seats, the receipt walk) is the SQLite store's. `seq` columns give "order of first arrival" (SQLite's rowid):
    /// an upsert that raises a revision keeps its row's `seq`.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE orders (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id uuid NOT NULL PRIMARY KEY,
                revision bigint NOT NULL CHECK (revision >= 1),
                flight text COLLATE "C" NOT NULL,
                seat text COLLATE "C" NOT NULL,
                device text COLLATE "C" NOT NULL,
                record bytea NOT NULL
            )
            """,
            "CREATE INDEX orders_flight ON orders (flight, seat)",
            """
            CREATE TABLE scans (
                seq bigint GENERATED ALWAYS AS IDENTITY,
                id uuid NOT NULL PRIMARY KEY,
                flight text COLLATE "C" NOT NULL,
                tag uuid NOT NULL,
                point smallint NOT NULL CHECK (point IN (0, 1)),
                scanned_at double precision NOT NULL,
                owner text COLLATE "C" NOT NULL CHECK (char_length(owner) = 4),
                weight double precision NOT NULL CHECK (weight >= 0),
                device text COLLATE "C" NOT NULL
            )
            """,
            "CREATE INDEX scans_flight_tag ON scans (flight, tag)",
            """
            CREATE TABLE devices (
                device text COLLATE "C" NOT NULL PRIMARY KEY,
                last_sync double precision,
                batches bigint NOT NULL DEFAULT 0,
                records bigint NOT NULL DEFAULT 0,
                new_records bigint NOT NULL DEFAULT 0,
                duplicates bigint NOT NULL DEFAULT 0,
                rejects bigint NOT NULL DEFAULT 0,
                last_reject_at double precision,
                last_reject_reason text
            )
            """,
            """
            CREATE TABLE dirty_receipts (
                flight text COLLATE "C" NOT NULL,
                seat text COLLATE "C" NOT NULL,
                generation bigint NOT NULL,
                PRIMARY KEY (flight, seat)
            )
            """,
            """
            CREATE TABLE flights (
                flight text COLLATE "C" NOT NULL PRIMARY KEY,
                currency text COLLATE "C" NOT NULL
            )
            """,
            // A corrected order that moves to another seat (or flight) leaves the old seat's receipt stale: marked
            // by the same statement, hence in the same transaction, as SQLite's trigger does.
            """
            CREATE FUNCTION jetbridge_order_moved() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO dirty_receipts (flight, seat, generation) VALUES (OLD.flight, OLD.seat, 1)
                ON CONFLICT (flight, seat) DO UPDATE SET generation = dirty_receipts.generation + 1;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER orders_moved AFTER UPDATE OF flight, seat ON orders FOR EACH ROW
            WHEN (OLD.flight IS DISTINCT FROM NEW.flight OR OLD.seat IS DISTINCT FROM NEW.seat)
            EXECUTE FUNCTION jetbridge_order_moved()
            """,
        ],
        [
            // Batches answered `limited` (a device past its records per second or per flight), per device; SQLite's v4.
            """
            ALTER TABLE devices ADD COLUMN limited bigint NOT NULL DEFAULT 0,
                ADD COLUMN last_limited_at double precision, ADD COLUMN last_limited_reason text
            """
        ],
        [
            // Every transaction locks rows in one order: flights, orders, scans, devices, receipt marks. The trigger
            // marked a moved order's old seat inside the orders statement, before the devices rows, and deadlocked
            // against a transaction that held a device's row and waited for the mark (issue 23 item 11). `apply`
            // now learns the old seat from the upsert itself (`moved_from_*`, set by the update from the row it
            // replaces) and marks it with the other seats, last.
            "DROP TRIGGER orders_moved ON orders",
            "DROP FUNCTION jetbridge_order_moved()",
            """
            ALTER TABLE orders ADD COLUMN moved_from_flight text COLLATE "C",
                ADD COLUMN moved_from_seat text COLLATE "C"
            """,
            // The receipt walk claims seats for a while instead of holding their rows locked while it writes files
            // (issue 23 item 10): a claim ends when its holder clears it, or at `claimed_until`.
            """
            ALTER TABLE dirty_receipts ADD COLUMN claimed_by text COLLATE "C",
                ADD COLUMN claimed_until timestamptz
            """,
        ],
        [
            // Version 4: the per-device flight limits' counters (SQLite's `device-flights`), records first stored per
            // device and flight, kept by `apply`; existing rows counted, as first stored long ago (0).
            """
            CREATE TABLE device_flights (
                device text COLLATE "C" NOT NULL,
                flight text COLLATE "C" NOT NULL,
                records bigint NOT NULL CHECK (records >= 0),
                first_stored_at double precision NOT NULL,
                PRIMARY KEY (device, flight)
            )
            """,
            "CREATE INDEX device_flights_window ON device_flights (device, first_stored_at)",
            """
            INSERT INTO device_flights (device, flight, records, first_stored_at)
            SELECT device, flight, sum(n), 0 FROM (
                SELECT device, flight, count(*) AS n FROM orders GROUP BY device, flight
                UNION ALL
                SELECT device, flight, count(*) AS n FROM scans GROUP BY device, flight
            ) AS stored GROUP BY device, flight
            """,
        ],
        [
            // Version 5: a device's summary of a flight (docs/PROTOCOL.md, "Proof of delivery") reads that device's
            // rows of that flight and no other's, from the index alone: entries of one (device, flight) are in heap
            // order, so an insert appends at one spot per device and flight.
            "CREATE INDEX orders_device_flight ON orders (device, flight) INCLUDE (id, revision)",
            "CREATE INDEX scans_device_flight ON scans (device, flight) INCLUDE (id)",
        ],
        [
            // Version 6: the console's reads (PostgresStore+Console.swift): a flight's bags with their status from
            // the index alone (index-only scans of (flight, tag, point); the old (flight, tag) index is replaced by
            // it), and a flight's devices. SQLite's `console-indexes`.
            "DROP INDEX scans_flight_tag",
            "CREATE INDEX scans_flight_tag ON scans (flight, tag, point)",
            "CREATE INDEX scans_flight_device ON scans (flight, device)",
        ],
        [
            // Version 7: the ground's view of the fleet (docs/PROTOCOL.md, "Announce"), SQLite's
            // `fleet-announcements`: per device and flight, its last announcement and the ground's confirmation since.
            """
            CREATE TABLE announcements (
                device text COLLATE "C" NOT NULL,
                flight text COLLATE "C" NOT NULL,
                announced_at double precision NOT NULL,
                confirmed_at double precision,
                PRIMARY KEY (device, flight)
            )
            """,
            "CREATE INDEX announcements_flight ON announcements (flight, device)",
            "CREATE INDEX announcements_recent ON announcements (announced_at)",
        ],
        [
            // Version 8: proof of delivery answers `confirmed` from a digest kept per device and flight (docs/STORE.md,
            // "Kept digests"), SQLite's `kept-digests`: `apply` adds the rows it stores. A row deleted or changed by
            // anything (an amendment, an operator's statement) leaves a mark in `stale_digests` for its device and
            // flight, an append that waits on no lock, so the triggers keep every transaction's lock order; the next
            // summary of that pair reads the rows again and clears the marks. A TRUNCATE marks every pair stale.
            // Existing pairs start stale. Summaries now read rows rarely, so `scans_device_flight` goes: the console's
            // `scans_flight_device` finds the same rows, and every scan's insert writes one index entry less (issue 29).
            "DROP INDEX IF EXISTS scans_device_flight",
            """
            ALTER TABLE device_flights ADD COLUMN held bigint NOT NULL DEFAULT 0,
                ADD COLUMN digest_hi bigint NOT NULL DEFAULT 0, ADD COLUMN digest_lo bigint NOT NULL DEFAULT 0,
                ADD COLUMN digest_valid boolean NOT NULL DEFAULT false
            """,
            """
            CREATE TABLE stale_digests (
                device text COLLATE "C" NOT NULL,
                flight text COLLATE "C" NOT NULL
            )
            """,
            "CREATE INDEX stale_digests_pair ON stale_digests (device, flight)",
            """
            CREATE FUNCTION jetbridge_digest_stale() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO stale_digests (device, flight) VALUES (OLD.device, OLD.flight);
                RETURN NULL;
            END $$
            """,
            """
            CREATE FUNCTION jetbridge_digests_stale() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                UPDATE device_flights SET digest_valid = false WHERE digest_valid;
                RETURN NULL;
            END $$
            """,
            """
            CREATE TRIGGER orders_digest_stale AFTER UPDATE OF id, revision, flight, device OR DELETE ON orders
            FOR EACH ROW EXECUTE FUNCTION jetbridge_digest_stale()
            """,
            """
            CREATE TRIGGER scans_digest_stale AFTER UPDATE OF id, flight, device OR DELETE ON scans
            FOR EACH ROW EXECUTE FUNCTION jetbridge_digest_stale()
            """,
            "CREATE TRIGGER orders_digests_truncated AFTER TRUNCATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION jetbridge_digests_stale()",
            "CREATE TRIGGER scans_digests_truncated AFTER TRUNCATE ON scans FOR EACH STATEMENT EXECUTE FUNCTION jetbridge_digests_stale()",
        ],
        // v9: `apply` keeps the kept digests through the corrections it stores (docs/STORE.md, "Kept digests"): in its
        // transactions (`jetbridge.applying` set local to `on`) an order's update leaves no mark; apply adds the
        // difference itself, or marks the pair.
        [
            """
            CREATE OR REPLACE FUNCTION jetbridge_digest_stale() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'orders'
                    AND current_setting('jetbridge.applying', true) = 'on' THEN
                    RETURN NULL;
                END IF;
                INSERT INTO stale_digests (device, flight) VALUES (OLD.device, OLD.flight);
                RETURN NULL;
            END $$
            """,
        ],
        // v10: a row moved into another pair by hand (its flight or device changed) marks that pair too, as SQLite's
        // `digest-stale-new-pair`: its kept digest no longer counted the row, and only the old pair was marked. A
        // summary's mismatch is then answered from a kept digest the rows were read for once (RowReadDigests), which
        // needs every kept digest marked valid to be the rows'.
        [
            """
            CREATE OR REPLACE FUNCTION jetbridge_digest_stale() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND TG_TABLE_NAME = 'orders'
                    AND current_setting('jetbridge.applying', true) = 'on' THEN
                    RETURN NULL;
                END IF;
                INSERT INTO stale_digests (device, flight) VALUES (OLD.device, OLD.flight);
                IF TG_OP = 'UPDATE' AND (NEW.device, NEW.flight) IS DISTINCT FROM (OLD.device, OLD.flight) THEN
                    INSERT INTO stale_digests (device, flight) VALUES (NEW.device, NEW.flight);
                END IF;
                RETURN NULL;
            END $$
            """,
        ],
        // v11: when a device first announced each flight (SQLite's `announcements-first`): a device announces new
        // flights only up to its flights per day (docs/PROTOCOL.md, "Announce"), and a flight announced again is not
        // new. Existing rows: 0, outside every window. New rows an aggregator of an earlier version inserts (during a
        // rolling upgrade) get the time of the insert.
        [
            "ALTER TABLE announcements ADD COLUMN first_announced_at double precision NOT NULL DEFAULT 0",
            "ALTER TABLE announcements ALTER COLUMN first_announced_at SET DEFAULT extract(epoch from now())",
        ],
        // v12: the devices of one flight from an index (SQLite's `device-flights-flight`), not a scan of every pair.
        ["CREATE INDEX device_flights_flight ON device_flights (flight)"],
    ]

    /// The advisory lock key migrations hold ("Jetb"), so that two processes opening one database at once migrate
    /// it once.
    static let migrationLock: Int = 0x4A65_7462

    // MARK: Schema

    /// Applies the migrations this database lacks, in one transaction under an advisory lock: a second process
    /// opening the same database waits, then finds them applied. Safe to call again (it applies nothing).
    ///
    /// No statement or answer timeout applies (a migration may rewrite a large table), and the wait for another
    /// process's migration is not bounded by the lock timeout; the migrations' own statements are.
    public func migrate() throws {
        try locked(timeout: .some(nil)) {
            try transaction {
                try run("SET LOCAL statement_timeout = 0")
                try run("SET LOCAL lock_timeout = 0")
                try run("SELECT pg_advisory_xact_lock(\(Self.migrationLock))")
                try run(PostgresQuery(unsafeSQL: "SET LOCAL lock_timeout = \(Timeouts.milliseconds(timeouts.lock))"))
                try run(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version integer NOT NULL PRIMARY KEY,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """)
                var applied: Set<Int> = []
                for row in try run("SELECT version FROM schema_migrations") {
                    applied.insert(try row.decode(Int.self))
                }
                for (offset, statements) in Self.migrations.enumerated() where !applied.contains(offset + 1) {
                    for statement in statements { try run(PostgresQuery(unsafeSQL: statement)) }
                    try run("INSERT INTO schema_migrations (version) VALUES (\(offset + 1))")
                    logger.info("store migrated", metadata: ["store": "\(location.redacted)", "version": .stringConvertible(offset + 1)])
                }
                return ((), true)
            }
        }
    }

    /// The schema version the database is at.
    public func schemaVersion() throws -> Int {
        try locked {
            try run("SELECT coalesce(max(version), 0) FROM schema_migrations").first.map { try $0.decode(Int.self) } ?? 0
        }
    }
}
