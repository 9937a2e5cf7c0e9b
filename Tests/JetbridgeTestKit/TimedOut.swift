/// A wait that took far longer than any healthy run; it only bounds a hang, never measures speed (a test never fails
/// on time: a loaded full suite can keep a task waiting for the cooperative pool for many seconds).
public struct TimedOut: Error, CustomStringConvertible, Sendable {
    public let description: String

    /// - Parameter what: What was awaited, as in "timed out waiting for <what>".
    public init(what: String) { description = "timed out waiting for \(what)" }

    /// - Parameters:
    ///   - condition: The condition that never held, as in "timed out waiting until <condition>".
    ///   - timeout: How long it waited.
    public init(until condition: String, after timeout: Duration) {
        description = "timed out after \(timeout) waiting until \(condition)"
    }
}
