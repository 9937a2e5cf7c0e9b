import ArgumentParser
import Foundation
import JetbridgeCLI
import JetbridgeAggregator
import Logging

/// `--store`, on the commands that open the store (`serve`, `report`, `receipts rebuild`, `store migrate`).
struct StoreOption: ParsableArguments {
    @Option(
        name: .customLong("store"),
        help: ArgumentHelp(
            "The store: a SQLite file (relative to the home) or postgres://user@host:port/database, also with "
                + "several servers (host1:port1,host2:port2), ?target_session_attrs=, ?sslmode= and ?sslrootcert= "
                + "(docs/AGGREGATOR.md, \"Shared store\"; default: the configuration's `store`, else jetbridge.sqlite).",
            valueName: "url"))
    var store: String?

    /// `configuration` with `--store` applied (the flag wins over the file).
    func applied(to configuration: AggregatorConfiguration) -> AggregatorConfiguration {
        var configuration = configuration
        if let store { configuration.store = store }
        return configuration
    }
}

struct StoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store", abstract: "Manage the store.", subcommands: [Migrate.self])

    struct Migrate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the store or bring its schema up to date, and print its schema version.",
            discussion: """
                `serve` applies the migrations a store lacks when it starts; this command does it ahead of time \
                (before starting several aggregators on one PostgreSQL database, or after an upgrade). Safe to run \
                again, and while aggregators run: two processes migrating one database at once migrate it once.

                Examples:
                  jetbridge-aggregator store migrate
                  jetbridge-aggregator store migrate --store postgres://jetbridge@db/jetbridge

                In the URL, the user and the password are percent-encoded, decoded once as libpq does: write % as \
                %25, @ as %40, : as %3A, / as %2F (better: PGPASSWORD, or ?password_file=PATH, a file only its \
                owner may read).

                Exit codes: 0 done, 65 bad store URL, login refused, a password file others may read or a SQLite \
                store in a directory others may write, 69 PostgreSQL unreachable, 73 a symbolic link at the SQLite \
                store (or its -wal, -shm, -journal), 75 the store is busy, 1 other failures.
                """)

        @OptionGroup var global: GroundOptions
        @OptionGroup var storeOption: StoreOption

        func run() throws {
            let logger = Logger(label: AggregatorTool.name)
            let configuration = storeOption.applied(to: try global.configuration())
            print(try AggregatorTools.migrateStore(home: global.aggregatorHome, configuration: configuration, logger: logger))
        }
    }
}
