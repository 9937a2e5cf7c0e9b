import Foundation
import SystemSupport

/// The console's browser sessions (docs/AGGREGATOR.md, "Console"): a sign-in with the token starts one and the cookie
/// carries only its id, 32 random bytes that say nothing of the token; "Sign out" ends it. Kept in memory only, so a
/// restart of `serve` ends every session. At most ``capacity`` at once (a new one pushes out the oldest), each ending
/// ``lifetime`` after its sign-in.
struct ConsoleSessions: Sendable {
    /// Sessions held at once: past it a sign-in ends the oldest session.
    static let capacity = 1_024
    /// How long a session lasts after its sign-in, in seconds: 12 hours, a shift.
    static let lifetime: TimeInterval = 12 * 3_600

    private struct Table {
        /// Each session's end, by id.
        var ends: [String: Date] = [:]
        /// Ids in the order they began (so in the order they end); ended ones are skipped when met. From `head` on.
        var order: [String] = []
        var head = 0
    }

    private let table = Locked(Table())
    private let capacity: Int
    private let lifetime: TimeInterval
    /// The clock (tests move it).
    private let now: @Sendable () -> Date

    init(
        capacity: Int = ConsoleSessions.capacity, lifetime: TimeInterval = ConsoleSessions.lifetime,
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.capacity = max(1, capacity)
        self.lifetime = lifetime
        self.now = now
    }

    /// Starts a session and returns its id (43 characters of base64url).
    func begin() -> String {
        let id = ConsoleToken.generate()
        let now = now()
        table.withLock { table in
            Self.dropEnded(&table, now: now)
            while table.ends.count >= capacity, table.head < table.order.count {
                table.ends[table.order[table.head]] = nil
                table.head += 1
            }
            table.ends[id] = now + lifetime
            table.order.append(id)
            Self.compact(&table)
        }
        return id
    }

    /// Whether `id` names a session that has not ended.
    func isActive(_ id: some StringProtocol) -> Bool {
        let now = now()
        return table.withLock { table in
            guard let end = table.ends[String(id)] else { return false }
            if end > now { return true }
            table.ends[String(id)] = nil
            return false
        }
    }

    /// Ends the session `id`, if there is one.
    func end(_ id: some StringProtocol) {
        table.withLock { table in
            table.ends[String(id)] = nil
            Self.compact(&table)
        }
    }

    /// Sessions held now (ended ones not yet dropped are not counted).
    var count: Int {
        let now = now()
        return table.withLock { table in table.ends.values.count { $0 > now } }
    }

    /// Ids held in the table, ended or not (tests: the table's size is bounded).
    var held: Int { table.withLock { max($0.ends.count, $0.order.count - $0.head) } }

    /// Drops the sessions that have ended, oldest first: they began first, so they are at the head.
    private static func dropEnded(_ table: inout Table, now: Date) {
        while table.head < table.order.count {
            let id = table.order[table.head]
            if let end = table.ends[id], end > now { break }
            table.ends[id] = nil
            table.head += 1
        }
    }

    /// Keeps `order` no longer than twice the live sessions (signed-out ids leave holes in it until they are met).
    private static func compact(_ table: inout Table) {
        let pending = table.order.count - table.head
        guard table.head >= 1_024 || pending > 2 * table.ends.count + 64 else { return }
        table.order = table.order[table.head...].filter { table.ends[$0] != nil }
        table.head = 0
    }
}
