import Foundation

// Waits on conditions, never fixed sleeps: a sleep long enough for a loaded machine slows every run, and one short
// enough for a quiet one fails under load. Each wait polls with a deadline that only bounds a hang.
//
// The async waits sleep between polls (`Task.sleep`), so they never hold one of the cooperative pool's threads (two
// on the CI machine's two cores: one test blocking for 20 s there stalls half of every other async test). The
// blocking wait is for code that already runs on a thread of its own.

/// Polls `condition` every `interval` until it holds.
/// - Parameters:
///   - what: The condition in words, for the failure ("the batch is stored").
///   - timeout: How long before giving up: a bound on a hang, not a timing assertion.
///   - interval: The pause between polls.
///   - condition: Polled on the caller's task; must not block.
/// - Throws: ``TimedOut`` after `timeout`; what `condition` or a cancelled `Task.sleep` throws.
public func waitUntil(
    _ what: String, timeout: Duration = .seconds(20), every interval: Duration = .milliseconds(10),
    _ condition: () throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        if ContinuousClock.now > deadline { throw TimedOut(until: what, after: timeout) }
        try await Task.sleep(for: interval)
    }
}

/// Polls `attempt` every `interval` until it returns a value, such as a non-blocking receive.
/// - Parameters:
///   - timeout: How long before giving up.
///   - interval: The pause between polls.
///   - attempt: Polled on the caller's task; must not block; nil means "not yet".
/// - Returns: The first value, or nil after `timeout` (for tests where nothing arriving is the expected outcome).
/// - Throws: What `attempt` or a cancelled `Task.sleep` throws.
public func firstValue<T>(
    within timeout: Duration, every interval: Duration = .milliseconds(5), _ attempt: () throws -> T?
) async throws -> T? {
    let deadline = ContinuousClock.now + timeout
    while true {
        if let value = try attempt() { return value }
        if ContinuousClock.now > deadline { return nil }
        try await Task.sleep(for: interval)
    }
}

/// Polls `condition` every `interval` until it holds, blocking the calling thread: only for code on a thread of its
/// own (a test body moved off the cooperative pool), never in async code.
/// - Parameters:
///   - what: The condition in words, for the failure.
///   - timeout: How long before giving up: a bound on a hang, not a timing assertion.
///   - interval: The pause between polls.
///   - condition: Polled on the calling thread.
/// - Throws: ``TimedOut`` after `timeout`; what `condition` throws.
@available(*, noasync, message: "blocks a thread of the cooperative pool; use `await waitUntil`")
public func waitUntilBlocking(
    _ what: String, timeout: Duration = .seconds(20), every interval: Duration = .milliseconds(10),
    _ condition: () throws -> Bool
) throws {
    let deadline = ContinuousClock.now + timeout
    while try !condition() {
        if ContinuousClock.now > deadline { throw TimedOut(until: what, after: timeout) }
        let (seconds, attoseconds) = interval.components
        Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
    }
}

/// Runs `body`, failing with ``TimedOut`` if it has not finished after `seconds`.
/// - Parameters:
///   - what: What `body` waits for, for the failure.
///   - seconds: The bound.
///   - body: The work; cancelled at the bound.
/// - Returns: What `body` returns.
/// - Throws: ``TimedOut``, or what `body` throws.
public func withTimeout<T: Sendable>(
    _ what: String, seconds: Double = 20, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut(what: what)
        }
        defer { group.cancelAll() }
        guard let result = try await group.next() else { throw TimedOut(what: what) }
        return result
    }
}

/// The first element of `events` that `matches` accepts (a ZeroMQ monitor's events, for example).
/// - Parameters:
///   - events: The stream; read until a match.
///   - what: The event in words, for the failure.
///   - seconds: The bound.
///   - matches: The test for the wanted element.
/// - Returns: The element.
/// - Throws: ``TimedOut`` after `seconds`, or when the stream ends first.
public func firstEvent<Event: Sendable>(
    in events: AsyncStream<Event>, _ what: String, seconds: Double = 20,
    where matches: @escaping @Sendable (Event) -> Bool
) async throws -> Event {
    try await withTimeout(what, seconds: seconds) {
        for await event in events where matches(event) { return event }
        throw TimedOut(what: "\(what) (the stream ended)")
    }
}

/// The first element of `events` that `match` accepts, or nil after `seconds` or at the stream's end.
/// - Parameters:
///   - events: The stream; read until a match.
///   - seconds: The bound.
///   - match: The test for the wanted element.
/// - Returns: The element, or nil.
public func firstEvent<Event: Sendable>(
    _ events: AsyncStream<Event>, seconds: Double = 20, where match: @escaping @Sendable (Event) -> Bool
) async -> Event? {
    try? await firstEvent(in: events, "an event", seconds: seconds, where: match)
}
